import Foundation
import Logging
import StoreBus
import StoreBusSDK
import StoreSchema
import Synchronization
import Testing
import ZeroMQ

@Suite("SDK observer loop")
struct SDKObserveTests {
    @Test("when the gateway answers Observe at once with nothing (busy or stopping), the SDK backs off instead of calling in a loop")
    func backsOffOnEarlyEmptyAnswers() async throws {
        // A scripted gateway: sessions for anyone; Observe answers the launch replay, then nothing,
        // at once, as the real gateway does when it cannot hold more calls.
        let observeCalls = Atomic<Int>(0)
        var router = RPCRouter()
        router.register(Storebus_Gateway_V1_Gateway.authenticate) { request, _ in
            .with {
                $0.sessionID = "session"
                $0.queue = .with { $0.appBundleID = request.appBundleID; $0.accountID = request.accountID; $0.deviceID = request.deviceID }
            }
        }
        router.register(Storebus_Gateway_V1_Gateway.observe) { request, _ in
            observeCalls.wrappingAdd(1, ordering: .relaxed)
            guard request.replay else { return .init() }
            return .with { $0.events = [.with { $0.replayComplete.replayedCount = 0 }] }
        }
        let context = try ZeroMQ.Context()
        let server = try RPCServer(
            configuration: ServerConfiguration(endpoints: ["tcp://127.0.0.1:*"]), router: router,
            context: context, logger: Logger(label: "test.gateway")
        )
        server.start()
        let queue = try PaymentQueue(configuration: StoreConfiguration(
            gatewayEndpoints: server.boundEndpoints, apiKey: "key", appBundleID: "com.example.app", accountID: "alice", deviceID: "phone"
        ))
        var callbacks = queue.callbacks.makeAsyncIterator()
        #expect(await callbacks.next()?.event == .replayCompleted(count: 0))
        let before = observeCalls.load(ordering: .relaxed)
        try await Task.sleep(for: .seconds(1))
        let during = observeCalls.load(ordering: .relaxed) - before
        // Backing off from 100 ms and doubling makes about four calls a second; a loop made thousands.
        #expect(during <= 10, "\(during) Observe calls in one second")
        await queue.close()
        await server.shutdown()
        context.shutdown()
        context.terminate()
    }
}
