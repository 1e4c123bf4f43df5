import ArgumentParser
import Foundation
import Gateway
import StoreBus
import StoreSchema

/// `storebus-gateway`: the one endpoint clients talk to (storebus.gateway.v1).
@main
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storebus-gateway",
        abstract: "Authenticate clients, forward their calls to the services, and serve each device's observer callbacks."
    )

    @OptionGroup var host: HostOptions

    @Option(name: .customLong("catalog-endpoint"), help: "RPC endpoint of storebus-catalog (repeatable). Also STOREBUS_CATALOG_ENDPOINTS or service.catalogEndpoints.")
    var catalogEndpoints: [String] = []

    @Option(name: .customLong("payment-queue-endpoint"), help: "RPC endpoint of storebus-payment-queue (repeatable). Also STOREBUS_PAYMENT_QUEUE_ENDPOINTS or service.paymentQueueEndpoints.")
    var paymentQueueEndpoints: [String] = []

    @Option(name: .customLong("payment-queue-events"), help: "Doorbell endpoint of storebus-payment-queue (repeatable). Also STOREBUS_PAYMENT_QUEUE_EVENTS or service.paymentQueueEventEndpoints.")
    var paymentQueueEvents: [String] = []

    func run() async throws {
        let configuration = try host.resolve(defaults: HostConfiguration(rpcEndpoints: ["tcp://127.0.0.1:7300"], eventEndpoints: []))
        ServiceHost.bootstrapLogging(level: configuration.logLevel)
        let settings = try configuration.serviceSettings(GatewaySettings.self) ?? GatewaySettings()
        let environment = ProcessInfo.processInfo.environment
        var routes = try settings.resolvedRoutes()
        // The built-in routes' endpoints also come from their own flags and environment variables.
        for (name, flags, variable, configured, key) in [
            ("catalog", catalogEndpoints, "STOREBUS_CATALOG_ENDPOINTS", settings.catalogEndpoints, "catalogEndpoints"),
            (GatewaySettings.paymentQueueRoute, paymentQueueEndpoints, "STOREBUS_PAYMENT_QUEUE_ENDPOINTS", settings.paymentQueueEndpoints, "paymentQueueEndpoints"),
        ] {
            guard let index = routes.firstIndex(where: { $0.name == name }) else { continue }
            routes[index].endpoints = try HostOptions.endpoints(
                flags: flags, environmentVariable: variable, configured: configured, configKey: key, default: routes[index].endpoints
            )
        }
        let events = try HostOptions.endpoints(
            flags: paymentQueueEvents, environmentVariable: "STOREBUS_PAYMENT_QUEUE_EVENTS",
            configured: settings.paymentQueueEventEndpoints, configKey: "paymentQueueEventEndpoints",
            default: GatewaySettings.defaultPaymentQueueEventEndpoints
        )

        let keyring = try APIKeyring(settings.apiKeys ?? [])
        let host = try ServiceHost(process: "storebus-gateway", configuration: configuration)
        if keyring.count == 0 {
            host.logger.warning("No API keys configured (service.apiKeys): every client will be refused")
        }
        let secret: String
        if let configured = environment["STOREBUS_SESSION_SECRET"] ?? settings.sessionSecret, !configured.isEmpty {
            secret = configured
        } else {
            secret = UUID().uuidString + UUID().uuidString
            host.logger.warning("No session secret configured (service.sessionSecret): sessions are valid on this gateway process only")
        }
        let lifetime = settings.sessionLifetimeSeconds ?? 3600
        // At most a year: far larger values overflow the expiry time that tokens carry.
        guard (1...GatewayService.maxSessionLifetimeSeconds).contains(lifetime) else {
            throw StartupError("service.sessionLifetimeSeconds must be from 1 to \(GatewayService.maxSessionLifetimeSeconds) (a year)")
        }

        // Calls to the services, doorbells and the gateway's handlers share one thread: a forwarded
        // call and the Observe answer a doorbell releases cost no thread hop.
        let connectionWait = Duration.milliseconds(max(0, settings.upstreamConnectionWaitMilliseconds ?? GatewaySettings.defaultUpstreamConnectionWaitMilliseconds))
        let upstreams = try routes.map { route in
            var client = ClientConfiguration(endpoints: route.endpoints)
            client.connectionWait = connectionWait
            return GatewayUpstream(
                name: route.name, process: route.process, services: route.services,
                client: try RPCClient(configuration: client, reactor: host.reactor, logger: host.logger)
            )
        }
        let paymentQueueClient = upstreams.first { $0.name == GatewaySettings.paymentQueueRoute }!.client
        // Doorbells carry small events: kept, they answer most Observe calls without a log read.
        let recent = RecentEvents()
        let board = try DoorbellBoard(
            endpoints: events, log: "payment-queue", context: host.context, reactor: host.reactor,
            heard: { recent.heard($0) }, disconnected: { recent.forget() }
        )
        let cacheMilliseconds = settings.answerCacheMilliseconds ?? settings.catalogCacheMilliseconds ?? GatewaySettings.defaultAnswerCacheMilliseconds
        let gateway = try GatewayService(
            keyring: keyring, signer: SessionSigner(secret: secret), sessionLifetimeSeconds: lifetime,
            upstreams: upstreams, paymentQueue: paymentQueueClient, board: board, recent: recent, logger: host.logger,
            maxParkedObservers: settings.maxParkedObservers ?? 100_000,
            answers: AnswerCache(lifetime: .milliseconds(max(0, cacheMilliseconds)))
        )
        try await host.serve(
            router: gateway.router,
            services: [Storebus_Gateway_V1_Gateway.serviceName],
            background: [GatewayCloser(gateway: gateway)],
            // Clients reach only Health and the gateway's own methods; Diagnostics stays with the services.
            diagnostics: false,
            // Every device holds an Observe call open: room for them beside the ordinary calls.
            maxInFlight: (settings.maxParkedObservers ?? 100_000) + 50_000,
            // Health/Check asks the services behind the gateway too: one check says whether all answer.
            upstreams: upstreams.map(\.health),
            onShutdown: {
                await gateway.beginClosing()
                for upstream in upstreams { await upstream.client.shutdown() }
            }
        )
    }
}
