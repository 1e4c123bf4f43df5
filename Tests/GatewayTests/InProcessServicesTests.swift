import Catalog
import CatalogFormat
import Foundation
import Gateway
import Logging
import PaymentQueue
import ServiceLifecycle
import StoreBus
import StoreBusHost
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// Every service is a library `Service` built from a configuration: a program (here, the test) can
/// run them all in one process, under one ServiceGroup, as their executables run each alone.
@Suite("Services run in-process from their configurations")
struct InProcessServicesTests {
    @Test("catalog, payment queue and gateway started in this process from configuration values serve a purchase through the SDK, then stop with their group's graceful shutdown")
    func servicesRunInProcess() async throws {
        let directory = try TemporaryDirectory(prefix: "inproc")
        defer { directory.remove() }
        // Given the three services' configurations, as their config files would give them
        func host(_ name: String, events: [String] = [], data: String? = nil) -> HostConfiguration {
            var host = HostConfiguration(rpcEndpoints: [directory.ipcEndpoint(name)], eventEndpoints: events, dataDirectory: data, logLevel: .warning)
            host.handlesSignals = false
            return host
        }
        var catalog = CatalogConfiguration()
        catalog.catalogFile = deployDirectory.appendingPathComponent("catalog/catalog.json").path
        var queue = PaymentQueueConfiguration()
        queue.catalogEndpoints = [directory.ipcEndpoint("catalog")]
        var gateway = GatewayConfiguration()
        gateway.setEndpoints([directory.ipcEndpoint("catalog")], of: "catalog")
        gateway.setEndpoints([directory.ipcEndpoint("pq")], of: GatewayConfiguration.paymentQueueRoute)
        gateway.paymentQueueEventEndpoints = [directory.ipcEndpoint("pq-events")]
        gateway.apiKeys = [APIKey(name: "puzzle", key: appKey, apps: [puzzle])]
        let group = ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: CatalogService(host: host("catalog"), configuration: catalog)),
                    .init(service: PaymentQueueService(host: host("pq", events: [directory.ipcEndpoint("pq-events")], data: directory.path("data")), configuration: queue)),
                    .init(service: GatewayService(host: host("gw"), configuration: gateway))
                ],
                logger: Logger(label: "in-process")
            ))
        let running = Task { try await group.run() }

        // When a device buys through the in-process gateway
        var configuration = StoreConfiguration(
            gatewayEndpoints: [directory.ipcEndpoint("gw")], apiKey: appKey, appBundleID: puzzle, accountID: "inproc", deviceID: "phone"
        )
        configuration.observerHold = .seconds(5)
        configuration.callTimeout = .seconds(10)
        let client = try PaymentQueue(configuration: configuration)
        let recorder = Recorder(client)
        #expect(await recorder.attached(timeout: .seconds(30)))
        // Then it is purchased and finished, with the observer's callbacks
        try await completedPurchase(client, recorder)
        recorder.cancel()
        await client.close()

        // And the group's graceful shutdown stops all three; the run ends without an error
        await group.triggerGracefulShutdown()
        try await running.value
        // The payment queue's database holds the purchase after the stop
        #expect(FileManager.default.fileExists(atPath: directory.path("data") + "/payment-queue.sqlite"))
    }
}
