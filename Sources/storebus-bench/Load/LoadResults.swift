import Foundation
import Histogram

/// A load run's results: the final table, the JSON, the HTML report.
struct LoadResults {
    /// How the run was made.
    struct Run: Codable {
        var elapsedSeconds: Double
        var devices: Int
        var offeredRate: Double
        var mix: String
        var gateways: [String]
    }

    let recorder: LoadRecorder.State
    let run: Run
    let sampler: ProcessSampler
    /// The soak's warm-up, when the run is a soak.
    let soakWarmUp: Double?
    /// What `--backend`'s subscriber saw.
    var backend: LoadBackend.Figures? = nil

    static let percentiles: [(String, Double)] = [("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9)]

    /// One row of latencies (milliseconds) for a histogram.
    var elapsed: Double { run.elapsedSeconds }
    var devices: Int { run.devices }
    var offeredRate: Double { run.offeredRate }
    var mix: String { run.mix }
    var gateways: [String] { run.gateways }

    struct Row: Codable {
        var name: String
        var count: UInt64
        var p50: Double, p90: Double, p99: Double, p999: Double, max: Double

        init(_ name: String, _ histogram: Histogram<UInt64>) {
            self.name = name
            count = histogram.totalCount
            p50 = histogram.milliseconds(50)
            p90 = histogram.milliseconds(90)
            p99 = histogram.milliseconds(99)
            p999 = histogram.milliseconds(99.9)
            max = histogram.maxMilliseconds
        }
    }

    struct ProcessFigures: Codable {
        var name: String
        var pid: Int32
        var cpuSeconds: Double
        var cpuMicrosPerFlow: Double
        var peakResidentMB: Double
        var soakFirstMB: Double?
        var soakLowMB: Double?
        var soakHighMB: Double?
        var soakFlat: Bool?
    }

    struct SecondFigures: Codable {
        var second: Int
        var completed: Int
        var errors: Int
        var p50: Double
        var p99: Double
    }

    struct SoakVerdict: Codable {
        var warmUpSeconds: Double
        var flat: Bool
        var p50FirstThirdMs: Double
        var p50LastThirdMs: Double
        var drifted: Bool
    }

    var flowRows: [Row] {
        [Row("all flows", recorder.all)] + FlowKind.allCases.compactMap { kind in recorder.flows[kind].map { Row(kind.rawValue, $0) } }
    }

    var stepRows: [Row] {
        recorder.steps.keys.sorted().map { Row($0, recorder.steps[$0]!) }
    }

    var processFigures: [ProcessFigures] {
        let cpu = sampler.cpuUsed()
        let peaks = sampler.peakMegabytes()
        let flat = soakWarmUp.map { sampler.flatness(after: $0, tolerance: 0.10) }
        return sampler.processes.indices.map { index in
            ProcessFigures(
                name: sampler.processes[index].name, pid: sampler.processes[index].pid, cpuSeconds: cpu[index],
                cpuMicrosPerFlow: recorder.completed > 0 ? cpu[index] * 1e6 / Double(recorder.completed) : 0,
                peakResidentMB: peaks[index], soakFirstMB: flat?[index].first, soakLowMB: flat?[index].low,
                soakHighMB: flat?[index].high, soakFlat: flat?[index].flat
            )
        }
    }

    var secondFigures: [SecondFigures] {
        recorder.seconds.enumerated().map { index, second in
            SecondFigures(second: index, completed: second.completed, errors: second.errors, p50: second.latency.milliseconds(50), p99: second.latency.milliseconds(99))
        }
    }

    /// For a soak: whether memory stayed flat after the warm-up, and whether the median latency of
    /// the last third of the run (after warm-up) is more than 1.5 times the first third's.
    var soakVerdict: SoakVerdict? {
        guard let warmUp = soakWarmUp else { return nil }
        let seconds = recorder.seconds.enumerated().filter { Double($0.offset) >= warmUp }.map(\.element)
        let third = max(1, seconds.count / 3)
        func median(_ slice: ArraySlice<LoadRecorder.Second>) -> Double {
            var merged = LoadRecorder.histogram()
            for second in slice { merged.add(second.latency) }
            return merged.milliseconds(50)
        }
        let first = median(seconds.prefix(third)), last = median(seconds.suffix(third))
        let flat = !sampler.processes.isEmpty && sampler.flatness(after: warmUp, tolerance: 0.10).allSatisfy(\.flat)
        return SoakVerdict(warmUpSeconds: warmUp, flat: flat, p50FirstThirdMs: first, p50LastThirdMs: last, drifted: first > 0 && last > first * 1.5)
    }

    var errorsByCode: [String: Int] { recorder.errors }

    /// The final table, as text.
    func table() -> String {
        var lines: [String] = []
        let rate = Double(recorder.completed) / max(elapsed, 0.001)
        lines.append(
            String(
                format: "flows %d completed, %d failed in %.1f s: %.1f flows/s (%@, %d devices)",
                recorder.completed, recorder.failed, elapsed, rate, offeredRate > 0 ? String(format: "offered %.1f/s", offeredRate) : "closed loop", devices))
        func section(_ title: String, _ rows: [Row]) {
            lines.append("")
            lines.append(
                title.padding(toLength: 28, withPad: " ", startingAt: 0) + "count".leftPadded(8) + "p50 ms".leftPadded(10) + "p90 ms".leftPadded(10) + "p99 ms".leftPadded(10)
                    + "p99.9 ms".leftPadded(10) + "max ms".leftPadded(10))
            for row in rows {
                lines.append(
                    row.name.padding(toLength: 28, withPad: " ", startingAt: 0) + "\(row.count)".leftPadded(8)
                        + [row.p50, row.p90, row.p99, row.p999, row.max].map { String(format: "%.1f", $0).leftPadded(10) }.joined())
            }
        }
        section("flow (from scheduled start)", flowRows)
        section("step", stepRows)
        if let backend {
            section("backend notifications", [backend.lag])
            let types = backend.byType.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            lines.append("backend: \(backend.notifications) notifications (\(types.isEmpty ? "none" : types)), \(backend.readErrors) read errors")
        }
        lines.append("")
        if recorder.errors.isEmpty {
            lines.append("errors: none")
        } else {
            lines.append("errors by status code:")
            for (code, count) in recorder.errors.sorted(by: { $0.value > $1.value }) { lines.append("  \(count)  \(code)") }
        }
        let processes = processFigures
        if !processes.isEmpty {
            lines.append("")
            lines.append(
                "process".padding(toLength: 32, withPad: " ", startingAt: 0) + "CPU s".leftPadded(10) + "CPU µs/flow".leftPadded(14) + "peak RSS MB".leftPadded(14)
                    + (soakWarmUp != nil ? "after warm-up MB".leftPadded(22) : ""))
            for process in processes {
                var line =
                    "\(process.name) (\(process.pid))".padding(toLength: 32, withPad: " ", startingAt: 0)
                    + String(format: "%.2f", process.cpuSeconds).leftPadded(10) + String(format: "%.0f", process.cpuMicrosPerFlow).leftPadded(14)
                    + String(format: "%.1f", process.peakResidentMB).leftPadded(14)
                if let first = process.soakFirstMB, let low = process.soakLowMB, let high = process.soakHighMB {
                    line += String(format: "%.1f, %.1f–%.1f %@", first, low, high, process.soakFlat == true ? "flat" : "NOT FLAT").leftPadded(22)
                }
                lines.append(line)
            }
        }
        if let verdict = soakVerdict {
            lines.append("")
            lines.append(
                String(
                    format: "soak: memory %@ after %.0f s of warm-up (every process within 10%% of its first sample); median latency %.1f ms in the first third, %.1f ms in the last: %@",
                    verdict.flat ? "flat" : "NOT flat", verdict.warmUpSeconds, verdict.p50FirstThirdMs, verdict.p50LastThirdMs, verdict.drifted ? "drifted" : "no drift"))
        }
        return lines.joined(separator: "\n")
    }

    struct Document: Codable {
        var run: Run
        var completed: Int
        var failed: Int
        var flowsPerSecond: Double
        var flows: [Row]
        var steps: [Row]
        var errors: [String: Int]
        var processes: [ProcessFigures]
        var seconds: [SecondFigures]
        var distribution: [[Double]]
        var soak: SoakVerdict?
        var backend: LoadBackend.Figures?
    }

    var document: Document {
        Document(
            run: run, completed: recorder.completed, failed: recorder.failed, flowsPerSecond: Double(recorder.completed) / max(elapsed, 0.001),
            flows: flowRows, steps: stepRows, errors: recorder.errors, processes: processFigures, seconds: secondFigures,
            distribution: distribution, soak: soakVerdict, backend: backend
        )
    }

    /// The latency distribution of every flow: [percentile, milliseconds] pairs.
    var distribution: [[Double]] {
        [0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100].map { [$0, $0 == 100 ? recorder.all.maxMilliseconds : recorder.all.milliseconds($0)] }
    }

    func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(document)
    }
}

extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? " " + self : String(repeating: " ", count: width - count) + self
    }
}
