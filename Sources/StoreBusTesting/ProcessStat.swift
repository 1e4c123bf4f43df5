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

/// The machine's CPU time as the first line of `/proc/stat` counts it: every CPU, in clock ticks.
public struct MachineCPUTime: Sendable, Equatable {
    /// Running anything: user, nice, system, interrupts.
    public var busy: UInt64
    /// Idle, waiting for I/O included.
    public var idle: UInt64
    /// Taken by the hypervisor for other guests while this one had work to run.
    public var steal: UInt64

    public init(busy: UInt64, idle: UInt64, steal: UInt64) {
        self.busy = busy
        self.idle = idle
        self.steal = steal
    }

    /// The machine's CPU time now; nil where there is no /proc.
    public static func read() -> MachineCPUTime? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n", maxSplits: 1).first
        else { return nil }
        return parse(line)
    }

    /// The times of a `cpu` line: `cpu user nice system idle iowait irq softirq steal ...` (the
    /// guest columns after steal are already counted in user and nice). Nil for any other line.
    public static func parse(_ line: Substring) -> MachineCPUTime? {
        let fields = line.split(separator: " ")
        guard fields.first == "cpu", fields.count >= 9 else { return nil }
        let ticks = fields[1...8].compactMap { UInt64($0) }
        guard ticks.count == 8 else { return nil }
        return MachineCPUTime(busy: ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6], idle: ticks[3] + ticks[4], steal: ticks[7])
    }

    /// The share of the time from this reading to `later` that the hypervisor stole, in percent; nil
    /// when no time passed between them.
    public func stealPercent(until later: MachineCPUTime) -> Double? {
        let busy = later.busy &- busy, idle = later.idle &- idle, steal = later.steal &- steal
        let total = busy &+ idle &+ steal
        guard total > 0, total < UInt64.max / 2 else { return nil }
        return Double(steal) * 100 / Double(total)
    }
}
