import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing

@Suite("Payment queue durability and sandbox controls, against the real processes")
struct DurabilityTests {
    @Test("under load, through repeated SIGKILL and restart: every acknowledged purchase is charged exactly once and nothing stays purchasing")
    func killUnderLoad() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        // Each client buys at least 25 times, and goes on until the last kill and restart are over
        // (at most 400 times), so that every kill lands under load however fast the machine is.
        let clients = 8, purchasesPerClient = 25, mostPerClient = 400
        let acknowledged = Acknowledged() // idempotency key -> transaction id
        let killsDone = Flag()
        // Decisions come 200 ms after each payment, so kills find transactions still purchasing
        _ = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.setPaymentPolicy,
            .with {
                $0.appBundleID = puzzle
                $0.policy = .with {
                    $0.mode = .approve; $0.delayMs = 200
                }
            })

        // Given clients buying coins, each purchase retried with its idempotency key until answered
        let buyers = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for buyer in 0..<clients {
                    group.addTask {
                        var purchase = 0
                        while purchase < purchasesPerClient || (!killsDone.isSet && purchase < mostPerClient) {
                            defer { purchase += 1 }
                            let key = "buyer\(buyer)-purchase\(purchase)"
                            let queue = queueRef(account: "buyer\(buyer)", device: "device")
                            while true {
                                do {
                                    let answer = try await client.call(
                                        Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
                                        .with {
                                            $0.queue = queue
                                            $0.payment = .with {
                                                $0.productIdentifier = coins; $0.quantity = 1
                                            }
                                            $0.storefront = "USA"
                                            $0.idempotencyKey = key
                                        }, options: CallOptions(timeout: .seconds(2), idempotencyKey: key))
                                    acknowledged.withLock { $0[key] = answer.transaction.transactionIdentifier }
                                    break
                                } catch {
                                    try await Task.sleep(for: .milliseconds(20)) // the service is restarting: retry
                                }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        // When the service is killed with SIGKILL three times while they buy, each time once purchases
        // have been answered since the last start
        var random = SystemRandomNumberGenerator()
        for _ in 0..<3 {
            let answered = acknowledged.withLock { $0.count }
            #expect(await waitUntil(timeout: .seconds(20)) { acknowledged.withLock { $0.count } > answered })
            try await Task.sleep(for: .milliseconds(Int.random(in: 10...60, using: &random)))
            await fixture.queue.kill()
            try await fixture.startQueue()
        }
        let answeredBeforeLastStart = acknowledged.withLock { $0.count }
        killsDone.set()
        try await buyers.value
        let total = acknowledged.withLock { $0.count }
        #expect(total >= clients * purchasesPerClient && total > answeredBeforeLastStart, "purchases are answered after the last restart too")

        // Then, once the authority has caught up, nothing is purchasing
        var all: [Storebus_PaymentQueue_V1_PaymentTransaction] = []
        #expect(
            await waitUntil(timeout: .seconds(20)) {
                all = []
                for buyer in 0..<clients {
                    all +=
                        (try? await client.call(
                            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
                            .with {
                                $0.appBundleID = puzzle
                                $0.accountID = "buyer\(buyer)"
                                $0.includeFinished = true
                                $0.pageSize = UInt32(mostPerClient)
                            }
                        ).transactions) ?? []
                }
                return all.count == total && all.allSatisfy { $0.transactionState == .purchased }
            }, "states: \(Dictionary(grouping: all, by: \.transactionState).mapValues(\.count))")
        // And each acknowledged purchase is in the ledger exactly once, with no charge for anything else
        var charged: [String] = []
        for buyer in 0..<clients {
            charged += try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                .with {
                    $0.appBundleID = puzzle
                    $0.accountID = "buyer\(buyer)"
                    $0.pageSize = UInt32(mostPerClient)
                }
            ).charges.map(\.transactionIdentifier)
        }
        #expect(charged.sorted() == acknowledged.withLock { Array($0.values) }.sorted())
        await client.shutdown()
        await fixture.stop()
    }

    @Test("an interrupted purchase fails, then a new purchased transaction appears once the issue is resolved")
    func interruptedPurchase() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let queue = queueRef()
        try await client.setPolicy(account: "alice", .with { $0.mode = .interrupt })
        let added = try await client.addPayment(queue, coins)
        #expect(
            await waitUntil {
                (try? await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.first?.transactionState) == .failed
            })
        let resolved = try await client.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.resolveInterruptedPurchase, .with { $0.transactionIdentifier = added.transactionIdentifier })
        #expect(resolved.transaction.transactionState == .purchased)
        #expect(resolved.transaction.transactionIdentifier != added.transactionIdentifier)
        let again = try await client.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.resolveInterruptedPurchase, .with { $0.transactionIdentifier = added.transactionIdentifier })
        #expect(again.transaction.transactionIdentifier == resolved.transaction.transactionIdentifier, "resolving twice adds nothing")
        let pending = try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions
        #expect(pending.map(\.transactionState) == [.failed, .purchased])
        #expect(
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "alice"
                }
            ).charges.count == 1)
        await client.shutdown()
        await fixture.stop()
    }

    @Test("reset empties the sandbox: queues hear removed events, policies go, identifiers keep counting up")
    func reset() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let queue = queueRef()
        let before = try await client.addPayment(queue, coins)
        try await client.setPolicy(
            account: "alice",
            .with {
                $0.mode = .fail; $0.failError = .paymentInvalid
            })
        _ = await waitUntil {
            (try? await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.first?.transactionState) == .purchased
        }
        let charges = {
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "alice"
                }
            ).charges
        }
        let chargedBefore = try #require(try await charges().first)
        _ = try await client.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.reset, .init())
        #expect(try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.isEmpty)
        #expect(
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.getPaymentPolicy,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "alice"
                }
            ).isDefault)
        #expect(
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "alice"
                }
            ).charges.isEmpty)
        let events = try await fixture.events(queue, client: client)
        let removed = events.last { !$0.removedTransactions.transactions.isEmpty }
        #expect(removed?.removedTransactions.transactions.map(\.transactionIdentifier) == [before.transactionIdentifier])
        // Followers that keep receipts hear that the history is gone, last
        #expect(events.last?.historyCleared.accountID == "alice")
        let after = try await client.addPayment(queue, coins)
        #expect(UInt64(after.transactionIdentifier)! > UInt64(before.transactionIdentifier)!)
        // The emptied ledger's charge ids count on too
        #expect(await waitUntil { (try? await charges().count) == 1 })
        let chargedAfter = try #require(try await charges().first)
        #expect(chargedAfter.transactionIdentifier == after.transactionIdentifier)
        #expect(UInt64(chargedAfter.chargeID)! > UInt64(chargedBefore.chargeID)!)
        await client.shutdown()
        await fixture.stop()
    }
}

/// Answers clients received, by idempotency key, shared by concurrent buyers.
final class Acknowledged: Sendable {
    private let state = Mutex<[String: String]>([:])
    func withLock<T>(_ body: (inout [String: String]) -> T) -> T { state.withLock { body(&$0) } }
}
