import ArgumentParser
import Foundation
import Receipt
import ReceiptFormat
import StoreBus
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

    @Option(name: .customLong("payment-queue-endpoint"), help: "RPC endpoint of storebus-payment-queue (repeatable). Also STOREBUS_PAYMENT_QUEUE_ENDPOINTS or service.paymentQueueEndpoints.")
    var paymentQueueEndpoints: [String] = []

    @Option(name: .customLong("payment-queue-events"), help: "Doorbell endpoint of storebus-payment-queue (repeatable). Also STOREBUS_PAYMENT_QUEUE_EVENTS or service.paymentQueueEventEndpoints.")
    var paymentQueueEventEndpoints: [String] = []

    @Option(name: .customLong("catalog-endpoint"), help: "RPC endpoint of storebus-catalog (repeatable). Also STOREBUS_CATALOG_ENDPOINTS or service.catalogEndpoints.")
    var catalogEndpoints: [String] = []

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
        if let endpoints = HostOptions.list(flags: paymentQueueEndpoints, environment: "STOREBUS_PAYMENT_QUEUE_ENDPOINTS") { configuration.paymentQueueEndpoints = endpoints }
        if let endpoints = HostOptions.list(flags: paymentQueueEventEndpoints, environment: "STOREBUS_PAYMENT_QUEUE_EVENTS") { configuration.paymentQueueEventEndpoints = endpoints }
        if let endpoints = HostOptions.list(flags: catalogEndpoints, environment: "STOREBUS_CATALOG_ENDPOINTS") { configuration.catalogEndpoints = endpoints }
        if let name = environment ?? ProcessInfo.processInfo.environment["STOREBUS_ENVIRONMENT"] {
            guard let chosen = ReceiptEnvironment(name: name) else {
                throw ValidationError("--environment must be sandbox or production")
            }
            configuration.environment = chosen
        }
        if let httpAddress { configuration.httpAddress = httpAddress }
        if let durability { configuration.durability = durability }
        try configuration.validate()
        try await ReceiptService(host: host, configuration: configuration).run()
    }
}

extension Durability: ExpressibleByArgument {}
