import Foundation
import GRDB
import Logging
import StoreBus
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing

@testable import PaymentQueue

/// Finishing, idempotency keys, the AddPayment answer written directly, reopening, and policies per account.
extension TransactionStoreTests {
    @Test("finishTransaction: not while PURCHASING or DEFERRED; twice is OK; the transaction leaves the queue with a removed event")
    func finishing() async throws {
        let fixture = try StoreFixture()
        let transaction = try await fixture.purchase("coins")
        let id = transaction.transactionIdentifier
        let early = await #expect(throws: RPCError.self) { _ = try await fixture.store.finish(id, queue: StoreFixture.queue) }
        #expect(early?.code == .failedPrecondition)
        try await fixture.store.decide(id)
        #expect(try await fixture.store.unfinished(StoreFixture.queue).transactions.map(\.transactionIdentifier) == [id])
        #expect(try await fixture.store.finish(id, queue: StoreFixture.queue) == false)
        #expect(try await fixture.store.finish(id, queue: StoreFixture.queue) == true, "finishing twice is OK")
        let (unfinished, keySeq) = try await fixture.store.unfinished(StoreFixture.queue)
        #expect(unfinished.isEmpty)
        #expect(keySeq == 3)
        let last = try #require(try await fixture.events().last)
        #expect(last.removedTransactions.transactions.map(\.transactionIdentifier) == [id])

        var otherAccount = StoreFixture.queue
        otherAccount.accountID = "mallory"
        let denied = await #expect(throws: RPCError.self) { _ = try await fixture.store.finish(id, queue: otherAccount) }
        #expect(denied?.code == .permissionDenied)
        var otherDevice = StoreFixture.queue
        otherDevice.deviceID = "tablet"
        let notHere = await #expect(throws: RPCError.self) { _ = try await fixture.store.finish(id, queue: otherDevice) }
        #expect(notHere?.code == .notFound)
        fixture.remove()
    }

    @Test("an idempotency key returns the transaction it created for the same payment, and refuses a different one")
    func idempotency() async throws {
        let fixture = try StoreFixture()
        let first = try await fixture.purchase("coins", key: "k1")
        let again = try await fixture.purchase("coins", key: "k1")
        #expect(again.transactionIdentifier == first.transactionIdentifier)
        let found = try await fixture.store.transaction(forKey: "k1", app: StoreFixture.queue.appBundleID, account: "alice", digest: "digest-coins")
        #expect(found?.transactionIdentifier == first.transactionIdentifier)
        let reused = await #expect(throws: RPCError.self) { _ = try await fixture.purchase("pack", key: "k1") }
        #expect(reused?.code == .failedPrecondition)
        fixture.remove()
    }

    @Test("a new transaction's AddPayment answer, written directly, is swift-protobuf's bytes for it; a retry returns the same transaction")
    func createdTransactionAnswer() async throws {
        let fixture = try StoreFixture()
        for (index, name) in ["coins", "pack ünï \"quoted\"", "gems\u{01}"].enumerated() {
            let new = TransactionStore.NewTransaction(
                queue: StoreFixture.queue,
                payment: .with {
                    $0.productIdentifier = name; $0.quantity = 1; $0.applicationUsername = "user \(index)"
                },
                productType: .consumable, storefront: "FRA", price: "0.99", currency: "EUR",
                start: .purchasing(policy: .with { $0.mode = .approve }, decideAt: Date()), idempotency: ("key \(index)", "digest \(index)")
            )
            let created = try await fixture.store.create(new, decideWhenDue: true)
            #expect(created.transaction.transactionState == .purchasing)
            let answer = try TransactionJSON.addPaymentResponse(created.transaction)
            #expect(answer == (try Storebus_PaymentQueue_V1_AddPaymentResponse.with { $0.transaction = created.transaction }.jsonUTF8Bytes() as [UInt8]))
            let retry = try await fixture.store.create(new, decideWhenDue: true)
            #expect(retry.transaction.transactionIdentifier == created.transaction.transactionIdentifier)
        }
        fixture.remove()
    }

    @Test("identifiers and data survive a reopen of the database")
    func durable() async throws {
        let fixture = try StoreFixture()
        let first = try await fixture.purchase("coins")
        try fixture.database.close()
        let reopened = try StoreDatabase(directory: fixture.directory.url, name: "payment-queue", migrator: PaymentQueueSchema.migrator)
        let store = TransactionStore(writer: EventLogWriter(logName: TransactionStore.logName, database: reopened, publisher: nil))
        #expect(try await store.due() == [first.transactionIdentifier], "still PURCHASING: decided after a restart")
        // Identifiers count on from the last given: the first of a new database is one past the
        // base, the next (after the reopen) one more.
        let second = try await store.create(
            TransactionStore.NewTransaction(
                queue: StoreFixture.queue,
                payment: .with {
                    $0.productIdentifier = "coins"; $0.quantity = 1
                },
                productType: .consumable, storefront: "FRA", price: "0.99", currency: "EUR",
                start: .purchasing(policy: .with { $0.mode = .approve }, decideAt: Date()), idempotency: nil
            )
        ).transaction
        #expect(Int64(first.transactionIdentifier) == TransactionStore.identifierBase + 1)
        #expect(Int64(second.transactionIdentifier) == TransactionStore.identifierBase + 2)
        try await store.setPolicy(
            .with {
                $0.mode = .fail; $0.failError = .paymentNotAllowed; $0.purchasesRestricted = true
            }, app: "a", account: "")
        let policy = try await store.policy(app: "a", account: "bob")
        #expect(policy.isDefault && policy.policy.purchasesRestricted && policy.policy.failError == .paymentNotAllowed)
        fixture.remove()
    }

    @Test("an account's own policy comes before the app's default, whichever was set first; other accounts get the default")
    func accountPolicyBeforeDefault() async throws {
        let fixture = try StoreFixture()
        let store = fixture.store
        try await store.setPolicy(.with { $0.mode = .askToBuy }, app: "a", account: "alice")
        try await store.setPolicy(
            .with {
                $0.mode = .fail; $0.failError = .paymentInvalid
            }, app: "a", account: "")
        let own = try await store.policy(app: "a", account: "alice")
        #expect(!own.isDefault && own.policy.mode == .askToBuy)
        let other = try await store.policy(app: "a", account: "bob")
        #expect(other.isDefault && other.policy.mode == .fail && other.policy.failError == .paymentInvalid)
        let elsewhere = try await store.policy(app: "b", account: "alice")
        #expect(elsewhere.isDefault && elsewhere.policy.mode == .approve)
        fixture.remove()
    }
}
