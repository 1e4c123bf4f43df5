import Foundation

/// A process's `/proc/<pid>/stat`, as Linux writes it.
public enum ProcessStat {
    /// The fields after the command name, from the third (the state) on: `fields[0]` is the state,
    /// `fields[1]` the parent's id, `fields[11]` and `fields[12]` the user and system CPU time in
    /// clock ticks. Nil once the process is gone. The command name, in parentheses, may hold spaces
    /// and parentheses itself, so the fields start after the last closing one.
    public static func fields(of pid: pid_t) -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let nameEnd = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: nameEnd)...].split(separator: " ")
    }
}
