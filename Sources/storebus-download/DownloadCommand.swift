import ArgumentParser
import Download
import Foundation
import StoreBus
import StoreBusCommandLine
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

    @OptionGroup var catalog: UpstreamEndpoints<Upstream.Catalog>

    @OptionGroup var paymentQueue: UpstreamEndpoints<Upstream.PaymentQueue>

    @OptionGroup var paymentQueueEvents: UpstreamEvents<Upstream.PaymentQueue>

    @OptionGroup var receipt: UpstreamEndpoints<Upstream.Receipt>

    func run() async throws {
        let host = try self.host.resolve(defaults: DownloadConfiguration.defaultHost)
        ServiceHost.bootstrap(host)
        var configuration = try host.serviceSettings(DownloadConfiguration.self) ?? DownloadConfiguration()
        // Given here, a relative content root is relative to the working directory.
        if let root = contentRoot ?? ProcessInfo.processInfo.environment["STOREBUS_CONTENT_ROOT"] {
            configuration.contentRoot = URL(fileURLWithPath: root).standardizedFileURL.path
        }
        if let endpoints = catalog.endpoints { configuration.catalogEndpoints = endpoints }
        if let endpoints = paymentQueue.endpoints { configuration.paymentQueueEndpoints = endpoints }
        if let endpoints = paymentQueueEvents.endpoints { configuration.paymentQueueEventEndpoints = endpoints }
        if let endpoints = receipt.endpoints { configuration.receiptEndpoints = endpoints }
        let service = DownloadService(host: host, configuration: configuration)
        if self.host.checkConfig {
            _ = try service.checkedConfiguration()
            if self.host.checked(DownloadService.process, host) { return }
        }
        try await service.run()
    }
}
