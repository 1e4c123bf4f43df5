import ArgumentParser
import Foundation
import Receipt
import ReceiptFormat
import StoreBus
import StoreBusCommandLine
import StoreBusHost
import StoreBusStorage

/// `storebus-receipt`: signed app receipts, signed transactions, verifyReceipt and entitlements
/// (storebus.receipt.v1), built from the payment queue's event log.
@main
struct ReceiptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: ReceiptService.process,
        abstract: "Serve app receipts, their verification and entitlements, from the payment queue's event log."
    )

    @OptionGroup var host: HostOptions

    @OptionGroup var paymentQueue: UpstreamEndpoints<Upstream.PaymentQueue>

    @OptionGroup var paymentQueueEvents: UpstreamEvents<Upstream.PaymentQueue>

    @OptionGroup var catalog: UpstreamEndpoints<Upstream.Catalog>

    @Option(help: "sandbox or production. Also STOREBUS_ENVIRONMENT or service.environment.")
    var environment: String?

    @Option(name: .customLong("http-address"), help: "host:port of POST /verifyReceipt; empty for none. Also service.httpAddress.")
    var httpAddress: String?

    @Option(help: "SQLite durability: full or normal. Also service.durability.")
    var durability: Durability?

    func run() async throws {
        let host = try self.host.resolve(defaults: ReceiptConfiguration.defaultHost)
        ServiceHost.bootstrap(host)
        var configuration = try host.serviceSettings(ReceiptConfiguration.self) ?? ReceiptConfiguration()
        if let endpoints = paymentQueue.endpoints { configuration.paymentQueueEndpoints = endpoints }
        if let endpoints = paymentQueueEvents.endpoints { configuration.paymentQueueEventEndpoints = endpoints }
        if let endpoints = catalog.endpoints { configuration.catalogEndpoints = endpoints }
        if let name = environment ?? ProcessInfo.processInfo.environment["STOREBUS_ENVIRONMENT"] {
            guard let chosen = ReceiptEnvironment(name: name) else {
                throw ValidationError("--environment must be sandbox or production")
            }
            configuration.environment = chosen
        }
        if let httpAddress { configuration.httpAddress = httpAddress }
        if let durability { configuration.durability = durability }
        try configuration.validate()
        if self.host.checked(ReceiptService.process, host) { return }
        try await ReceiptService(host: host, configuration: configuration).run()
    }
}
