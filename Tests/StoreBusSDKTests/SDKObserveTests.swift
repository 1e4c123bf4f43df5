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

/// An RPC server answering the gateway's methods as `router` scripts them, for tests of the SDK's
/// own behaviour against answers the real gateway gives only under load or faults.
struct ScriptedGateway {
    let context: ZeroMQ.Context
    let server: RPCServer

    init(router: RPCRouter) throws {
        context = try ZeroMQ.Context()
        server = try RPCServer(
            configuration: ServerConfiguration(endpoints: ["tcp://127.0.0.1:*"]), router: router,
            context: context, logger: Logger(label: "test.gateway")
        )
        server.start()
    }

    /// A client configuration for one device of an app, pointed at this server.
    var configuration: StoreConfiguration {
        StoreConfiguration(gatewayEndpoints: server.boundEndpoints, apiKey: "key", appBundleID: "com.example.app", accountID: "alice", deviceID: "phone")
    }

    func stop() async {
        await server.shutdown()
        context.shutdown()
        context.terminate()
    }
}

@Suite("SDK observer loop")
struct SDKObserveTests {
    @Test(
        "when the gateway answers Observe at once with nothing (busy or stopping), the SDK backs off instead of calling in a loop",
        // Also with a hold and a reconnect delay of zero, which once made the loop call without pause.
        arguments: [false, true]
    )
    func backsOffOnEarlyEmptyAnswers(zeroDelays: Bool) async throws {
        // A scripted gateway: sessions for anyone; Observe answers the launch replay, then nothing,
        // at once, as the real gateway does when it cannot hold more calls.
        let observeCalls = Atomic<Int>(0)
        var router = RPCRouter()
        router.register(Storebus_Gateway_V1_Gateway.authenticate) { request, _ in
            .with {
                $0.sessionID = "session"
                $0.queue = .with {
                    $0.appBundleID = request.appBundleID; $0.accountID = request.accountID; $0.deviceID = request.deviceID
                }
            }
        }
        router.register(Storebus_Gateway_V1_Gateway.observe) { request, _ in
            observeCalls.wrappingAdd(1, ordering: .relaxed)
            guard request.replay else { return .init() }
            return .with { $0.events = [.with { $0.replayComplete.replayedCount = 0 }] }
        }
        let gateway = try ScriptedGateway(router: router)
        var configuration = gateway.configuration
        if zeroDelays {
            configuration.observerHold = .zero
            configuration.reconnectDelay = .zero
        }
        let queue = try PaymentQueue(configuration: configuration)
        var callbacks = queue.callbacks.makeAsyncIterator()
        #expect(await callbacks.next()?.event == .replayCompleted(count: 0))
        let before = observeCalls.load(ordering: .relaxed)
        try await Task.sleep(for: .seconds(1))
        let during = observeCalls.load(ordering: .relaxed) - before
        // Backing off from 100 ms (10 ms at least) and doubling makes a few calls a second; a loop made
        // thousands.
        #expect(during <= 12, "\(during) Observe calls in one second")
        await queue.close()
        await gateway.stop()
    }
    @Test("a restore whose first answer is lost to its deadline is asked again under the same key, and never reported failed")
    func restoreRetriedUnderOneKey() async throws {
        // A scripted gateway: the first restore outlasts the SDK's call timeout, the next is answered.
        let keys = Mutex<[String]>([])
        var router = Self.emptyQueueRouter()
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions) { _, context in
            let count = keys.withLock { keys -> Int in
                keys.append(context.metadata[WireProtocol.idempotencyKeyMetadata] ?? "")
                return keys.count
            }
            if count == 1 { try await Task.sleep(for: .seconds(2)) }
            return .with { $0.restoreID = "restore-1" }
        }
        let gateway = try ScriptedGateway(router: router)
        var configuration = gateway.configuration
        configuration.callTimeout = .milliseconds(300)
        configuration.observerHold = .milliseconds(200)
        let queue = try PaymentQueue(configuration: configuration)
        let recorded = Mutex<[PaymentQueueCallback]>([])
        let stream = queue.callbacks
        let listening = Task { for await callback in stream { recorded.withLock { $0.append(callback) } } }

