import ArgumentParser
import Foundation
import Gateway
import StoreBus
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

    @Option(name: .customLong("catalog-endpoint"), help: "RPC endpoint of storebus-catalog (repeatable). Also STOREBUS_CATALOG_ENDPOINTS or service.catalogEndpoints.")
    var catalogEndpoints: [String] = []

    @Option(name: .customLong("payment-queue-endpoint"), help: "RPC endpoint of storebus-payment-queue (repeatable). Also STOREBUS_PAYMENT_QUEUE_ENDPOINTS or service.paymentQueueEndpoints.")
    var paymentQueueEndpoints: [String] = []

    @Option(name: .customLong("receipt-endpoint"), help: "RPC endpoint of storebus-receipt (repeatable). Also STOREBUS_RECEIPT_ENDPOINTS or service.receiptEndpoints.")
    var receiptEndpoints: [String] = []

    @Option(name: .customLong("download-endpoint"), help: "RPC endpoint of storebus-download (repeatable). Also STOREBUS_DOWNLOAD_ENDPOINTS or service.downloadEndpoints.")
    var downloadEndpoints: [String] = []

    @Option(name: .customLong("payment-queue-events"), help: "Doorbell endpoint of storebus-payment-queue (repeatable). Also STOREBUS_PAYMENT_QUEUE_EVENTS or service.paymentQueueEventEndpoints.")
    var paymentQueueEvents: [String] = []

    func run() async throws {
        let host = try self.host.resolve(defaults: GatewayConfiguration.defaultHost)
        ServiceHost.bootstrap(host)
        var configuration = try host.serviceSettings(GatewayConfiguration.self) ?? GatewayConfiguration()
        if let endpoints = HostOptions.list(flags: catalogEndpoints, environment: "STOREBUS_CATALOG_ENDPOINTS") {
            configuration.setEndpoints(endpoints, of: "catalog")
        }
        if let endpoints = HostOptions.list(flags: paymentQueueEndpoints, environment: "STOREBUS_PAYMENT_QUEUE_ENDPOINTS") {
            configuration.setEndpoints(endpoints, of: GatewayConfiguration.paymentQueueRoute)
        }
        if let endpoints = HostOptions.list(flags: receiptEndpoints, environment: "STOREBUS_RECEIPT_ENDPOINTS") {
            configuration.setEndpoints(endpoints, of: "receipt")
        }
        if let endpoints = HostOptions.list(flags: downloadEndpoints, environment: "STOREBUS_DOWNLOAD_ENDPOINTS") {
            configuration.setEndpoints(endpoints, of: "download")
        }
        if let endpoints = HostOptions.list(flags: paymentQueueEvents, environment: "STOREBUS_PAYMENT_QUEUE_EVENTS") {
            configuration.paymentQueueEventEndpoints = endpoints
        }
        if let secret = ProcessInfo.processInfo.environment["STOREBUS_SESSION_SECRET"], !secret.isEmpty { configuration.sessionSecret = secret }
        try await GatewayService(host: host, configuration: configuration).run()
    }
}
