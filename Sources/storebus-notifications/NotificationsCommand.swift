import ArgumentParser
import Foundation
import Notifications
import StoreBus
import StoreBusCommandLine
import StoreBusHost
import StoreBusStorage

/// `storebus-notifications`: App Store Server Notifications V2 for apps' backends
/// (storebus.notifications.v1), from the payment queue's event log, signed by the receipt service.
@main
struct NotificationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: NotificationsService.process,
        abstract: "Serve each app's signed App Store Server Notifications, from the payment queue's event log."
    )

    @OptionGroup var host: HostOptions

    @OptionGroup var paymentQueue: UpstreamEndpoints<Upstream.PaymentQueue>

    @OptionGroup var paymentQueueEvents: UpstreamEvents<Upstream.PaymentQueue>

    @OptionGroup var receipt: UpstreamEndpoints<Upstream.Receipt>

    @Option(help: "SQLite durability: full or normal. Also service.durability.")
    var durability: Durability?

    func run() async throws {
        let host = try self.host.resolve(defaults: NotificationsConfiguration.defaultHost)
        ServiceHost.bootstrap(host)
        var configuration = try host.serviceSettings(NotificationsConfiguration.self) ?? NotificationsConfiguration()
        if let endpoints = paymentQueue.endpoints { configuration.paymentQueueEndpoints = endpoints }
        if let endpoints = paymentQueueEvents.endpoints { configuration.paymentQueueEventEndpoints = endpoints }
        if let endpoints = receipt.endpoints { configuration.receiptEndpoints = endpoints }
        if let durability { configuration.durability = durability }
        try configuration.validate()
        if self.host.checked(NotificationsService.process, host) { return }
        try await NotificationsService(host: host, configuration: configuration).run()
    }
}