        queue.restoreCompletedTransactions()
        #expect(await waitUntil { keys.withLock { $0.count } >= 2 })
        try await Task.sleep(for: .milliseconds(300))
        let seen = keys.withLock { $0 }
        #expect(seen.count == 2 && !seen[0].isEmpty && seen[0] == seen[1], "\(seen)")
        let failures = recorded.withLock { $0 }.filter {
            if case .restoreCompletedTransactionsFailed = $0.event { return true }
            return false
        }
        #expect(failures.isEmpty, "\(failures)")
        await queue.close()
        listening.cancel()
        await gateway.stop()
    }

    @Test("once remove(_:) returns, the observer hears nothing more: a callback under way on another thread is finished first")
    func removeWaitsForDeliveryUnderWay() async throws {
        let gateway = try Self.endlessGateway(perAnswer: 1, delay: .milliseconds(20), acknowledged: Positions())
        let queue = try PaymentQueue(configuration: gateway.configuration)
        let observer = SlowObserver()
        queue.add(observer)
        // Given an observer in the middle of a callback (each takes 150 ms), when it is removed
        // from another thread: one of its own, woken by the callback as it begins (remove waits,
        // and a wait on the pool's few threads would hold up the other tests of the process; a
        // poll of `inside` from the pool ran only when the callback freed a thread, between
        // callbacks, and on a busy machine missed every one)
        let (entered, stillInside) = await withCheckedContinuation { (continuation: CheckedContinuation<(Bool, Bool), Never>) in
            Thread {
                let entered = observer.entered.wait(timeout: .now() + 20) == .success
                queue.remove(observer)
                continuation.resume(returning: (entered, observer.inside.load(ordering: .acquiring)))
            }.start()
        }
        #expect(entered, "no callback began in 20 s")
        // Then the callback had ended before remove returned, and none follows
        #expect(!stillInside, "remove returned while the observer was still being called")
        let heard = observer.calls.load(ordering: .acquiring)
        try await Task.sleep(for: .milliseconds(400))
        let later = observer.calls.load(ordering: .acquiring)
        #expect(later == heard)
        await queue.close()
        await gateway.stop()
    }

    @Test("a payment, a finish and a restore made before the launch replay has arrived wait for it, so their callbacks follow it")
    func callsWaitForTheLaunchReplay() async throws {
        // A scripted gateway whose replay takes 300 ms; each queue call records whether the replay had
        // been answered when the call arrived (a restore that arrived first would be in the replay's
        // snapshot, and its end callback, below the snapshot's position, never delivered).
        let replayAnswered = Atomic<Bool>(false)
        let early = Mutex<[String]>([])
        var router = Self.emptyQueueRouter(seq: 7) {
            try await Task.sleep(for: .milliseconds(300))
            replayAnswered.store(true, ordering: .releasing)
        }
        @Sendable func record(_ call: String) {
            if !replayAnswered.load(ordering: .acquiring) { early.withLock { $0.append(call) } }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.addPayment) { _, _ in
            record("add")
            return .with { $0.transaction.transactionIdentifier = "t1" }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction) { _, _ in
            record("finish")
            return .init()
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions) { _, _ in
            record("restore")
            return .with { $0.restoreID = "restore-1" }
        }
        let gateway = try ScriptedGateway(router: router)
        var configuration = gateway.configuration
        configuration.observerHold = .milliseconds(200)
        let queue = try PaymentQueue(configuration: configuration)
        // Given an app that starts listening and, at once, restores, buys and finishes
        let stream = queue.callbacks
        let listening = Task { for await _ in stream {} }
        async let restored = queue.restore()
        async let added = queue.addPayment(Payment(productIdentifier: "com.example.gems"))
        let transaction = try await added
        _ = try await (restored, queue.finish(transaction))
        // Then none of them reached the store before the replay had been answered
        #expect(early.withLock { $0 }.isEmpty, "sent before the launch replay: \(early.withLock { $0 })")
        let answered = replayAnswered.load(ordering: .acquiring)
        #expect(answered)
        await queue.close()
        listening.cancel()
        await gateway.stop()
    }

    @Test("with nobody listening, a call does not wait for a launch replay")
    func callsWithoutListenersDoNotWait() async throws {
        var router = Self.emptyQueueRouter()
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions) { _, _ in .with { $0.restoreID = "restore-1" } }
        let gateway = try ScriptedGateway(router: router)
        var configuration = gateway.configuration
        // A wait for a replay would last the call timeout; the call alone takes far less, even on a
        // loaded machine.
        configuration.callTimeout = .seconds(30)
        let queue = try PaymentQueue(configuration: configuration)
        let started = ContinuousClock.now
        #expect(try await queue.restore().restoreID == "restore-1")
        #expect(started.duration(to: .now) < .seconds(15))
        await queue.close()
        await gateway.stop()
    }

    @Test("observers removed by another inside a callback do not hear that callback")
    func removedInsideACallback() async throws {
        let gateway = try Self.endlessGateway(perAnswer: 1, delay: .milliseconds(20), acknowledged: Positions())
        let queue = try PaymentQueue(configuration: gateway.configuration)
        let others = (0..<8).map { _ in IdentifierObserver() }
        let first = RemovingObserver(removing: others)
        // Given observers, one of which removes the others in its first callback (observers are
        // called in no fixed order: with eight, some follow it, whatever the order)
        for observer in others { queue.add(observer) }
        queue.add(first)
        #expect(await waitUntil { first.identifiers.withLock { $0.count } >= 3 })
        await queue.close()
        // Then each had heard, when removed, all it ever hears
        let atRemoval = first.heardAtRemoval.withLock { $0 }
        let heard = others.map { observer in observer.identifiers.withLock { $0.count } }
        #expect(heard == atRemoval, "heard in all \(heard), when removed \(atRemoval)")
        await gateway.stop()
    }

    /// Records what it hears, and removes other observers in its first callback, noting how many
    /// callbacks each had heard then.
    final class RemovingObserver: PaymentTransactionObserver {
        let identifiers = Mutex<[String]>([])
        let heardAtRemoval = Mutex<[Int]>([])
        let removing: [IdentifierObserver]
        init(removing: [IdentifierObserver]) { self.removing = removing }
        func paymentQueue(_ queue: PaymentQueue, updatedTransactions transactions: [PaymentTransaction]) {
            let first = identifiers.withLock { identifiers in
                identifiers += transactions.map(\.transactionIdentifier)
                return identifiers.count == transactions.count
            }
            guard first else { return }
            for observer in removing {
                queue.remove(observer)
                heardAtRemoval.withLock { $0.append(observer.identifiers.withLock { $0.count }) }
            }
        }
    }

    @Test("when a shared connection is closed under a queue, its callbacks sequences end")
    func closedConnectionEndsSequences() async throws {
        var configuration = StoreConfiguration(gatewayEndpoints: ["tcp://127.0.0.1:9"], apiKey: "key", appBundleID: "com.example.app", accountID: "alice", deviceID: "phone")
        configuration.callTimeout = .milliseconds(300)
        let connection = try StoreConnection(configuration: configuration)
        let queue = PaymentQueue(connection: connection)
        let callbacks = queue.callbacks
        let ended = Atomic<Bool>(false)
        let consumer = Task {
            for await _ in callbacks {}
            ended.store(true, ordering: .releasing)
        }
        // When another owner closes the connection the queue observes through
        await connection.close()
        // Then the `for await` ends (it used to wait forever)
        #expect(await waitUntil(timeout: .seconds(5)) { ended.load(ordering: .acquiring) })
        consumer.cancel()
        await queue.close()
    }

    @Test("a finishTransaction whose first answer is lost to its deadline is made again, and the transaction is finished")
    func finishRetriedWhileOutcomeUnknown() async throws {
        // A scripted gateway: the first finish outlasts the SDK's call timeout, the next is answered.
        let finishes = Mutex<[String]>([])
        var router = Self.emptyQueueRouter()
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction) { request, _ in
            let count = finishes.withLock { finishes -> Int in
                finishes.append(request.transactionIdentifier)
                return finishes.count
            }
            if count == 1 { try await Task.sleep(for: .seconds(2)) }
            return .with { $0.alreadyFinished = count > 1 }
        }
        let gateway = try ScriptedGateway(router: router)
        var configuration = gateway.configuration
        configuration.callTimeout = .milliseconds(300)
        configuration.observerHold = .milliseconds(200)
        let queue = try PaymentQueue(configuration: configuration)

        queue.finishTransaction(
            PaymentTransaction(
                .with {
                    $0.transactionIdentifier = "1000000000000007"; $0.transactionState = .purchased
                }))
        #expect(await waitUntil { finishes.withLock { $0.count } >= 2 })
        try await Task.sleep(for: .milliseconds(300))
        #expect(finishes.withLock { $0 } == ["1000000000000007", "1000000000000007"])
        await queue.close()
        await gateway.stop()
    }

    /// A scripted gateway's methods for an empty queue: sessions open, the launch replay (after
    /// `beforeReplay`) holds nothing and ends at position `seq`, and live observe calls are held for
    /// their wait. Tests add the queue methods they script.
    static func emptyQueueRouter(seq: UInt64 = 0, beforeReplay: @escaping @Sendable () async throws -> Void = {}) -> RPCRouter {
        var router = RPCRouter()
        router.register(Storebus_Gateway_V1_Gateway.authenticate) { _, _ in .with { $0.sessionID = "session" } }
        router.register(Storebus_Gateway_V1_Gateway.observe) { request, _ in
            guard request.replay else {
                try await Task.sleep(for: .milliseconds(Int(request.waitMs)))
                return .init()
            }
            try await beforeReplay()
            return .with {
                $0.events = [
                    .with {
                        $0.seq = seq; $0.replayComplete.replayedCount = 0
                    }
                ]
            }
        }
        return router
    }

    /// A scripted gateway with an empty queue (the replay at once, live calls held), answering
    /// AddPayment with `addPayment` and counting FinishTransaction calls.
    static func refusingGateway(
        finishCalls: Counter = Counter(),
        addPayment: @escaping @Sendable (Storebus_PaymentQueue_V1_AddPaymentRequest) async throws -> Storebus_PaymentQueue_V1_AddPaymentResponse
    ) throws -> ScriptedGateway {
        var router = emptyQueueRouter(seq: 3)
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.addPayment) { request, _ in try await addPayment(request) }
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction) { _, _ in
            finishCalls.value.wrappingAdd(1, ordering: .relaxed)
            return .init()
        }
        return try ScriptedGateway(router: router)
    }

    /// A count tasks share.
    final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    /// Records every callback of a queue's sequence.
    final class Recording: Sendable {
        let callbacks = Mutex<[PaymentQueueCallback]>([])
        private let task = Mutex<Task<Void, Never>?>(nil)

        static func of(_ stream: PaymentQueueCallbacks) -> Recording {
            let recording = Recording()
            recording.task.withLock { $0 = Task { for await callback in stream { recording.callbacks.withLock { $0.append(callback) } } } }
            return recording
        }

        func cancel() { task.withLock { $0?.cancel() } }
        var failed: [PaymentTransaction] {
            callbacks.withLock { $0 }.flatMap { callback -> [PaymentTransaction] in
                if case .updatedTransactions(let transactions, _) = callback.event { return transactions.filter { $0.transactionState == .failed } }
                return []
            }
        }
        var removed: [String] {
            callbacks.withLock { $0 }.flatMap { callback -> [String] in
                if case .removedTransactions(let transactions) = callback.event { return transactions.map(\.transactionIdentifier) }
                return []
            }
        }
    }

    @Test("a payment the store refuses reaches the observers as a FAILED transaction only the queue knows, which finishing removes without asking the store")
    func refusedPaymentIsHeard() async throws {
        let finishCalls = Counter()
        let gateway = try Self.refusingGateway(finishCalls: finishCalls) { _ in
            throw RPCError.invalidArgument(field: "payment.productIdentifier", "must be at most 255 bytes")
        }
        let queue = try PaymentQueue(configuration: gateway.configuration)
        let recording = Recording.of(queue.callbacks)
        // When the app adds a payment StoreKit-style and the store refuses it
        queue.add(Payment(productIdentifier: "com.example.gems", quantity: 3))
        // Then its observers hear it fail, with StoreKit's code for an invalid payment
        #expect(await waitUntil { !recording.failed.isEmpty })
        let failed = try #require(recording.failed.first)
        #expect(failed.transactionIdentifier.hasPrefix(PaymentQueue.localTransactionPrefix), "\(failed.transactionIdentifier)")
        #expect(failed.error?.code == .paymentInvalid && failed.payment.quantity == 3, "\(String(describing: failed.error))")
        #expect(queue.transactions.map(\.transactionIdentifier) == [failed.transactionIdentifier])
        // And finishing it removes it, here only
        queue.finishTransaction(failed)
        #expect(await waitUntil { recording.removed == [failed.transactionIdentifier] })
        #expect(queue.transactions.isEmpty)
        #expect(try await queue.finish(failed), "finished already")
        let calls = finishCalls.value.load(ordering: .relaxed)
        #expect(calls == 0)
        await queue.close()
        recording.cancel()
        await gateway.stop()
    }

    @Test("a quantity outside 1 to 10 is refused before anything is sent", arguments: [0, -1, 11])
    func quantityRefusedLocally(quantity: Int) async throws {
        // A gateway nobody serves: a payment that were sent would wait for it.
        var configuration = StoreConfiguration(
            gatewayEndpoints: ["ipc:///nonexistent/storebus-quantity.sock"], apiKey: "k", appBundleID: "com.example.app", accountID: "a", deviceID: "d"
        )
        configuration.callTimeout = .seconds(30)
        let queue = try PaymentQueue(configuration: configuration)
        let started = ContinuousClock.now
        do {
            _ = try await queue.addPayment(Payment(productIdentifier: "com.example.gems", quantity: quantity))
            Issue.record("quantity \(quantity) was accepted")
        } catch let error as StoreError {
            #expect(error.status == .invalidArgument && error.message.contains("payment.quantity"), "\(error)")
        }
        #expect(started.duration(to: .now) < .seconds(10), "refused without waiting for a gateway")
        #expect(
            PaymentQueue.paymentFailureCode(StoreError(RPCError.invalidArgument(field: "payment.quantity", "x"))) == .paymentInvalid,
            "add(_:) reports it as a FAILED transaction with paymentInvalid")
        await queue.close()
    }

    @Test("a refusal that comes while nobody listens reaches the next listener, after its launch replay")
    func refusalWaitsForAListener() async throws {
        let attempts = Counter()
        let gateway = try Self.refusingGateway { _ in
            attempts.value.wrappingAdd(1, ordering: .relaxed)
            throw RPCError(.resourceExhausted, "the queue is full")
        }
        let queue = try PaymentQueue(configuration: gateway.configuration)
        queue.add(Payment(productIdentifier: "com.example.gems"))
        #expect(await waitUntil { attempts.value.load(ordering: .relaxed) == 1 })
        try await Task.sleep(for: .milliseconds(100))
        // When something starts listening, it hears the replay's end, then the refusal
        let recording = Recording.of(queue.callbacks)
        #expect(await waitUntil { !recording.failed.isEmpty })
        let events = recording.callbacks.withLock { $0 }.map(\.event)
        #expect(events.first == .replayCompleted(count: 0), "\(events)")
        #expect(recording.failed.first?.error?.code == .clientInvalid)
        await queue.close()
        recording.cancel()
        await gateway.stop()
    }

    @Test("payments added StoreKit-style reach the store in the order they were added")
    func paymentsKeepTheirOrder() async throws {
        let log = Mutex<[String]>([])
        let gateway = try Self.refusingGateway { request in
            let product = request.payment.productIdentifier
            log.withLock { $0.append("start \(product)") }
            // The first takes long: a later payment sent meanwhile would overtake it.
            if product == "a" { try await Task.sleep(for: .milliseconds(200)) }
            log.withLock { $0.append("end \(product)") }
            return .with {
                $0.transaction = .with {
                    $0.transactionIdentifier = product; $0.transactionState = .purchasing
                }
            }
        }
        let queue = try PaymentQueue(configuration: gateway.configuration)
        for product in ["a", "b", "c"] { queue.add(Payment(productIdentifier: product)) }
        #expect(await waitUntil { log.withLock { $0.count } == 6 })
        #expect(log.withLock { $0 } == ["start a", "end a", "start b", "end b", "start c", "end c"])
        await queue.close()
        await gateway.stop()
    }

    @Test("a queue dropped without close() ends its callbacks sequences")
    func droppedQueueEndsItsSequences() async throws {
        var queue: PaymentQueue? = try Self.unreachableQueue()
        let callbacks = try #require(queue?.callbacks)
        let ended = Atomic<Bool>(false)
        let consumer = Task {
            for await _ in callbacks {}
            ended.store(true, ordering: .releasing)
        }
        // When the app lets go of the queue, the `for await` ends (it used to wait forever)
        queue = nil
        #expect(await waitUntil(timeout: .seconds(5)) { ended.load(ordering: .acquiring) })
        consumer.cancel()
        _ = queue
    }

    @Test("a failed restore is reported with the StoreKit code its cause calls for")
    func restoreFailureCodes() {
        let cases: [(StatusCode, StoreKitError.Code)] = [
            (.unavailable, .cloudServiceNetworkConnectionFailed), (.deadlineExceeded, .cloudServiceNetworkConnectionFailed),
            (.cancelled, .cloudServiceNetworkConnectionFailed), (.permissionDenied, .cloudServicePermissionDenied),
            (.unauthenticated, .cloudServicePermissionDenied), (.invalidArgument, .clientInvalid),
            (.resourceExhausted, .clientInvalid), (.internalError, .unknown)
        ]
        for (status, code) in cases {
            #expect(PaymentQueue.restoreFailureCode(StoreError(RPCError(status, "test"))) == code, "\(status)")
        }
    }

    /// A queue made from a configuration (so it owns its connection) pointed at no gateway, with short
    /// call timeouts.
    static func unreachableQueue() throws -> PaymentQueue {
        var configuration = StoreConfiguration(gatewayEndpoints: ["tcp://127.0.0.1:9"], apiKey: "key", appBundleID: "com.example.app", accountID: "alice", deviceID: "phone")
        configuration.callTimeout = .milliseconds(300)
        return try PaymentQueue(configuration: configuration)
    }

    /// An observer whose every callback takes 150 ms, and says when it is inside one.
    final class SlowObserver: PaymentTransactionObserver {
        let inside = Atomic<Bool>(false)
        let calls = Atomic<Int>(0)
        /// Signalled as each callback begins.
        let entered = DispatchSemaphore(value: 0)
        func paymentQueue(_ queue: PaymentQueue, updatedTransactions transactions: [PaymentTransaction]) {
            inside.store(true, ordering: .releasing)
            entered.signal()
            Thread.sleep(forTimeInterval: 0.15)
            calls.wrappingAdd(1, ordering: .acquiringAndReleasing)
            inside.store(false, ordering: .releasing)
        }
    }

    /// A gateway whose queue never runs dry: each live Observe is answered, after `delay`, with
    /// `perAnswer` (at most the credit) updatedTransactions callbacks following the caller's position;
    /// transaction `t<n>` is callback `n`. Records each call's acknowledged position.
    static func endlessGateway(perAnswer: Int, delay: Duration, acknowledged: Positions) throws -> ScriptedGateway {
        var router = RPCRouter()
        router.register(Storebus_Gateway_V1_Gateway.authenticate) { _, _ in .with { $0.sessionID = "session" } }
        router.register(Storebus_Gateway_V1_Gateway.observe) { request, _ in
            guard request.replay else {
                acknowledged.values.withLock { $0.append(request.afterSeq) }
                try await Task.sleep(for: delay)
                let count = min(perAnswer, Int(request.credit))
                return .with {
                    $0.events = (1...UInt64(count)).map { offset in
                        let seq = request.afterSeq + offset
                        return .with {
                            $0.seq = seq
                            $0.updatedTransactions.transactions = [
                                .with {
                                    $0.transactionIdentifier = "t\(seq)"; $0.transactionState = .purchased
                                }
                            ]
                        }
                    }
                }
            }
            return .with { $0.events = [.with { $0.replayComplete.replayedCount = 0 }] }
        }
        return try ScriptedGateway(router: router)
    }

    /// Positions a scripted gateway was sent.
    final class Positions: Sendable {
        let values = Mutex<[UInt64]>([])
    }

    /// A queue whose gateway answers every Observe at once with as many callbacks as the credit
    /// allows, the queue asking for `credit` at a time.
    static func flooded(credit: UInt32) throws -> (ScriptedGateway, PaymentQueue, Positions) {
        let acknowledged = Positions()
        let gateway = try endlessGateway(perAnswer: 500, delay: .zero, acknowledged: acknowledged)
        var configuration = gateway.configuration
        configuration.observerCredit = credit
        return (gateway, try PaymentQueue(configuration: configuration), acknowledged)
    }

    /// Records the transaction identifiers of updatedTransactions callbacks.
    final class IdentifierObserver: PaymentTransactionObserver {
        let identifiers = Mutex<[String]>([])
        func paymentQueue(_ queue: PaymentQueue, updatedTransactions transactions: [PaymentTransaction]) {
            identifiers.withLock { $0 += transactions.map(\.transactionIdentifier) }
        }
    }

}
