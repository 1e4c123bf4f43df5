import StoreBus
import StoreSchema

/// The services every StoreBus process answers besides its own: Health and Diagnostics.
public enum BuiltinServices {
    /// Longest Echo delay accepted, in milliseconds.
    public static let maxEchoDelayMilliseconds: UInt32 = 60_000

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
        let started = ContinuousClock.now
        let hosted = Set(services + [Storebus_Health_V1_Health.serviceName] + (diagnostics ? [Storebus_Diagnostics_V1_Diagnostics.serviceName] : []))
        let checks = UpstreamHealthChecks()
        var router = RPCRouter()
        router.registerStaged(Storebus_Health_V1_Health.check) { request, context in
            let forwarded = hosted.contains(request.service) ? nil : upstreams.first { $0.services.contains(request.service) }
            guard request.service.isEmpty || hosted.contains(request.service) || forwarded != nil else {
                throw RPCError.resource(.notFound, type: "service", name: request.service, "\(process) does not host \(RPCError.echo(request.service))")
            }
            let serving = isServing()
            let answer = Storebus_Health_V1_HealthCheckResponse.with {
                $0.status = serving ? .serving : .notServing
                $0.process = process
                $0.version = StoreBusVersion.current
                $0.services = hosted.sorted()
                $0.uptimeSeconds = Double(started.duration(to: .now).components.seconds)
            }
            if let forwarded {
                return .later {
                    var answer = answer
                    let health = await checks.check(forwarded, service: request.service, timeRemaining: context.timeRemaining)
                    answer.status = serving ? health.status : .notServing
                    answer.upstreams = [health]
                    return answer
                }
            }
            guard request.service.isEmpty, !upstreams.isEmpty else { return .now(answer) }
            return .later {
                var answer = answer
                answer.upstreams = await checks.checkAll(upstreams, timeRemaining: context.timeRemaining)
                return answer
            }
        }
        guard diagnostics else { return router }
        router.registerStaged(Storebus_Diagnostics_V1_Diagnostics.echo) { request, _ in
            guard request.delayMs <= maxEchoDelayMilliseconds else {
                throw RPCError.invalidArgument(field: "delayMs", "must be at most \(maxEchoDelayMilliseconds)")
            }
            let response = Storebus_Diagnostics_V1_EchoResponse.with { $0.payload = request.payload }
            guard request.delayMs > 0 else { return .now(response) }
            return .later {
                // Throws CancellationError when the deadline passes or the caller cancels: the work stops.
                try await Task.sleep(for: .milliseconds(Int(request.delayMs)))
                return response
            }
        }
        router.registerStaged(Storebus_Diagnostics_V1_Diagnostics.getServerStats) { _, _ in
            var stats = statistics.snapshot
            stats.fastPaths = FastPaths.enabled
            return .now(stats)
        }
        return router
    }
}

/// The StoreBus release.
public enum StoreBusVersion {
    /// Version of this build.
    public static let current = "0.1.0"
}
