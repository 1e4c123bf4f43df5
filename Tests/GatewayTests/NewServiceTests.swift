import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// What adding a service costs: storebus-testkit-echo is echo.proto, an executable serving the
/// generated handler protocol, and a route. The gateway and the interceptors take it as they are.
@Suite("A new service, against the real processes")
struct NewServiceTests {
    @Test("a service added as a .proto, an executable and a route is forwarded by the gateway, its queue filled and checked by the contract")
    func echoThroughTheGateway() async throws {
        // Given the echo service and a cluster whose gateway has one more route
        let home = try TemporaryDirectory(prefix: "echo")
        defer { home.remove() }
        let endpoint = home.ipcEndpoint("echo")
        let echo = ServiceProcess(name: "storebus-testkit-echo", arguments: ["--rpc-endpoint", endpoint, "--log-level", "warning"], logFile: home.url.appendingPathComponent("echo.log"))
        let cluster = try StoreCluster(
            gatewayCount: 1,
            extraRoutes: [
                ExtraRoute(name: "echo", process: "storebus-testkit-echo", services: [Storebus_Testkit_V1_Echo.serviceName], endpoint: endpoint)
            ])
        func stopAll() async {
            await cluster.stop()
            _ = await echo.stop()
        }
        do {
            try echo.start()
            try await echo.waitUntilServing(endpoint: endpoint)
            try await cluster.start()
            let alice = try StoreConnection(configuration: cluster.configuration(account: "alice"))

            // When a device says something naming no queue
            let answer = try await alice.call(Storebus_Testkit_V1_Echo.say, .with { $0.text = "hello" })
            // Then the echo service heard it acting for the session's queue
            #expect(answer.text == "hello")
            #expect(answer.queue.appBundleID == puzzle && answer.queue.accountID == "alice" && answer.queue.deviceID == "phone")

            // Another account's queue is refused before the handler, as for any service
            do {
                _ = try await alice.call(
                    Storebus_Testkit_V1_Echo.say,
                    .with {
                        $0.queue.accountID = "bob"; $0.text = "hi"
                    })
                Issue.record("another account's queue was answered")
            } catch let error as StoreError {
                #expect(error.status == .permissionDenied && error.reason == "OTHER_ACCOUNT", "\(error)")
            }
            // and so is a text longer than its rule allows
            do {
                _ = try await alice.call(Storebus_Testkit_V1_Echo.say, .with { $0.text = String(repeating: "x", count: 257) })
                Issue.record("a text over 256 bytes was answered")
            } catch let error as StoreError {
                #expect(error.status == .invalidArgument && error.message.contains("text"), "\(error)")
            }
            await alice.close()
        } catch {
            await stopAll()
            throw error
        }
        await stopAll()
    }
}
