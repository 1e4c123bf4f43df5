import Foundation
import StoreBusTesting

/// The CPU time (user and system, every thread) that the flow benchmark's processes use, read from
/// /proc: the flow figures' CPU per flow, which tells what a change costs or saves when the flows a
/// second it reaches are bounded by two shared cores and move with the machine's load.
struct CPUMeter {
    /// The processes measured: a name and a process id each (the bench itself among them).
    let processes: [(name: String, pid: pid_t)]

    /// Seconds of CPU each process has used so far, in `processes` order; nil when one of them
    /// cannot be read (it has exited, or /proc is not there).
    func read() -> [Double]? {
        var seconds: [Double] = []
        for process in processes {
            guard let used = Self.seconds(pid: process.pid) else { return nil }
            seconds.append(used)
        }
        return seconds
    }

    private static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// utime plus stime of `/proc/<pid>/stat`, in seconds.
    static func seconds(pid: pid_t) -> Double? {
        guard let fields = ProcessStat.fields(of: pid), fields.count > 12,
            let user = Double(fields[11]), let system = Double(fields[12])
        else { return nil }
        return (user + system) / ticksPerSecond
    }
}
