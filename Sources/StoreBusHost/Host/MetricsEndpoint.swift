import Hummingbird
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Synchronization

/// The process's Prometheus metrics: swift-metrics, bootstrapped once per process with
/// swift-prometheus's factory into ``registry``, and served as text at `GET /metrics` on the
/// configured address (see docs/metrics.md for what each metric counts).
public enum MetricsEndpoint {
    /// Every metric of the process.
    public static let registry = PrometheusCollectorRegistry()
    private static let bootstrapped = Atomic<Bool>(false)

    /// Routes swift-metrics to ``registry`` (once per process; later calls do nothing). Durations
    /// are histograms with buckets from 100 µs to 10 s.
    public static func bootstrap() {
        guard !bootstrapped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(2), .seconds(5), .seconds(10)
        ]
        factory.defaultValueHistogramBuckets = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]
        MetricsSystem.bootstrap(factory)
    }

    /// The HTTP server of `GET /metrics` on `address`, as a service of the process.
    static func server(address: HTTPAddress, process: String, logger: Logger, bound: @escaping @Sendable () -> Void) -> some Service {
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            var buffer: [UInt8] = []
            buffer.reserveCapacity(16_384)
            registry.emit(into: &buffer)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: buffer))
            )
        }
        logger.info("Serving metrics over HTTP", metadata: ["metrics.address": "\(address.host):\(address.port)"])
        return Application(router: router, configuration: .init(address: .hostname(address.host, port: address.port), serverName: process), onServerRunning: { _ in bound() }, logger: logger)
    }
}
