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

/// A store on a fresh SQLite file in a temporary directory (no doorbell: followers would poll).
struct StoreFixture {
    let directory: TemporaryDirectory
    let database: StoreDatabase
    let store: TransactionStore

    init(maxUnfinished: Int = TransactionStore.defaultMaxUnfinished) throws {
        directory = try TemporaryDirectory(prefix: "pq")
        database = try StoreDatabase(directory: directory.url, name: "payment-queue", migrator: PaymentQueueSchema.migrator)
        store = TransactionStore(writer: EventLogWriter(logName: TransactionStore.logName, database: database, publisher: nil), maxUnfinished: maxUnfinished)
    }

    static let queue = Storebus_PaymentQueue_V1_QueueRef.with {
        $0.appBundleID = "com.storebus.demo.puzzle"
        $0.accountID = "alice"
        $0.deviceID = "phone"
    }

    func purchase(
        _ product: String, type: Storebus_Catalog_V1_ProductType = .consumable, queue: Storebus_PaymentQueue_V1_QueueRef = StoreFixture.queue,
        policy: Storebus_PaymentQueue_V1_PaymentPolicy = .with { $0.mode = .approve }, askToBuy: Bool = false, key: String? = nil
    ) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        var new = TransactionStore.NewTransaction(
            queue: queue,
            payment: .with {
                $0.productIdentifier = product; $0.quantity = 1; $0.simulatesAskToBuyInSandbox = askToBuy
            },
            productType: type, storefront: "FRA", price: "0.99", currency: "EUR",
            start: .purchasing(policy: policy, decideAt: Date()), idempotency: key.map { ($0, "digest-\(product)") }
        )
        // As the catalog describes subscriptions: a period, and a group for auto-renewable ones.
        if type == .autoRenewableSubscription { new.subscription = ("P1M", "group") }
        if type == .nonRenewingSubscription { new.subscription = ("P1M", "") }
        return try await store.create(new).transaction
    }

    /// The queue's events, decoded.
    func events(_ queue: Storebus_PaymentQueue_V1_QueueRef = StoreFixture.queue) async throws -> [Storebus_PaymentQueue_V1_QueueEvent] {
        try await database.pool.read { db in
            try EventLog.read(db, key: queue.key, after: 0, limit: 1000).map { stored in
                let event = try Storebus_Eventlog_V1_Event(jsonString: stored.json)
                return try Storebus_PaymentQueue_V1_QueueEvent(jsonString: try event.payload.jsonString())
            }
        }
    }

    func remove() { directory.remove() }
}

@Suite("Payment queue storage and state machine")
struct TransactionStoreTests {

