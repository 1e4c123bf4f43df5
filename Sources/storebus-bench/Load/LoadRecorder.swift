import Foundation
import Histogram
import Synchronization

/// What a load run measured, kept as it goes: latency histograms (microseconds) by flow kind and by
/// step, errors by code, and each second's completions, errors and latencies, for the live line and
/// the report.
final class LoadRecorder: Sendable {
    struct Second {
        var completed = 0
        var errors = 0
        var latency = LoadRecorder.histogram()
    }

    struct State {
        var flows: [FlowKind: Histogram<UInt64>] = [:]
        var all = LoadRecorder.histogram()
        var steps: [String: Histogram<UInt64>] = [:]
        var errors: [String: Int] = [:]
        var seconds: [Second] = []
        var completed = 0
        var failed = 0
        var started = 0
    }

    let start: ContinuousClock.Instant
    private let state = Mutex(State())

    init(start: ContinuousClock.Instant) {
        self.start = start
    }

    static func histogram() -> Histogram<UInt64> {
        Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    }

    func flowStarted() {
        state.withLock { $0.started += 1 }
    }

    /// A step of a `kind` flow took `seconds`.
    func step(_ kind: FlowKind, _ name: String, seconds: Double) {
        state.withLock { _ = $0.steps["\(kind.rawValue)/\(name)", default: Self.histogram()].record(Self.micros(seconds)) }
    }

    /// A flow ended, `latency` after its scheduled start; `failure` when it did not complete.
    func flowEnded(_ kind: FlowKind, latency: Double, failure: FlowFailure?) {
        let index = max(0, Int((ContinuousClock.now - start).seconds))
        state.withLock { state in
            while state.seconds.count <= index { state.seconds.append(Second()) }
            if let failure {
                state.failed += 1
                state.seconds[index].errors += 1
                state.errors["\(failure.code) (\(kind.rawValue)/\(failure.step))", default: 0] += 1
                return
            }
            state.completed += 1
            let micros = Self.micros(latency)
            _ = state.flows[kind, default: Self.histogram()].record(micros)
            _ = state.all.record(micros)
            state.seconds[index].completed += 1
            _ = state.seconds[index].latency.record(micros)
        }
    }

    var snapshot: State { state.withLock { $0 } }

    static func micros(_ seconds: Double) -> UInt64 {
        UInt64(max(1, min(3_600_000_000, (seconds * 1e6).rounded())))
    }
}

extension Histogram where Count == UInt64 {
    /// The value at `percentile`, in milliseconds (the histogram holds microseconds).
    func milliseconds(_ percentile: Double) -> Double {
        totalCount == 0 ? 0 : Double(valueAtPercentile(percentile)) / 1000
    }

    /// The largest value, in milliseconds.
    var maxMilliseconds: Double { totalCount == 0 ? 0 : Double(max) / 1000 }
}
