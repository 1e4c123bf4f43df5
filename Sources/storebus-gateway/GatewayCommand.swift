import ArgumentParser
import Foundation
import Gateway
import StoreBus
import StoreBusCommandLine
import StoreBusHost
import StoreBusServer

/// `storebus-gateway`: the one endpoint clients talk to (storebus.gateway.v1).
@main
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: GatewayService.process,
        abstract: "Authenticate clients, forward their calls to the services, and serve each device's observer callbacks."
    )

    @OptionGroup var host: HostOptions

    @OptionGroup var catalog: UpstreamEndpoints<Upstream.Catalog>

    @OptionGroup var paymentQueue: UpstreamEndpoints<Upstream.PaymentQueue>

    @OptionGroup var receipt: UpstreamEndpoints<Upstream.Receipt>

    @OptionGroup var download: UpstreamEndpoints<Upstream.Download>

    @OptionGroup var notifications: UpstreamEndpoints<Upstream.Notifications>

    @OptionGroup var paymentQueueEvents: UpstreamEvents<Upstream.PaymentQueue>

    func run() async throws {
        let host = try self.host.resolve(defaults: GatewayConfiguration.defaultHost)
        ServiceHost.bootstrap(host)
        var configuration = try host.serviceSettings(GatewayConfiguration.self) ?? GatewayConfiguration()
        if let endpoints = catalog.endpoints {
            configuration.setEndpoints(endpoints, of: "catalog")
        }
        if let endpoints = paymentQueue.endpoints {
            configuration.setEndpoints(endpoints, of: GatewayConfiguration.paymentQueueRoute)
        }
        if let endpoints = receipt.endpoints {
            configuration.setEndpoints(endpoints, of: "receipt")
        }
        if let endpoints = download.endpoints {
            configuration.setEndpoints(endpoints, of: "download")
        }
        if let endpoints = notifications.endpoints {
            configuration.setEndpoints(endpoints, of: "notifications")
        }
        if let endpoints = paymentQueueEvents.endpoints {
            configuration.paymentQueueEventEndpoints = endpoints
        }
        if let secret = ProcessInfo.processInfo.environment["STOREBUS_SESSION_SECRET"], !secret.isEmpty { configuration.sessionSecret = secret }
        if self.host.checkConfig {
            try configuration.validate()
            if self.host.checked(GatewayService.process, host) { return }
        }
        try await GatewayService(host: host, configuration: configuration).run()
    }
}
