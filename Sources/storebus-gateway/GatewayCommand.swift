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
        let catalog = try HostOptions.endpoints(
            flags: catalogEndpoints, environmentVariable: "STOREBUS_CATALOG_ENDPOINTS",
            configured: settings.catalogEndpoints, configKey: "catalogEndpoints", default: ["tcp://127.0.0.1:7301"]
        )
        let paymentQueue = try HostOptions.endpoints(
            flags: paymentQueueEndpoints, environmentVariable: "STOREBUS_PAYMENT_QUEUE_ENDPOINTS",
            configured: settings.paymentQueueEndpoints, configKey: "paymentQueueEndpoints", default: ["tcp://127.0.0.1:7302"]
        )
        let events = try HostOptions.endpoints(
            flags: paymentQueueEvents, environmentVariable: "STOREBUS_PAYMENT_QUEUE_EVENTS",
            configured: settings.paymentQueueEventEndpoints, configKey: "paymentQueueEventEndpoints", default: ["tcp://127.0.0.1:7312"]
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
        let catalogClient = try RPCClient(configuration: ClientConfiguration(endpoints: catalog), reactor: host.reactor, logger: host.logger)
        let paymentQueueClient = try RPCClient(configuration: ClientConfiguration(endpoints: paymentQueue), reactor: host.reactor, logger: host.logger)
        // Doorbells carry small events: kept, they answer most Observe calls without a log read.
        let recent = RecentEvents()
        let board = try DoorbellBoard(
            endpoints: events, log: "payment-queue", context: host.context, reactor: host.reactor,
            heard: { recent.heard($0) }, disconnected: { recent.forget() }
        )
        let gateway = GatewayService(
            keyring: keyring, signer: SessionSigner(secret: secret), sessionLifetimeSeconds: lifetime,
            catalog: catalogClient, paymentQueue: paymentQueueClient, board: board, recent: recent, logger: host.logger,
            maxParkedObservers: settings.maxParkedObservers ?? 100_000,
            catalogAnswers: CatalogAnswers(lifetime: .milliseconds(max(0, settings.catalogCacheMilliseconds ?? 1000)))
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
            upstreams: [
                HealthUpstream(name: "catalog", process: "storebus-catalog", services: GatewayService.forwardedServices(to: .catalog), client: catalogClient),
                HealthUpstream(name: "payment-queue", process: "storebus-payment-queue", services: GatewayService.forwardedServices(to: .paymentQueue), client: paymentQueueClient),
            ],
            onShutdown: {
                await gateway.beginClosing()
                await catalogClient.shutdown()
                await paymentQueueClient.shutdown()
            }
        )
    }
}
