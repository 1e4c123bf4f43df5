import Foundation
import Logging
import ServiceLifecycle
import StoreBus
import StoreBusHost
import StoreBusServer

/// `storebus-console` as a service: the operators' web page. It keeps nothing durable and serves no
/// contract service of its own (Health only, over RPC): every page is read, and every action made,
/// through the gateway as an admin session with the key the person logged in with.
public struct ConsoleService: Service {
    /// The executable's name, in logs and Health answers.
    public static let process = ServiceRegistry.console.process

    let host: HostConfiguration
    let configuration: ConsoleConfiguration

    /// A console serving as `host` says, with `configuration`.
    public init(host: HostConfiguration, configuration: ConsoleConfiguration) {
        self.host = host
        self.configuration = configuration
    }

    public func run() async throws {
        let host = try ServiceHost(process: Self.process, configuration: host)
        var clientConfiguration = ClientConfiguration(endpoints: configuration.gatewayEndpoints)
        clientConfiguration.defaultTimeout = .milliseconds(Int64(configuration.callTimeoutMilliseconds))
        let client = try RPCClient(configuration: clientConfiguration, reactor: host.reactor, logger: host.logger)
        let link = GatewayLink(
            client: client, endpoints: configuration.gatewayEndpoints, timeout: .milliseconds(Int64(configuration.callTimeoutMilliseconds)), logger: host.logger)
        let stopping = ConsoleStopping()
        let server = try ConsoleServer(link: link, configuration: configuration, stopping: stopping, logger: host.logger)
        let address = try HTTPAddress(configuration.httpAddress, setting: "service.httpAddress")
        let gateway = ServiceRegistry.gateway
        try await host.serve(
            router: RPCRouter(),
            services: [],
            background: [server.application(address: address, bound: host.listeners.expect()), StopStreams(stopping: stopping)],
            upstreams: [HealthUpstream(name: gateway.name, process: gateway.process, services: gateway.services, client: client)],
            onShutdown: {
                await client.shutdown()
            }
        )
    }
}

/// Ends the live streams when graceful shutdown starts.
struct StopStreams: Service {
    let stopping: ConsoleStopping

    func run() async throws {
        try? await gracefulShutdown()
        stopping.stop()
    }
}
