import StoreBus
import StoreSchema

/// The services every StoreBus process answers besides its own: Health and Diagnostics.
public enum BuiltinServices {
    /// A router answering `storebus.health.v1.Health` and `storebus.diagnostics.v1.Diagnostics`.
    ///
    /// - Parameters:
    ///   - process: the executable's name, reported by Health/Check.
    ///   - services: the fully qualified names of the services the process hosts.
    ///   - statistics: the RPC server's counters, reported by Diagnostics/GetServerStats.
    ///   - isServing: whether the process is ready (false while it starts or drains).
    ///   - diagnostics: whether to answer Diagnostics (processes facing clients leave it out).
    ///   - upstreams: the services the process forwards calls to. A check of the whole process asks
    ///     each of them too, and a check naming one of their services is answered with that
    ///     service's status (both list what was found in `upstreams`).
    public static func router(
        process: String,
        services: [String],
        statistics: ServerStatistics,
        isServing: @escaping @Sendable () -> Bool = { true },
        diagnostics: Bool = true,
        upstreams: [HealthUpstream] = []
    ) -> RPCRouter {
        var router = RPCRouter()
        router.register(
            HealthHandlers(
                process: process,
                hosted: Set(services + [Storebus_Health_V1_Health.serviceName] + (diagnostics ? [Storebus_Diagnostics_V1_Diagnostics.serviceName] : [])),
                isServing: isServing, upstreams: upstreams
            ))
        if diagnostics { router.register(DiagnosticsHandlers(statistics: statistics)) }
        return router
    }
}

/// `storebus.health.v1.Health`: whether the process serves, and (for a forwarder) its upstreams.
struct HealthHandlers: Storebus_Health_V1_Health.Handlers {
    let process: String
    let hosted: Set<String>
    let isServing: @Sendable () -> Bool
    let upstreams: [HealthUpstream]
    let started = ContinuousClock.now
    let checks = UpstreamHealthChecks()

    /// Answers from memory, or awaits the upstreams' answers.
    var loopSafe: LoopSafeMethods { .all(of: Storebus_Health_V1_Health.self) }

    func check(_ request: Storebus_Health_V1_HealthCheckRequest, context: ServerContext) async throws -> Storebus_Health_V1_HealthCheckResponse {
        let forwarded = hosted.contains(request.service) ? nil : upstreams.first { $0.services.contains(request.service) }
        guard request.service.isEmpty || hosted.contains(request.service) || forwarded != nil else {
            throw RPCError.resource(.notFound, type: "service", name: request.service, "\(process) does not host \(RPCError.echo(request.service))")
        }
        let serving = isServing()
        var answer = Storebus_Health_V1_HealthCheckResponse.with {
            $0.status = serving ? .serving : .notServing
            $0.process = process
            $0.version = StoreBusVersion.current
            $0.services = hosted.sorted()
            $0.uptimeSeconds = Double(started.duration(to: .now).components.seconds)
        }
        if let forwarded {
            let health = await checks.check(forwarded, service: request.service, timeRemaining: context.timeRemaining)
            answer.status = serving ? health.status : .notServing
            answer.upstreams = [health]
        } else if request.service.isEmpty, !upstreams.isEmpty {
            answer.upstreams = await checks.checkAll(upstreams, timeRemaining: context.timeRemaining)
        }
        return answer
    }
}

/// `storebus.diagnostics.v1.Diagnostics`: echo and the server's counters.
struct DiagnosticsHandlers: Storebus_Diagnostics_V1_Diagnostics.Handlers {
    let statistics: ServerStatistics

    var loopSafe: LoopSafeMethods { .all(of: Storebus_Diagnostics_V1_Diagnostics.self) }

    func echo(_ request: Storebus_Diagnostics_V1_EchoRequest, context: ServerContext) async throws -> Storebus_Diagnostics_V1_EchoResponse {
        // The contract bounds delayMs (60,000: diagnostics.proto's rule).
        if request.delayMs > 0 {
            // Throws CancellationError when the deadline passes or the caller cancels: the work stops.
            try await Task.sleep(for: .milliseconds(Int(request.delayMs)))
        }
        return .with { $0.payload = request.payload }
    }

    func getServerStats(_ request: Storebus_Diagnostics_V1_GetServerStatsRequest, context: ServerContext) async throws -> Storebus_Diagnostics_V1_ServerStats {
        var stats = statistics.snapshot
        // The other calls running: this one is a handler too.
        stats.inFlight = max(stats.inFlight, 1) - 1
        stats.fastPaths = FastPaths.enabled
        return stats
    }
}

/// The StoreBus release.
public enum StoreBusVersion {
    /// Version of this build.
    public static let current = "0.1.0"
}
