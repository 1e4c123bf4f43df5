import Metrics
import StoreBus

/// A server's calls for swift-metrics: `storebus_rpc_calls_total` by method and status code, and
/// `storebus_rpc_call_duration_seconds` by method (from the request's arrival to its answer).
/// Methods the router does not know count under `unknown`, so that no caller can make the label set
/// grow. Used on the server's loop thread only; the metric handles are made once per label set
/// (a no-op until the process bootstraps a metrics backend).
final class RPCCallMetrics {
    private var calls: [String: [StatusCode: Counter]] = [:]
    private var durations: [String: Metrics.Timer] = [:]
    private let router: RPCRouter

    init(router: RPCRouter) {
        self.router = router
    }

    func record(method: String, code: StatusCode, since started: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - started
        let label = router.entry(for: method) == nil ? "unknown" : method
        let counter: Counter
        if let known = calls[label]?[code] {
            counter = known
        } else {
            counter = Counter(label: "storebus_rpc_calls_total", dimensions: [("method", label), ("code", code.description)])
            calls[label, default: [:]][code] = counter
        }
        counter.increment()
        let timer: Metrics.Timer
        if let known = durations[label] {
            timer = known
        } else {
            timer = Metrics.Timer(label: "storebus_rpc_call_duration_seconds", dimensions: [("method", label)])
            durations[label] = timer
        }
        timer.record(elapsed)
    }
}

extension Metrics.Timer {
    /// Records the time from `start` to now.
    public func record(since start: ContinuousClock.Instant) {
        record(ContinuousClock.now - start)
    }

    /// Records a duration.
    public func record(_ duration: Duration) {
        recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }
}
