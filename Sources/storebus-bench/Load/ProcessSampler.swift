import Foundation
import StoreBusTesting
import Synchronization

/// The local deployment's processes, found in /proc by name (`storebus-*` but the bench itself):
/// their CPU time at the start and end of a run, and their resident memory sampled every second,
/// for CPU per flow, peak memory and the soak's memory check.
final class ProcessSampler: Sendable {
    struct Process: Sendable {
        let name: String
        let pid: pid_t
        let cpuAtStart: Double
    }

    let processes: [Process]
    /// Resident megabytes of each process (in `processes` order), one entry a sample.
    private let samples = Mutex<[(at: Double, rss: [Double])]>([])

    /// The processes whose command name starts with `prefix`, found now.
    init(prefix: String = "storebus-") {
        var found: [Process] = []
        let own = getpid()
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            // The executable's name from its command line: /proc/<pid>/comm cuts names at 15 bytes.
            guard let pid = pid_t(entry), pid != own,
                let commandLine = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
                let first = commandLine.split(separator: 0).first,
                case let name = (String(decoding: first, as: UTF8.self) as NSString).lastPathComponent,
                name.hasPrefix(prefix), !name.hasPrefix("storebus-bench"), !name.hasPrefix("storebus-testkit"),
                let cpu = CPUMeter.seconds(pid: pid)
            else { continue }
            found.append(Process(name: name, pid: pid, cpuAtStart: cpu))
        }
        processes = found.sorted { $0.name < $1.name }
    }

    private static let pageMegabytes = Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576

    /// Resident megabytes of `pid` (`rss` of /proc/<pid>/stat); nil once it is gone.
    static func residentMegabytes(_ pid: pid_t) -> Double? {
        guard let fields = ProcessStat.fields(of: pid), fields.count > 21, let pages = Double(fields[21]) else { return nil }
        return pages * pageMegabytes
    }

    /// Takes a sample, `at` seconds into the run.
    func sample(at: Double) {
        let rss = processes.map { Self.residentMegabytes($0.pid) ?? 0 }
        samples.withLock { $0.append((at, rss)) }
    }

    var allSamples: [(at: Double, rss: [Double])] { samples.withLock { $0 } }

    /// CPU seconds each process used since the sampler was made.
    func cpuUsed() -> [Double] {
        processes.map { process in max(0, (CPUMeter.seconds(pid: process.pid) ?? process.cpuAtStart) - process.cpuAtStart) }
    }

    /// Each process's largest sample.
    func peakMegabytes() -> [Double] {
        let all = allSamples
        return processes.indices.map { index in all.map { $0.rss[index] }.max() ?? 0 }
    }

    /// For the soak: each process's resident memory after `warmUp` seconds, as its lowest and
    /// highest sample and whether the highest stays within `tolerance` (0.10) of the first.
    func flatness(after warmUp: Double, tolerance: Double) -> [(first: Double, low: Double, high: Double, flat: Bool)] {
        let later = allSamples.filter { $0.at >= warmUp }
        return processes.indices.map { index in
            let values = later.map { $0.rss[index] }
            guard let first = values.first, first > 0 else { return (0, 0, 0, false) }
            let low = values.min()!, high = values.max()!
            return (first, low, high, high <= first * (1 + tolerance) && low >= first * (1 - tolerance))
        }
    }
}
