import Foundation
import ServiceLifecycle
import StoreBus
import StoreBusHost
import StoreBusServer
import StoreSchema

/// `storebus-gateway` as a service: authenticates clients, forwards their calls to the upstreams of
/// its routes and serves their observer streams. Its executable, a test or any program runs it the
/// same way.
public struct GatewayService: Service {
    /// The executable's name, in logs and Health answers.
    public static let process = "storebus-gateway"

    let host: HostConfiguration
    let configuration: GatewayConfiguration

    /// A gateway serving as `host` says, with `configuration`.
    public init(host: HostConfiguration, configuration: GatewayConfiguration) {
        self.host = host
        self.configuration = configuration
    }

    /// Serves until graceful shutdown (SIGINT or SIGTERM in its own process). Throws a
    /// ``StartupError`` for a configuration that cannot work.
    public func run() async throws {
        try configuration.validate()
        let keyring = try APIKeyring(configuration.apiKeys)
        let host = try ServiceHost(process: Self.process, configuration: host)
        if keyring.count == 0 {
            host.logger.warning("No API keys configured (service.apiKeys): every client will be refused")
        }
        let secret: String
        if let configured = configuration.sessionSecret, !configured.isEmpty {
            secret = configured
        } else {
            secret = UUID().uuidString + UUID().uuidString
            host.logger.warning("No session secret configured (service.sessionSecret): sessions are valid on this gateway process only")
        }

        // Calls to the services, doorbells and the gateway's handlers share one thread: a forwarded
        // call and the Observe answer a doorbell releases cost no thread hop.
        let connectionWait = Duration.milliseconds(configuration.upstreamConnectionWaitMilliseconds)
        let upstreams = try configuration.routes.map { route in
            var client = ClientConfiguration(endpoints: route.endpoints)
            client.connectionWait = connectionWait
            let rpc = try RPCClient(configuration: client, reactor: host.reactor, logger: host.logger)
            // Several payment-queue instances (on PostgreSQL) each own a share of the accounts, and
            // so do several download instances (each serves the downloads of the shards it follows).
            var router: ShardRouter?
            if route.endpoints.count > 1 {
                switch route.name {
                case GatewayConfiguration.paymentQueueRoute: router = try ShardRouter(any: rpc, reactor: host.reactor, logger: host.logger)
                case ServiceRegistry.download.name:
                    router = try ShardRouter(any: rpc, reactor: host.reactor, map: Storebus_Download_V1_Download.getShardMap, logger: host.logger)
                default: router = nil
                }
            }
            return GatewayUpstream(name: route.name, process: route.process, services: route.services, client: rpc, router: router)
        }
        let paymentQueue = upstreams.first { $0.name == GatewayConfiguration.paymentQueueRoute }!.client
        // Doorbells carry small events: kept, they answer most Observe calls without a log read (a
        // fast path: with them off, every Observe reads the payment queue's log).
        let recent: RecentEvents? = FastPaths.enabled ? RecentEvents() : nil
        let board = try DoorbellBoard(
            endpoints: configuration.paymentQueueEventEndpoints, log: ServiceRegistry.paymentQueueLog, context: host.context, reactor: host.reactor,
            heard: { recent?.heard($0) }, disconnected: { recent?.forget() }
        )
        let gateway = try GatewayHandlers(
            keyring: keyring, signer: SessionSigner(secret: secret), sessionLifetimeSeconds: configuration.sessionLifetimeSeconds,
            upstreams: upstreams, paymentQueue: paymentQueue, board: board, recent: recent, logger: host.logger,
            maxParkedObservers: configuration.maxParkedObservers,
            answers: AnswerCache(lifetime: .milliseconds(configuration.answerCacheMilliseconds))
        )
        try await host.serve(
            router: gateway.router,
            services: [Storebus_Gateway_V1_Gateway.serviceName],
            background: [GatewayCloser(gateway: gateway)],
            // Clients reach only Health and the gateway's own methods; Diagnostics stays with the services.
            diagnostics: false,
            // Every device holds an Observe call open: room for them beside the ordinary calls.
            maxInFlight: configuration.maxParkedObservers + 50_000,
            // Health/Check asks the services behind the gateway too: one check says whether all answer.
            upstreams: upstreams.map(\.health),
            onShutdown: {
                await gateway.beginClosing()
                for upstream in upstreams {
                    await upstream.router?.shutdown()
                    await upstream.client.shutdown()
                }
            }
        )
    }
}
