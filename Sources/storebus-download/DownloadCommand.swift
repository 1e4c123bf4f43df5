import ArgumentParser
import Download
import Foundation
import StoreBus
import StoreBusHost

/// `storebus-download`: hosted content for downloadable products (storebus.download.v1), served
/// to the devices that own it.
@main
struct DownloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: DownloadService.process,
        abstract: "Serve hosted content in chunks to the devices whose receipts prove they bought it."
    )

    @OptionGroup var host: HostOptions

    @Option(name: .customLong("content-root"), help: "Folder of the hosted content. Also STOREBUS_CONTENT_ROOT or service.contentRoot.")
    var contentRoot: String?

    @Option(name: .customLong("catalog-endpoint"), help: "RPC endpoint of storebus-catalog (repeatable). Also STOREBUS_CATALOG_ENDPOINTS or service.catalogEndpoints.")
    var catalogEndpoints: [String] = []

    @Option(name: .customLong("payment-queue-endpoint"), help: "RPC endpoint of storebus-payment-queue (repeatable). Also STOREBUS_PAYMENT_QUEUE_ENDPOINTS or service.paymentQueueEndpoints.")
    var paymentQueueEndpoints: [String] = []

    @Option(name: .customLong("payment-queue-events"), help: "Doorbell endpoint of storebus-payment-queue (repeatable). Also STOREBUS_PAYMENT_QUEUE_EVENTS or service.paymentQueueEventEndpoints.")
    var paymentQueueEventEndpoints: [String] = []

    @Option(name: .customLong("receipt-endpoint"), help: "RPC endpoint of storebus-receipt (repeatable). Also STOREBUS_RECEIPT_ENDPOINTS or service.receiptEndpoints.")
    var receiptEndpoints: [String] = []

    func run() async throws {
        let host = try self.host.resolve(defaults: DownloadConfiguration.defaultHost)
        ServiceHost.bootstrap(host)
        var configuration = try host.serviceSettings(DownloadConfiguration.self) ?? DownloadConfiguration()
        // Given here, a relative content root is relative to the working directory.
        if let root = contentRoot ?? ProcessInfo.processInfo.environment["STOREBUS_CONTENT_ROOT"] {
            configuration.contentRoot = URL(fileURLWithPath: root).standardizedFileURL.path
        }
        if let endpoints = HostOptions.list(flags: catalogEndpoints, environment: "STOREBUS_CATALOG_ENDPOINTS") { configuration.catalogEndpoints = endpoints }
        if let endpoints = HostOptions.list(flags: paymentQueueEndpoints, environment: "STOREBUS_PAYMENT_QUEUE_ENDPOINTS") { configuration.paymentQueueEndpoints = endpoints }
        if let endpoints = HostOptions.list(flags: paymentQueueEventEndpoints, environment: "STOREBUS_PAYMENT_QUEUE_EVENTS") { configuration.paymentQueueEventEndpoints = endpoints }
        if let endpoints = HostOptions.list(flags: receiptEndpoints, environment: "STOREBUS_RECEIPT_ENDPOINTS") { configuration.receiptEndpoints = endpoints }
        try await DownloadService(host: host, configuration: configuration).run()
    }
}
