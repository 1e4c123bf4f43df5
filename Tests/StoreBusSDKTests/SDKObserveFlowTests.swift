import Foundation
import Logging
import StoreBus
import StoreBusServer
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing
import ZeroMQ

@testable import StoreBusSDK

/// The observer loop while nobody listens, while the store is out of reach, and with slow consumers.
extension SDKObserveTests {
    @Test("while no observer listens the SDK acknowledges nothing: callbacks from that time reach the next observer, none skipped or repeated")
    func pausesWithoutListeners() async throws {
        let acknowledged = Positions()
        let gateway = try Self.endlessGateway(perAnswer: 1, delay: .milliseconds(20), acknowledged: acknowledged)
        let queue = try PaymentQueue(configuration: gateway.configuration)
        let observer = IdentifierObserver()
        // Given an observer that heard a few callbacks, then was removed (an answer may be on its way)
        queue.add(observer)
        #expect(await waitUntil { observer.identifiers.withLock { $0.count } >= 3 })
        queue.remove(observer)
        let heard = observer.identifiers.withLock { $0.count }
        // When nobody listens for a while, the queue stops asking
        try await Task.sleep(for: .milliseconds(300))
        let paused = acknowledged.values.withLock { $0 }
        try await Task.sleep(for: .milliseconds(200))
        #expect(acknowledged.values.withLock { $0 } == paused, "no Observe calls while nobody listens")
        #expect(paused.max() ?? 0 <= UInt64(heard), "nothing acknowledged beyond what an observer heard")
        // Then the observer added again hears the very next callbacks
        queue.add(observer)
        #expect(await waitUntil { observer.identifiers.withLock { $0.count } >= heard + 3 })
        let identifiers = observer.identifiers.withLock { $0 }
        #expect(identifiers == (1...identifiers.count).map { "t\($0)" }, "consecutive: none skipped or repeated")
        await queue.close()
        await gateway.stop()
    }

    @Test("observingError says why the stream is interrupted while the queue retries")
    func observingErrorWhileInterrupted() async throws {
        let gateway = try Self.endlessGateway(perAnswer: 1, delay: .milliseconds(20), acknowledged: Positions())
        var configuration = gateway.configuration
        configuration.callTimeout = .milliseconds(300)
        configuration.observerHold = .milliseconds(200)
        let queue = try PaymentQueue(configuration: configuration)
        let observer = IdentifierObserver()
        // Given a queue whose stream flows
        queue.add(observer)
        #expect(await waitUntil { observer.identifiers.withLock { $0.count } >= 2 })
        #expect(queue.observingError == nil)
        // When its gateway goes away, the queue says why nothing more arrives
        await gateway.stop()
        #expect(await waitUntil(timeout: .seconds(5)) { queue.observingError != nil })
        let error = try #require(queue.observingError)
        #expect([.unavailable, .deadlineExceeded, .cancelled].contains(error.status), "\(error)")
        await queue.close()
    }

    @Test("a slow callbacks consumer slows the stream: the SDK buffers at most two answers' worth")
    func slowSequenceIsBounded() async throws {
        let (gateway, queue, acknowledged) = try Self.flooded(credit: 8)
        var callbacks = queue.callbacks.makeAsyncIterator()
        // Given a consumer that takes one callback every 20 ms
        var taken: [PaymentQueueCallback] = []
        for _ in 0..<30 {
            if let callback = await callbacks.next() { taken.append(callback) }
            try await Task.sleep(for: .milliseconds(20))
        }
        // Then the queue asked for no more than it could hand over: what it acknowledged stays within
        // two answers (2 x credit) of what the consumer took
        let position = acknowledged.values.withLock { $0.max() ?? 0 }
        let consumed = taken.last?.seq ?? 0
        #expect(position <= consumed + 16, "acknowledged \(position) with \(consumed) taken")
        let seqs = taken.map(\.seq).filter { $0 > 0 }
        #expect(seqs == Array(1...UInt64(seqs.count)), "consecutive")
        await queue.close()
        await gateway.stop()
    }

    @Test("a callbacks sequence that ends with callbacks still buffered does not stall the others")
    func endedSequenceDoesNotStall() async throws {
        let (gateway, queue, _) = try Self.flooded(credit: 8)
        let observer = IdentifierObserver()
        queue.add(observer)
        // Given a sequence that takes one callback, then ends with a full buffer
        do {
            var callbacks = queue.callbacks.makeAsyncIterator()
            _ = await callbacks.next()
            try await Task.sleep(for: .milliseconds(200))
        }
        // Then the observer goes on hearing callbacks (a hundred take milliseconds; the time allowed is
        // for a full test run, whose other suites can hold this process's threads for seconds)
        let before = observer.identifiers.withLock { $0.count }
        #expect(await waitUntil(timeout: .seconds(10)) { observer.identifiers.withLock { $0.count } > before + 100 })
        await queue.close()
        await gateway.stop()
    }

    @Test("a queue dropped without close() shuts its connection down")
    func droppedQueueClosesItsConnection() async throws {
        // Given a queue made from a configuration (so it owns its connection), pointed at no gateway
        var queue: PaymentQueue? = try Self.unreachableQueue()
        let client = try #require(queue?.connection.client)
        // When the app lets go of it
        queue = nil
        // Then its RPC client is shut down: a call fails at once as CANCELLED, not by its deadline
        let shutDown = await waitUntil(timeout: .seconds(5)) { await Self.callError(client) == .cancelled }
        #expect(shutDown)
        _ = queue
    }

    static func callError(_ client: any StoreTransport) async -> StatusCode? {
        do {
            _ = try await client.callRaw(path: Storebus_Health_V1_Health.check.path, idempotent: true, body: Array("{}".utf8), options: CallOptions(timeout: .milliseconds(100)))
            return nil
        } catch {
            return error.code
        }
    }
}