    @Test("transaction dates are whole milliseconds, as stored (no 34.089999914 s for 34.090 s)")
    func exactDates() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        for _ in 0..<20 {
            let created = try await fixture.purchase("coins")
            #expect(created.transactionDate.nanos % 1_000_000 == 0, "\(created.transactionDate)")
            let stored = try await fixture.database.pool.read { db in
                try Int64.fetchOne(db, sql: "SELECT date_ms FROM pq_transaction WHERE id = ?", arguments: [created.transactionIdentifier])!
            }
            #expect(Int64(created.transactionDate.seconds) * 1000 + Int64(created.transactionDate.nanos / 1_000_000) == stored)
        }
        let early = TransactionStore.timestamp(milliseconds: -1)
        #expect(early.seconds == -1 && early.nanos == 999_000_000, "before 1970, nanos stay positive")
    }

    @Test("the unfinished and due queries (decisions, renewals, retries: a shard's) use the small partial indexes (a bound state or finished flag would not)")
    func queriesUsePartialIndexes() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let plans = try await fixture.database.pool.read { db -> [String] in
            try [
                "SELECT COUNT(*) FROM pq_transaction WHERE queue_key = 'q' AND finished = 0",
                "SELECT id FROM pq_transaction WHERE queue_key = 'q' AND finished = 0 ORDER BY created_ms, id",
                TransactionStore.dueSQL.sql.replacingOccurrences(of: "?", with: "0"),
                TransactionStore.nextDueSQL.sql.replacingOccurrences(of: "?", with: "0"),
                TransactionStore.renewalsDueSQL.sql.replacingOccurrences(of: "?", with: "0"),
                TransactionStore.retriesDueSQL.sql.replacingOccurrences(of: "?", with: "0")
            ].map { sql in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { $0["detail"] as String }.joined(separator: "; ")
            }
        }
        #expect(plans[0].contains("pq_transaction_unfinished"), "\(plans[0])")
        #expect(plans[1].contains("pq_transaction_unfinished"), "\(plans[1])")
        #expect(plans[2].contains("pq_transaction_due"), "\(plans[2])")
        #expect(plans[3].contains("pq_transaction_due"), "\(plans[3])")
        #expect(plans[4].contains("pq_subscription_due"), "\(plans[4])")
        #expect(plans[5].contains("pq_subscription_retry"), "\(plans[5])")
    }

    @Test("a queue holds a bounded number of unfinished transactions: AddPayment and restore beyond it are RESOURCE_EXHAUSTED")
    func unfinishedTransactionsAreBounded() async throws {
        let fixture = try StoreFixture(maxUnfinished: 3)
        defer { fixture.remove() }
        // Given a purchased and finished non-consumable on another device of the account
        let tablet = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = StoreFixture.queue.appBundleID; $0.accountID = "alice"; $0.deviceID = "tablet"
        }
        let original = try await fixture.purchase("removeads", type: .nonConsumable, queue: tablet)
        _ = try await fixture.store.decide(original.transactionIdentifier)
        _ = try await fixture.store.finish(original.transactionIdentifier, queue: tablet)
        // And a queue holding three unfinished payments, the most it may
        for index in 0..<3 { _ = try await fixture.purchase("coins", key: "k\(index)") }
        // When a fourth payment is added, it is refused with the reason
        let refused = await #expect(throws: RPCError.self) { _ = try await fixture.purchase("coins") }
        #expect(refused?.code == .resourceExhausted)
        #expect(refused?.message.contains("finish some") == true, "\(String(describing: refused))")
        // But a retry of a payment already made still gets its transaction
        #expect(try await fixture.purchase("coins", key: "k2").transactionState == .purchasing)
        // And restoring into the full queue is refused too, restoring nothing
        let restore = await #expect(throws: RPCError.self) {
            _ = try await fixture.store.restore(queue: StoreFixture.queue, applicationUsername: nil)
        }
        #expect(restore?.code == .resourceExhausted)
        #expect(try await fixture.store.unfinished(StoreFixture.queue).transactions.count == 3)
        // While another device of the account is unaffected
        #expect(try await fixture.store.restore(queue: tablet, applicationUsername: nil).count == 1)
    }

    @Test("the authority's wait ends at its timeout, even when the timeout comes before the wait is in place")
    func authorityWaitEnds() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let authority = PaymentAuthority(store: fixture.store, logger: Logger(label: "test"))
        let done = Atomic<Int>(0)
        let ended = Atomic<Int>(0)
        let waits = Task {
            // A zero timeout often ends the wait before its waiting task has run.
            for _ in 0..<3000 {
                await authority.waitForPoke(timeout: .zero)
                ended.wrappingAdd(1, ordering: .relaxed)
            }
            done.store(1, ordering: .releasing)
        }
        // A wait that outlives its timeout never ends without a poke: no wait ends for 20 s while
        // this loop looks 500 times. A busy machine only slows the waits down (3,000 of them once
        // took over 20 s in all), and other tests' synchronous work can hold both of the pool's
        // threads for seconds, and this loop then does not run either (a CI run once reported 0 of
        // 3,000 ended after 20 s, where the same test passes in 50 ms alone and under stress-ng).
        // Looks counted, a wait is called hung only once the pool has run this loop, and with it
        // the wait's timer queued before, again and again.
        var last = -1
        var since = ContinuousClock.now
        var looks = 0
        while done.load(ordering: .acquiring) == 0 && (ContinuousClock.now - since < .seconds(20) || looks < 500) {
            try await Task.sleep(for: .milliseconds(10))
            looks += 1
            let now = ended.load(ordering: .relaxed)
            if now != last { (last, since, looks) = (now, ContinuousClock.now, 0) }
        }
        #expect(done.load(ordering: .acquiring) == 1, "a wait outlived its timeout: only a poke ended it (\(last) of 3,000 ended)")
        // Unstick a hung wait, so that the test ends either way.
        while done.load(ordering: .acquiring) == 0 {
            authority.poke()
            try await Task.sleep(for: .milliseconds(1))
        }
        await waits.value
        // A poke that comes while nobody waits ends the next wait at once.
        authority.poke()
        let started = ContinuousClock.now
        await authority.waitForPoke(timeout: .seconds(10))
        #expect(started.duration(to: .now) < .seconds(5))
    }

    @Test("cancelling the task that runs the authority ends it, though nothing is due for an hour")
    func authorityEndsWhenCancelled() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let authority = PaymentAuthority(store: fixture.store, logger: Logger(label: "test"))
        let ended = Flag()
        let running = Task {
            try await authority.run()
            ended.set()
        }
        // Given the authority waiting (nothing is due), when its task is cancelled, then it ends
        try await Task.sleep(for: .milliseconds(200))
        running.cancel()
        let deadline = ContinuousClock.now + .seconds(10)
        while !ended.isSet && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(ended.isSet, "the authority still waits after its task was cancelled")
        // Unstick a hung run, so that the test ends either way.
        while !ended.isSet {
            authority.poke()
            try await Task.sleep(for: .milliseconds(1))
        }
        // And a wait in a task cancelled before it starts returns at once, not at its timeout (the
        // bound is loose: the whole suite runs meanwhile, and merely starting the task took 2.3 s
        // once under that load)
        let started = ContinuousClock.now
        let cancelledFirst = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await authority.waitForPoke(timeout: .seconds(60))
        }
        await cancelledFirst.value
        #expect(started.duration(to: .now) < .seconds(20))
    }

    @Test("resolving an interrupted purchase into a full queue is RESOURCE_EXHAUSTED until the app finishes one")
    func resolvingIsBounded() async throws {
        let fixture = try StoreFixture(maxUnfinished: 2)
        defer { fixture.remove() }
        let interrupted = try await fixture.purchase("coins", policy: .with { $0.mode = .interrupt })
        #expect(try await fixture.store.decide(interrupted.transactionIdentifier)?.transactionState == .failed)
        let other = try await fixture.purchase("coins")
        let refused = await #expect(throws: RPCError.self) { _ = try await fixture.store.resolveInterrupted(interrupted.transactionIdentifier) }
        #expect(refused?.code == .resourceExhausted)
        #expect(try await fixture.store.unfinished(StoreFixture.queue).transactions.count == 2, "nothing was added")
        _ = try await fixture.store.decide(other.transactionIdentifier)
        _ = try await fixture.store.finish(other.transactionIdentifier, queue: StoreFixture.queue)
        let resolved = try await fixture.store.resolveInterrupted(interrupted.transactionIdentifier)
        #expect(resolved.transactionState == .purchased)
        #expect(try await fixture.store.resolveInterrupted(interrupted.transactionIdentifier) == resolved, "resolving again returns it, full queue or not")
    }

    @Test("clearing an account fails its waiting payments where their observers hear it (updatedTransactions failed), before they leave the queue")
    func clearFailsWaitingPaymentsAudibly() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        // Given a payment deferred for Ask to Buy and one still PURCHASING (its policy answers later)
        let deferred = try await fixture.purchase("coins", askToBuy: true)
        #expect(try await fixture.store.decide(deferred.transactionIdentifier)?.transactionState == .deferred)
        let waiting = try await fixture.purchase(
            "gems",
            policy: .with {
                $0.mode = .approve; $0.delayMs = 600_000
            })
        // When the account's history is cleared
        _ = try await fixture.store.clear(app: StoreFixture.queue.appBundleID, account: "alice")
        // Then each is heard FAILED (paymentCancelled), then removed
        let timeline = try await fixture.events().flatMap { event -> [(String, String)] in
            switch event.event {
            case .updatedTransactions(let updated): updated.transactions.map { ($0.transactionIdentifier, "\($0.transactionState)") }
            case .removedTransactions(let removed): removed.transactions.map { ($0.transactionIdentifier, "removed") }
            default: []
            }
        }
        for id in [deferred.transactionIdentifier, waiting.transactionIdentifier] {
            let states = timeline.filter { $0.0 == id }.map(\.1)
            #expect(states.suffix(2) == ["failed", "removed"], "\(id): \(states)")
        }
        #expect(try await fixture.store.transaction(waiting.transactionIdentifier)?.error.code == .paymentCancelled)
    }

    @Test("an interrupted purchase cleared with the account's history can no longer be resolved (nothing cleared is charged later)")
    func clearedInterruptedPurchaseStaysUncharged() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let interrupted = try await fixture.purchase("coins", policy: .with { $0.mode = .interrupt })
        #expect(try await fixture.store.decide(interrupted.transactionIdentifier)?.transactionState == .failed)
        _ = try await fixture.store.clear(app: StoreFixture.queue.appBundleID, account: "alice")
        let refused = await #expect(throws: RPCError.self) { _ = try await fixture.store.resolveInterrupted(interrupted.transactionIdentifier) }
        #expect(refused?.code == .failedPrecondition)
        let charges = try await fixture.store.charges(app: StoreFixture.queue.appBundleID, account: "alice").charges
        #expect(charges.isEmpty, "\(charges)")
    }

    @Test("Ask to Buy answers: repeating the answer given is OK; answering a purchase that never waited for one is FAILED_PRECONDITION")
    func askToBuyAnswersOnlyForDeferred() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let asked = try await fixture.purchase("coins", askToBuy: true)
        _ = try await fixture.store.decide(asked.transactionIdentifier)
        #expect(try await fixture.store.answerAskToBuy(asked.transactionIdentifier, approve: true).transactionState == .purchased)
        #expect(try await fixture.store.answerAskToBuy(asked.transactionIdentifier, approve: true).transactionState == .purchased, "approved already")
        let declined = try await fixture.purchase("coins", policy: .with { $0.mode = .askToBuy })
        _ = try await fixture.store.decide(declined.transactionIdentifier)
        #expect(try await fixture.store.answerAskToBuy(declined.transactionIdentifier, approve: false).transactionState == .failed)
        #expect(try await fixture.store.answerAskToBuy(declined.transactionIdentifier, approve: false).transactionState == .failed, "declined already")
        // An ordinary purchase, and a payment the sandbox failed, were never deferred
        let bought = try await fixture.purchase("coins")
        _ = try await fixture.store.decide(bought.transactionIdentifier)
        let failed = try await fixture.purchase(
            "coins",
            policy: .with {
                $0.mode = .fail; $0.failError = .paymentInvalid
            })
        _ = try await fixture.store.decide(failed.transactionIdentifier)
        for (id, approve) in [(bought.transactionIdentifier, true), (failed.transactionIdentifier, false)] {
            let refused = await #expect(throws: RPCError.self) { _ = try await fixture.store.answerAskToBuy(id, approve: approve) }
            #expect(refused?.code == .failedPrecondition, "\(id)")
        }
    }

    @Test("an account's transactions and charges list in pages that follow each other, oldest first, and a token the listing did not give is INVALID_ARGUMENT")
    func listingsInPages() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        // Given five purchases of alice on two devices, decided (charged), and one of bob
        var bought: [String] = []
        for (index, device) in ["phone", "tablet", "phone", "tablet", "phone"].enumerated() {
            let queue = Storebus_PaymentQueue_V1_QueueRef.with {
                $0.appBundleID = StoreFixture.queue.appBundleID; $0.accountID = "alice"; $0.deviceID = device
            }
            bought.append(try await fixture.purchase("coins\(index)", queue: queue).transactionIdentifier)
            try await fixture.store.decide(bought.last!)
        }
        let bob = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = StoreFixture.queue.appBundleID; $0.accountID = "bob"; $0.deviceID = "phone"
        }
        try await fixture.store.decide(try await fixture.purchase("coins", queue: bob).transactionIdentifier)
        let app = StoreFixture.queue.appBundleID
        // When they are listed two at a time
        var pages: [[String]] = [], token = ""
        repeat {
            let page = try await fixture.store.accountTransactions(app: app, account: "alice", includeFinished: true, pageToken: token, limit: 2)
            pages.append(page.transactions.map(\.transactionIdentifier))
            token = page.nextPageToken
        } while !token.isEmpty && pages.count < 10
        var chargePages: [[String]] = []
        repeat {
            let page = try await fixture.store.charges(app: app, account: "alice", pageToken: token, limit: 2)
            chargePages.append(page.charges.map(\.transactionIdentifier))
            token = page.nextPageToken
        } while !token.isEmpty && chargePages.count < 10
        // Then the pages hold two, two and one, in purchase order, and nothing of bob's
        #expect(pages == [Array(bought[0..<2]), Array(bought[2..<4]), [bought[4]]])
        #expect(chargePages == pages)
        #expect(try await fixture.store.accountTransactions(app: app, account: "alice", includeFinished: true, limit: 5).nextPageToken.isEmpty, "a page that holds the rest is the last")
        let smallest = try await fixture.store.accountTransactions(app: app, account: "alice", includeFinished: true, limit: 0)
        #expect(smallest.transactions.count == 1 && !smallest.nextPageToken.isEmpty, "a page holds one at least")
        // And tokens that the listing did not give are refused
        let chargesToken = try await fixture.store.charges(app: app, account: "alice", limit: 1).nextPageToken
        let transactionsToken = try await fixture.store.accountTransactions(app: app, account: "alice", includeFinished: true, limit: 1).nextPageToken
        for (token, listing) in [
            ("not a token", "transactions"), (chargesToken, "transactions"), (transactionsToken, "charges"), (Data("transactions\nsoon".utf8).base64EncodedString(), "transactions"),
            (Data("charges\n1\n2".utf8).base64EncodedString(), "charges")
        ] {
            let refused = await #expect(throws: RPCError.self, "\(listing) \(token)") {
                if listing == "charges" {
                    _ = try await fixture.store.charges(app: app, account: "alice", pageToken: token)
                } else {
                    _ = try await fixture.store.accountTransactions(app: app, account: "alice", includeFinished: true, pageToken: token)
                }
            }
            #expect(refused?.code == .invalidArgument)
            #expect(refused?.details.fieldViolations.first?.field == "pageToken")
        }
    }

    @Test("a page of transactions holds at most 1 MiB of their JSON, measured: restored ones carry their original, and escaped strings grow sixfold")
    func transactionPagesAreBoundedInBytes() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        // Given alice's transactions with 4 KiB of request data and an applicationUsername of 1 KiB
        // of control characters (6 KiB as JSON) each: 150 failed ones across fifteen devices, and 30
        // purchased non-consumables restored on a tablet
        let username = String(repeating: "\u{1}", count: 1024)
        func new(_ product: String, device: String, _ start: TransactionStore.NewTransaction.Start, type: Storebus_Catalog_V1_ProductType = .consumable) -> TransactionStore.NewTransaction {
            let queue = Storebus_PaymentQueue_V1_QueueRef.with {
                $0.appBundleID = StoreFixture.queue.appBundleID; $0.accountID = "alice"; $0.deviceID = device
            }
            return TransactionStore.NewTransaction(
                queue: queue,
                payment: .with {
                    $0.productIdentifier = product; $0.quantity = 1; $0.applicationUsername = username; $0.requestData = Data(count: 4096)
                },
                productType: type, storefront: "FRA", price: "0.99", currency: "EUR", start: start, idempotency: nil
            )
        }
        for index in 0..<150 {
            _ = try await fixture.store.create(new("coins", device: "device\(index % 15)", .failed(.make(.unauthorizedRequestData))))
        }
        for index in 0..<30 {
            let bought = try await fixture.store.create(new("level\(index)", device: "phone", .purchasing(policy: .with { $0.mode = .approve }, decideAt: Date()), type: .nonConsumable))
            try await fixture.store.decide(bought.transaction.transactionIdentifier)
        }
        #expect(
            try await fixture.store.restore(
                queue: .with {
                    $0.appBundleID = StoreFixture.queue.appBundleID; $0.accountID = "alice"; $0.deviceID = "tablet"
                }, applicationUsername: nil
            ).count == 30)
        // When they are listed a thousand at a time
        var sizes: [Int] = [], ids: [String] = [], restored = 0, token = ""
        repeat {
            let page = try await fixture.store.accountTransactions(app: StoreFixture.queue.appBundleID, account: "alice", includeFinished: true, pageToken: token, limit: 1000)
            sizes.append(
                try Storebus_PaymentQueue_V1_ListAccountTransactionsResponse.with {
                    $0.transactions = page.transactions; $0.nextPageToken = page.nextPageToken
                }.jsonUTF8Data().count)
            ids += page.transactions.map(\.transactionIdentifier)
            restored += page.transactions.filter { $0.transactionState == .restored }.count
            token = page.nextPageToken
        } while !token.isEmpty && sizes.count < 20
        // Then no answer passes 1 MiB (and a little for its frame), and together they hold every transaction once, in order
        #expect(sizes.count > 2 && sizes.allSatisfy { $0 <= Paging.maxPageBytes + 256 }, "\(sizes)")
        #expect(ids.count == 210 && ids == ids.sorted() && Set(ids).count == 210 && restored == 30)
    }

    @Test("a queue's unfinished transactions are bounded by the size of its launch replay, whatever their fields hold: the replay stays under the message limit")
    func unfinishedReplayIsBounded() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        // Every name, product identifier and applicationUsername as long as it may be and made of
        // control characters (six bytes each in JSON), with 4 KiB of requestData.
        let control = "\u{1}"
        let name = String(repeating: control, count: QueueNames.maxBytes)
        let queue = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = name; $0.accountID = name; $0.deviceID = name
        }
        try queue.validate()
        func add(_ index: Int) async throws {
            let new = TransactionStore.NewTransaction(
                queue: queue,
                payment: .with {
                    $0.productIdentifier = String(repeating: control, count: PaymentQueueHandlers.maxProductIdentifierBytes - 5) + String(format: "%05d", index)
                    $0.quantity = 1
                    $0.applicationUsername = String(repeating: control, count: PaymentQueueHandlers.maxApplicationUsernameBytes)
                    $0.requestData = Data(count: PaymentQueueHandlers.maxRequestDataBytes)
                },
                productType: .consumable, storefront: "FRA", price: "0.99", currency: "EUR",
                start: .failed(.make(.storeProductNotAvailable)), idempotency: nil
            )
            _ = try await fixture.store.create(new)
        }
        var added = 0
        var refused: RPCError?
        while added < TransactionStore.defaultMaxUnfinished {
            do { try await add(added) } catch let error as RPCError { refused = error; break }
            added += 1
        }
        #expect(refused?.code == .resourceExhausted && refused?.message.contains("launch replay") == true, "\(String(describing: refused))")
        #expect(added > 100, "\(added) transactions")
        let unfinished = try await fixture.store.unfinished(queue)
        #expect(unfinished.transactions.count == added, "the refused payment left nothing behind")
        let replay = try Storebus_PaymentQueue_V1_ListTransactionsResponse.with {
            $0.transactions = unfinished.transactions
            $0.keySeq = unfinished.keySeq
            $0.queueKey = queue.key
        }.jsonUTF8Data().count
        #expect(replay <= TransactionStore.maxUnfinishedReplayBytes && Int64(replay) < WireProtocol.defaultMaxMessageBytes, "\(replay) bytes")
    }

    @Test("a payment is added PURCHASING, then approved to PURCHASED and charged, each change an event of its queue")
    func approvedPurchase() async throws {
        let fixture = try StoreFixture()
        let added = try await fixture.purchase("coins")
        #expect(added.transactionState == .purchasing)
        #expect(Int64(added.transactionIdentifier)! > TransactionStore.identifierBase)
        #expect(try await fixture.store.due() == [added.transactionIdentifier])
        let decided = try #require(try await fixture.store.decide(added.transactionIdentifier))
        #expect(decided.transactionState == .purchased)
        #expect(try await fixture.store.decide(added.transactionIdentifier) == nil, "decided once")
        let charges = try await fixture.store.charges(app: StoreFixture.queue.appBundleID, account: "alice").charges
        #expect(charges.map(\.transactionIdentifier) == [added.transactionIdentifier])
        #expect(charges.first?.amount == "0.99" && charges.first?.currencyCode == "EUR")
        let states = try await fixture.events().map { $0.updatedTransactions.transactions.first?.transactionState }
        #expect(states == [.purchasing, .purchased])
        fixture.remove()
    }

    @Test("a consumable can be bought again and again; a held non-consumable or subscription is purchased again without a second charge")
    func chargingRules() async throws {
        let fixture = try StoreFixture()
        for _ in 0..<3 {
            try await fixture.store.decide(try await fixture.purchase("coins").transactionIdentifier)
            try await fixture.store.decide(try await fixture.purchase("pack", type: .nonConsumable).transactionIdentifier)
            try await fixture.store.decide(try await fixture.purchase("premium", type: .autoRenewableSubscription).transactionIdentifier)
        }
        let charged = try await fixture.store.charges(app: StoreFixture.queue.appBundleID, account: "alice").charges.map(\.productIdentifier)
        #expect(charged.filter { $0 == "coins" }.count == 3)
        #expect(charged.filter { $0 == "pack" }.count == 1)
        #expect(charged.filter { $0 == "premium" }.count == 1)
        fixture.remove()
    }

    @Test("an account's ledger pages through its own charges in charge order, found through its transactions (charges have no index by account)")
    func ledgerThroughTransactions() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let bob = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = StoreFixture.queue.appBundleID; $0.accountID = "bob"; $0.deviceID = "phone"
        }
        // Products interleaved so that the account index's order (by product) is not the charges' order.
        var alices: [String] = []
        for product in ["gems", "coins", "gems", "acorns", "coins"] {
            let mine = try await fixture.purchase(product)
            try await fixture.store.decide(mine.transactionIdentifier)
            alices.append(mine.transactionIdentifier)
            try await fixture.store.decide(try await fixture.purchase(product, queue: bob).transactionIdentifier)
        }
        var listed: [Storebus_PaymentQueue_V1_Charge] = []
        var token = ""
        repeat {
            let page = try await fixture.store.charges(app: StoreFixture.queue.appBundleID, account: "alice", pageToken: token, limit: 2)
            #expect(page.charges.count <= 2)
            listed += page.charges
            token = page.nextPageToken
        } while !token.isEmpty
        #expect(listed.map(\.transactionIdentifier) == alices, "alice's charges only, oldest first")
        #expect(listed.map { Int64($0.chargeID)! } == listed.map { Int64($0.chargeID)! }.sorted())

        let plans = try await fixture.database.pool.read { db -> [String] in
            let indexes = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'pq_charge' AND sql IS NOT NULL")
            return [indexes.joined(separator: ",")]
                + (try [TransactionStore.holdsSQL.sql, TransactionStore.ledgerSQL.sql].map { sql in
                    try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql.replacingOccurrences(of: "?", with: "'x'"))
                        .map { $0["detail"] as String }.joined(separator: "; ")
                })
        }
        #expect(plans[0].isEmpty, "pq_charge has no index of its own but its keys: \(plans[0])")
        for plan in plans.dropFirst() {
            #expect(plan.contains("pq_transaction_account") && plan.contains("sqlite_autoindex_pq_charge_1"), "through the account's transactions, then each one's charge: \(plan)")
        }
    }

    @Test("policies: FAIL gives the chosen SKError, ASK_TO_BUY defers until approved or declined, INTERRUPT fails and marks the purchase")
    func policies() async throws {
        let fixture = try StoreFixture()
        let failing = try await fixture.purchase(
            "coins",
            policy: .with {
                $0.mode = .fail; $0.failError = .paymentCancelled
            })
        let failed = try #require(try await fixture.store.decide(failing.transactionIdentifier))
        #expect(failed.transactionState == .failed && failed.error.code == .paymentCancelled)

        let asked = try await fixture.purchase("pack", type: .nonConsumable, askToBuy: true)
        #expect(try await fixture.store.decide(asked.transactionIdentifier)?.transactionState == .deferred)
        let approved = try await fixture.store.answerAskToBuy(asked.transactionIdentifier, approve: true)
        #expect(approved.transactionState == .purchased)
        #expect(try await fixture.store.answerAskToBuy(asked.transactionIdentifier, approve: true).transactionState == .purchased, "approving twice is OK")
        await #expect(throws: RPCError.self) { _ = try await fixture.store.answerAskToBuy(asked.transactionIdentifier, approve: false) }

        let declined = try await fixture.purchase("coins", policy: .with { $0.mode = .askToBuy })
        try await fixture.store.decide(declined.transactionIdentifier)
        let answer = try await fixture.store.answerAskToBuy(declined.transactionIdentifier, approve: false)
        #expect(answer.transactionState == .failed && answer.error.code == .paymentCancelled)

        let interrupted = try await fixture.purchase("coins", policy: .with { $0.mode = .interrupt })
        #expect(try await fixture.store.decide(interrupted.transactionIdentifier)?.transactionState == .failed)
        let charged = try await fixture.store.charges(app: StoreFixture.queue.appBundleID, account: "alice").charges
        #expect(charged.map(\.transactionIdentifier) == [asked.transactionIdentifier], "only the approved Ask to Buy was charged")
        fixture.remove()
    }
}
