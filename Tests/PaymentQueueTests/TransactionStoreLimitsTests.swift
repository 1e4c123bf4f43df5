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

/// Clearing an account, restores and replay weights, and the stored record.
extension TransactionStoreTests {
    @Test("clearing an account announces its queue's unfinished transactions as removed, at most 64 per event")
    func clearIsChunked() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        for _ in 0..<130 { _ = try await fixture.purchase("coins") }
        #expect(try await fixture.store.clear(app: StoreFixture.queue.appBundleID, account: "alice") == 130)
        let removed = try await fixture.events().map(\.removedTransactions.transactions.count).filter { $0 > 0 }
        #expect(removed == [64, 64, 2])
    }

    @Test("clearing an account fails its payments still waiting: neither the authority nor an approval charges them later")
    func clearEndsWaitingPayments() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let waiting = try await fixture.purchase("coins")
        let asked = try await fixture.purchase("coins", askToBuy: true)
        #expect(try await fixture.store.decide(asked.transactionIdentifier)?.transactionState == .deferred)
        #expect(try await fixture.store.clear(app: StoreFixture.queue.appBundleID, account: "alice") == 2)
        for id in [waiting.transactionIdentifier, asked.transactionIdentifier] {
            let cleared = try await fixture.store.transaction(id)
            #expect(cleared?.transactionState == .failed && cleared?.error.code == .paymentCancelled && cleared?.finished == true)
        }
        #expect(try await fixture.store.decideDue().decided == 0)
        let approval = await #expect(throws: RPCError.self) { _ = try await fixture.store.answerAskToBuy(asked.transactionIdentifier, approve: true) }
        #expect(approval?.code == .failedPrecondition)
        #expect(try await fixture.store.charges(app: StoreFixture.queue.appBundleID, account: "alice").charges.isEmpty)
        let removed = try await fixture.events().flatMap(\.removedTransactions.transactions)
        #expect(removed.map(\.transactionState) == [.failed, .failed], "the removal shows how they ended")
    }

    @Test("a purchase made while the product was held is not charged, cannot be refunded, and loses the product with the paid one")
    func refundOfARebuy() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let paid = try await fixture.purchase("removeads", type: .nonConsumable)
        _ = try await fixture.store.decide(paid.transactionIdentifier)
        let again = try await fixture.purchase("removeads", type: .nonConsumable)
        #expect(try await fixture.store.decide(again.transactionIdentifier)?.transactionState == .purchased)
        #expect(try await fixture.store.charges(app: StoreFixture.queue.appBundleID, account: "alice").charges.map(\.transactionIdentifier) == [paid.transactionIdentifier])
        let refused = await #expect(throws: RPCError.self) { _ = try await fixture.store.refund(again.transactionIdentifier) }
        #expect(refused?.code == .failedPrecondition)
        let refund = try await fixture.store.refund(paid.transactionIdentifier)
        #expect(refund.revoked == ["removeads"])
        #expect(try await fixture.store.transaction(again.transactionIdentifier)?.hasCancellationDate == true, "the re-buy stood on the refunded purchase")
        let tablet = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = StoreFixture.queue.appBundleID; $0.accountID = "alice"; $0.deviceID = "tablet"
        }
        #expect(try await fixture.store.restore(queue: tablet, applicationUsername: nil).count == 0, "nothing left to restore")
    }

    @Test("refunding a purchase from a cleared history revokes nothing while a later paid purchase holds the product")
    func refundWhileStillHeld() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let first = try await fixture.purchase("removeads", type: .nonConsumable)
        _ = try await fixture.store.decide(first.transactionIdentifier)
        _ = try await fixture.store.clear(app: StoreFixture.queue.appBundleID, account: "alice")
        let second = try await fixture.purchase("removeads", type: .nonConsumable)
        _ = try await fixture.store.decide(second.transactionIdentifier)
        let refund = try await fixture.store.refund(first.transactionIdentifier)
        #expect(refund.revoked.isEmpty, "the second purchase still holds it")
        #expect(try await fixture.store.transaction(second.transactionIdentifier)?.hasCancellationDate == false)
        let revocations = try await fixture.events().filter { !$0.revokedEntitlements.productIdentifiers.isEmpty }
        #expect(revocations.count == 1, "only the clear's revocation: \(revocations.count)")
    }

    @Test("a restore weighs each transaction with the original it carries: refused, restoring nothing, when the copies would not fit the queue's replay")
    func restoredWeighTheirOriginals() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        // Names and product identifiers of control characters, which JSON writes in six bytes each:
        // their bytes are few, their JSON is not.
        let name = String(repeating: "\u{1}", count: QueueNames.maxBytes - 1)
        func queue(_ device: String) -> Storebus_PaymentQueue_V1_QueueRef {
            .with {
                $0.appBundleID = name + "a"; $0.accountID = name + "a"; $0.deviceID = name + device
            }
        }
        let tablet = queue("t"), phone = queue("p")
        func buy(_ index: Int) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
            let product = String(repeating: "\u{1}", count: PaymentQueueHandlers.maxProductIdentifierBytes - 5) + String(format: "%05d", index)
            let new = TransactionStore.NewTransaction(
                queue: tablet,
                payment: .with {
                    $0.productIdentifier = product; $0.quantity = 1
                },
                productType: .nonConsumable, storefront: "FRA", price: "0.99", currency: "EUR",
                start: .purchasing(policy: .with { $0.mode = .approve }, decideAt: Date()), idempotency: nil
            )
            let original = try await fixture.store.create(new).transaction
            let purchased = try await fixture.store.decide(original.transactionIdentifier)!
            _ = try await fixture.store.finish(original.transactionIdentifier, queue: tablet)
            return purchased
        }
        // Originals whose own JSON would take two thirds of a queue's replay: their restored copies,
        // each carrying its original as well as its own payment and queue, take more than all of it.
        let each = try await buy(0).jsonUTF8Data().count
        let count = TransactionStore.maxUnfinishedReplayBytes * 2 / 3 / each
        #expect(count < TransactionStore.defaultMaxUnfinished, "refused for their size, not their number")
        for index in 1..<count { _ = try await buy(index) }
        let refused = await #expect(throws: RPCError.self) {
            _ = try await fixture.store.restore(queue: phone, applicationUsername: nil)
        }
        #expect(refused?.code == .resourceExhausted && refused?.message.contains("launch replay") == true, "\(String(describing: refused))")
        #expect(try await fixture.store.unfinished(phone).transactions.isEmpty)
        #expect(try await fixture.events(phone).isEmpty, "nothing announced")
    }

    @Test("a purchase's replay weight counts the downloads it offers only once purchased")
    func weightCountsLaterDownloads() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        var new = TransactionStore.NewTransaction(
            queue: StoreFixture.queue,
            payment: .with {
                $0.productIdentifier = "levels"; $0.quantity = 1
            },
            productType: .nonConsumable, storefront: "FRA", price: "0.99", currency: "EUR",
            start: .purchasing(policy: .with { $0.mode = .approve }, decideAt: Date()), idempotency: nil
        )
        // Some 4 KB of hosted content: far more than the room a weight leaves to grow.
        new.downloads = (0..<40).map { index in
            .with {
                $0.contentIdentifier = "level-pack-\(index)-" + String(repeating: "x", count: 60); $0.contentVersion = "1.0"; $0.contentLength = 1 << 20
            }
        }
        for decideWhenDue in [false, true] {
            let created = try await fixture.store.create(new, decideWhenDue: decideWhenDue).transaction
            #expect(created.transactionState == .purchasing && created.downloads.isEmpty)
            var decided = try await fixture.store.decide(created.transactionIdentifier)
            if decided == nil { decided = try await fixture.store.transaction(created.transactionIdentifier) }
            let purchased = try #require(decided)
            #expect(purchased.transactionState == .purchased && purchased.downloads.count == 40)
            let weight = try await fixture.database.pool.read { db in
                try Int.fetchOne(db, sql: "SELECT replay_bytes FROM pq_transaction WHERE id = ?", arguments: [created.transactionIdentifier])!
            }
            #expect(weight >= (try purchased.jsonUTF8Data().count), "decided at once: \(decideWhenDue)")
        }
    }

    @Test("the transaction record reads and writes every column of pq_transaction, each in its own place")
    func recordCoversTheTable() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let original = try await fixture.purchase("gems")
        let (table, written, read) = try await fixture.database.pool.write { db in
            let table = try Row.fetchAll(db, sql: "PRAGMA table_info(pq_transaction)").map { $0["name"] as String }
            // Every field set, and no two alike: a value read from another column's place shows.
            var record = TransactionRecord(
                id: "9000000000000000001", shard: 0,
                queue: .with {
                    $0.appBundleID = "app"; $0.accountID = "account"; $0.deviceID = "device"
                },
                state: .restored,
                payment: .with {
                    $0.productIdentifier = "product"; $0.quantity = 3; $0.applicationUsername = "user"; $0.requestData = Data([1, 2]); $0.simulatesAskToBuyInSandbox = true
                },
                productType: .autoRenewableSubscription, storefront: "storefront", price: "1.99", currency: "currency",
                error: .make(.paymentInvalid, "message"),
                policy: .with {
                    $0.mode = .interrupt; $0.failError = .storeProductNotAvailable
                },
                decideAtMS: 11, nowMS: 12, downloads: "[{\"contentIdentifier\":\"c\"}]"
            )
            record.originalID = original.transactionIdentifier
            record.interrupted = true
            record.resolvedBy = "resolver"
            record.dateMS = 13
            record.finished = true
            record.revokedMS = 14
            record.cleared = true
            record.replayBytes = 15
            try record.insert(db)
            return (table, record, try TransactionRecord.fetch(db, id: record.id))
        }
        let listed = TransactionRecord.columns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        #expect(listed == table, "the record's columns are the table's, in its order")
        #expect(read == written)
    }

    @Test("transactions waiting when the database is upgraded get their replay weight; finished ones need none")
    func replayWeightMigration() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let waiting = try await fixture.purchase("coins")
        let done = try await fixture.purchase("gems")
        _ = try await fixture.store.decide(done.transactionIdentifier)
        _ = try await fixture.store.finish(done.transactionIdentifier, queue: StoreFixture.queue)
        // The database as the previous version left it: no weights.
        try await fixture.database.pool.write { db in
            try db.execute(sql: "ALTER TABLE pq_transaction DROP COLUMN replay_bytes")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'payment_queue_v6_replay_bytes'")
        }
        try fixture.database.close()
        let reopened = try StoreDatabase(directory: fixture.directory.url, name: "payment-queue", migrator: PaymentQueueSchema.migrator)
        defer { try? reopened.close() }
        let weights = try await reopened.pool.read { db in
            try Dictionary(uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT id, replay_bytes FROM pq_transaction").map { ($0[0] as String, $0[1] as Int) })
        }
        let current = try await reopened.pool.read { db in try TransactionStore.transaction(db, id: waiting.transactionIdentifier)! }
        #expect(weights[waiting.transactionIdentifier] == (try TransactionStore.replayWeight(current)))
        #expect(weights[done.transactionIdentifier] == 0)
    }

    @Test("a large restore is announced in updatedTransactions events of at most 64 transactions, then the finish event")
    func largeRestoreIsChunked() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let tablet = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = StoreFixture.queue.appBundleID; $0.accountID = "alice"; $0.deviceID = "tablet"
        }
        for index in 0..<130 {
            let purchase = try await fixture.purchase("level.\(index)", type: .nonConsumable, queue: tablet)
            _ = try await fixture.store.decide(purchase.transactionIdentifier)
            _ = try await fixture.store.finish(purchase.transactionIdentifier, queue: tablet)
        }
        #expect(try await fixture.store.restore(queue: StoreFixture.queue, applicationUsername: nil).count == 130)
        let events = try await fixture.events()
        #expect(events.map { $0.updatedTransactions.transactions.count } == [64, 64, 2, 0])
        #expect(events.last?.restoreCompletedTransactionsFinished.restoredCount == 130)
        let restored = events.flatMap { $0.updatedTransactions.transactions.map(\.payment.productIdentifier) }
        #expect(restored == (0..<130).map { "level.\($0)" }, "every purchase once, oldest first")
    }

    @Test("queue names must be NFC, 1 to 255 bytes, without |, a line break or NUL; a refusal names the field")
    func queueNames() throws {
        func queue(account: String, device: String = "phone") -> Storebus_PaymentQueue_V1_QueueRef {
            .with {
                $0.appBundleID = "com.example.app"; $0.accountID = account; $0.deviceID = device
            }
        }
        try queue(account: "caf\u{e9}").validate()
        try queue(account: String(repeating: "a", count: 255)).validate()
        // Swift's == takes the first two for "Kate" and "café" (SQLite does not): refused.
        for (account, device, field) in [
            ("\u{212A}ate", "phone", "queue.accountId"), ("cafe\u{301}", "phone", "queue.accountId"),
            ("kate", "pa|\u{301}d", "queue.deviceId"), ("", "phone", "queue.accountId"),
            (String(repeating: "a", count: 256), "phone", "queue.accountId"), ("kate", "line\r\nbreak", "queue.deviceId"),
            // SQLite, handed a C string, would take it for "kate".
            ("kate\u{0}x", "phone", "queue.accountId")
        ] {
            let refused = #expect(throws: RPCError.self, "\(account)/\(device)") { try queue(account: account, device: device).validate() }
            #expect(refused?.code == .invalidArgument)
            #expect(refused?.details.fieldViolations.first?.field == field)
        }
    }
}
