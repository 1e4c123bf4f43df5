import Foundation
import StoreBusTesting

/// The CPU time (user and system, every thread) that the flow benchmark's processes use, read from
/// /proc: the flow figures' CPU per flow, which tells what a change costs or saves when the flows a
/// second it reaches are bounded by two shared cores and move with the machine's load.
struct CPUMeter {
    /// The processes measured: a name and a process id each (the bench itself among them), and
    /// then `families`, each measured with its children (a PostgreSQL server and its backends).
    let processes: [(name: String, pid: pid_t)]

    init(processes: [(name: String, pid: pid_t)], families: [(name: String, pid: pid_t)] = []) {
        self.processes = processes + families
        self.families = Set(families.map(\.pid))
    }

    private let families: Set<pid_t>

    /// Seconds of CPU each process (with its children, for a family) has used so far, in
    /// `processes` order; nil when one of them cannot be read (it has exited, or /proc is not there).
    func read() -> [Double]? {
        var seconds: [Double] = []
        for process in processes {
            guard let used = families.contains(process.pid) ? Self.familySeconds(pid: process.pid) : Self.seconds(pid: process.pid) else { return nil }
            seconds.append(used)
        }
        return seconds
    }

    /// The CPU time of `pid`, of the children it has waited for (cutime and cstime) and of those
    /// still running.
    static func familySeconds(pid: pid_t) -> Double? {
        guard let fields = ProcessStat.fields(of: pid), fields.count > 14, let own = seconds(pid: pid),
            let waitedUser = Double(fields[13]), let waitedSystem = Double(fields[14])
        else { return nil }
        var total = own + (waitedUser + waitedSystem) / ticksPerSecond
        let parent = Substring(String(pid))
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = pid_t(entry), child != pid, let childFields = ProcessStat.fields(of: child), childFields.count > 1, childFields[1] == parent else { continue }
            total += seconds(pid: child) ?? 0
        }
        return total
    }

    private static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// Returns once `pid` has used less than 2 % of a core over a quarter of a second (or after
    /// 20 s): before a figure that counts one kind of work by the process's whole CPU time.
    static func settle(pid: pid_t) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        guard var last = seconds(pid: pid) else { return }
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(250))
            guard let now = seconds(pid: pid) else { return }
            if now - last < 0.005 { return }
            last = now
        }
    }

    /// utime plus stime of `/proc/<pid>/stat`, in seconds.
    static func seconds(pid: pid_t) -> Double? {
        guard let fields = ProcessStat.fields(of: pid), fields.count > 12,
            let user = Double(fields[11]), let system = Double(fields[12])
        else { return nil }
        return (user + system) / ticksPerSecond
    }
}
