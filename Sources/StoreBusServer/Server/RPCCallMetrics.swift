import Metrics
import StoreBus

/// A server's calls for swift-metrics: `storebus_rpc_calls_total` by method and status code, and
/// `storebus_rpc_call_duration_seconds` by method (from the request's arrival to its answer).
/// Methods the router does not know count under `unknown`, so that no caller can make the label set
/// grow. Used on the server's loop thread only; the metric handles are made once per label set
/// (a no-op until the process bootstraps a metrics backend), and a method seen before is found with
/// one lookup.
final class RPCCallMetrics {
    /// The handles of one method label.
    private final class MethodMetrics {
        let label: String
        let duration: Metrics.Timer
        var calls: [StatusCode: Counter] = [:]

        init(label: String) {
            self.label = label
            duration = Metrics.Timer(label: "storebus_rpc_call_duration_seconds", dimensions: [("method", label)])
        }
    }

    private var methods: [String: MethodMetrics] = [:]
    private let router: RPCRouter

    init(router: RPCRouter) {
        self.router = router
    }

    func record(method: String, code: StatusCode, since started: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - started
        let metrics = methods[method] ?? first(method)
        let counter: Counter
        if let known = metrics.calls[code] {
            counter = known
        } else {
            counter = Counter(label: "storebus_rpc_calls_total", dimensions: [("method", metrics.label), ("code", code.description)])
            metrics.calls[code] = counter
        }
        counter.increment()
        metrics.duration.record(elapsed)
    }

    /// The handles for a method not seen before: its own when the router knows it (kept under its
    /// name), else those of `unknown` (kept under that name only).
    private func first(_ method: String) -> MethodMetrics {
        let label = router.entry(for: method) == nil ? "unknown" : method
        if let known = methods[label] { return known }
        let made = MethodMetrics(label: label)
        methods[label] = made
        return made
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
