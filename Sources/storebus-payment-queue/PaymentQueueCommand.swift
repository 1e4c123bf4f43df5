import ArgumentParser
import Foundation
import PaymentQueue
import StoreBus
import StoreBusCommandLine
import StoreBusHost
import StoreBusStorage

/// `storebus-payment-queue`: the durable payment queues, their state machine and the sandbox payment
/// authority (storebus.payment_queue.v1).
@main
struct PaymentQueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: PaymentQueueService.process,
        abstract: "Serve payment queues: transactions, the sandbox payment authority, the charge ledger."
    )

    @OptionGroup var host: HostOptions

    @OptionGroup var catalog: UpstreamEndpoints<Upstream.Catalog>

    @Option(help: "SQLite durability: full or normal. Also service.durability.")
    var durability: Durability?

    @Option(name: .customLong("catalog-cache-ms"), help: "How long catalog answers are kept, in milliseconds (0: ask on every payment). Also service.catalogCacheMilliseconds.")
    var catalogCacheMilliseconds: Int?

    func run() async throws {
        let host = try self.host.resolve(defaults: PaymentQueueConfiguration.defaultHost)
        ServiceHost.bootstrap(host)
        var configuration = try host.serviceSettings(PaymentQueueConfiguration.self) ?? PaymentQueueConfiguration()
        if let endpoints = catalog.endpoints { configuration.catalogEndpoints = endpoints }
        if let durability { configuration.durability = durability }
        if let catalogCacheMilliseconds { configuration.catalogCacheMilliseconds = catalogCacheMilliseconds }
        try configuration.validate()
        if self.host.checked(PaymentQueueService.process, host) { return }
        try await PaymentQueueService(host: host, configuration: configuration).run()
    }
}
