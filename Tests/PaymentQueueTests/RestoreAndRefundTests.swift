import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

@Suite("Restoring, refunding and clearing, against the real processes")
struct RestoreAndRefundTests {
    let removeAds = "com.storebus.demo.puzzle.removeads"
    let monthly = "com.storebus.demo.puzzle.premium.monthly"

    func buy(_ client: RPCClient, _ queue: Storebus_PaymentQueue_V1_QueueRef, _ product: String, username: String = "") async throws -> String {
        let id = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
            .with {
                $0.queue = queue
                $0.payment = .with {
                    $0.productIdentifier = product; $0.quantity = 1; $0.applicationUsername = username
                }
                $0.storefront = "USA"
            }
        ).transaction.transactionIdentifier
        _ = await waitUntil {
            (try? await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions
                .first { $0.transactionIdentifier == id }?.transactionState) == .purchased
        }
        _ = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction,
            .with {
                $0.queue = queue; $0.transactionIdentifier = id
            })
        return id
    }

    func restore(_ client: RPCClient, _ queue: Storebus_PaymentQueue_V1_QueueRef, username: String? = nil) async throws -> Storebus_PaymentQueue_V1_RestoreCompletedTransactionsResponse {
        try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions,
            .with {
                $0.queue = queue
                if let username { $0.applicationUsername = username }
            })
    }

    @Test("restore on a new device gives a restored transaction per completed non-consumable and subscription purchase, pointing at the original; twice gives two each")
    func restoreTwice() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        // Given purchases on the phone: a consumable, a non-consumable and a subscription
        let phone = queueRef(device: "phone")
        _ = try await buy(client, phone, coins)
        let adsID = try await buy(client, phone, removeAds)
        let monthlyID = try await buy(client, phone, monthly)
        // When the tablet restores twice
        let tablet = queueRef(device: "tablet")
        let observed = Observed()
        let follower = try fixture.follower(tablet, client: client)
        let observing = Task {
            try await follower.follow(after: 0) { event in
                try observed.append(event)
            }
        }
        let first = try await restore(client, tablet)
        let second = try await restore(client, tablet)
        // Then each restore restored the two non-consumable/subscription purchases, not the coins
        #expect(first.restoredCount == 2 && second.restoredCount == 2)
        let restored = try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = tablet }).transactions
        #expect(restored.count == 4)
        #expect(restored.allSatisfy { $0.transactionState == .restored })
        #expect(Set(restored.map(\.originalTransaction.transactionIdentifier)) == [adsID, monthlyID])
        #expect(Set(restored.map(\.transactionIdentifier)).count == 4, "each restore makes new identifiers")
        // And the observer heard the four restored transactions and restoreCompletedTransactionsFinished after each batch
        #expect(await waitUntil { observed.restoresFinished == [2, 2] })
        #expect(observed.timeline.map(\.1) == ["restored", "restored", "restored", "restored"])
        await follower.shutdown()
        observing.cancel()
        await client.shutdown()
        await fixture.stop()
    }

    @Test("restore filtered by applicationUsername; an account with nothing to restore gets a definite 0")
    func restoreFilterAndNothing() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let phone = queueRef()
        _ = try await buy(client, phone, removeAds, username: "player-1")
        _ = try await buy(client, phone, monthly, username: "player-2")
        #expect(try await restore(client, phone, username: "player-1").restoredCount == 1)
        #expect(try await restore(client, phone, username: "nobody").restoredCount == 0)
        #expect(try await restore(client, queueRef(account: "newcomer")).restoredCount == 0)
        await client.shutdown()
        await fixture.stop()
    }

    @Test("a refund revokes the entitlement on every queue of the account, and the purchase is no longer restored")
    func refund() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let phone = queueRef(device: "phone"), tablet = queueRef(device: "tablet")
        let adsID = try await buy(client, phone, removeAds)
        _ = try await buy(client, tablet, coins)
        let refunded = try await client.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction, .with { $0.transactionIdentifier = adsID })
        #expect(refunded.revokedProductIdentifiers == [removeAds])
        #expect(refunded.charge.refunded)
        #expect(refunded.transaction.hasCancellationDate)
        // Refunding twice changes nothing
        #expect(try await client.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction, .with { $0.transactionIdentifier = adsID }).charge.refunded)
        // Both devices' queues carry the revocation
        for queue in [phone, tablet] {
            let revoked = try await fixture.events(queue, client: client).filter { $0.revokedEntitlements.productIdentifiers == [removeAds] }
            #expect(revoked.count == 1, "\(queue.deviceID)")
        }
        #expect(try await restore(client, phone).restoredCount == 0)
        await client.shutdown()
        await fixture.stop()
    }

    @Test("clearing an account's history lets a held non-consumable be bought and charged afresh; the ledger is kept")
    func clearHistory() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let phone = queueRef()
        _ = try await buy(client, phone, removeAds)
        _ = try await buy(client, phone, removeAds) // held: no second charge
        let charges = {
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "alice"
                }
            ).charges.count
        }
        #expect(try await charges() == 1)
        let cleared = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.clearAccountTransactions,
            .with {
                $0.appBundleID = puzzle; $0.accountID = "alice"
            })
        #expect(cleared.clearedCount == 2)
        #expect(try await restore(client, phone).restoredCount == 0)
        _ = try await buy(client, phone, removeAds)
        #expect(try await charges() == 2)
        await client.shutdown()
        await fixture.stop()
    }

    @Test("a restore retried under its idempotency key gets the first answer whatever the policy has become; the key from another device or with another applicationUsername is refused")
    func keyedRestores() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        _ = try await buy(client, queueRef(device: "phone"), removeAds)
        let tablet = queueRef(device: "tablet")
        func keyed(_ key: String, _ queue: Storebus_PaymentQueue_V1_QueueRef, username: String? = nil) async throws -> Storebus_PaymentQueue_V1_RestoreCompletedTransactionsResponse {
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions,
                .with {
                    $0.queue = queue
                    $0.idempotencyKey = key
                    if let username { $0.applicationUsername = username }
                })
        }
        func outcomes() async throws -> [String] {
            try await fixture.events(tablet, client: client).compactMap { event in
                switch event.event {
                case .restoreCompletedTransactionsFinished(let finished): "finished \(finished.restoreID) \(finished.restoredCount)"
                case .restoreCompletedTransactionsFailed(let failed): "failed \(failed.restoreID)"
                default: nil
                }
            }
        }
        // Given a restore that finished under key r-1, and the sandbox failing restores since
        let first = try await keyed("r-1", tablet)
        #expect(first.restoredCount == 1)
        try await client.setPolicy(
            account: "alice",
            .with {
                $0.mode = .fail; $0.failError = .cloudServiceNetworkConnectionFailed
            })
        // When it is retried, then it answers as it did the first time and nothing more happens
        let retried = try await keyed("r-1", tablet)
        #expect(retried.restoreID == first.restoreID && retried.restoredCount == 1)
        #expect(try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = tablet }).transactions.count == 1)
        #expect(try await outcomes() == ["finished \(first.restoreID) 1"])
        // And the key sent from another device, or with an applicationUsername, is refused
        for (queue, username) in [(queueRef(device: "watch"), nil), (tablet, "player-7")] as [(Storebus_PaymentQueue_V1_QueueRef, String?)] {
            let refused = await #expect(throws: RPCError.self) { try await keyed("r-1", queue, username: username) }
            #expect(refused?.code == .failedPrecondition)
            #expect(refused?.details.info.reason == "IDEMPOTENCY_KEY_REUSED")
        }
        // And a restore the sandbox failed under r-2 stays failed when retried after the policy approves again
        let failed = try await keyed("r-2", tablet)
        try await client.setPolicy(account: "alice", .with { $0.mode = .approve })
        let failedAgain = try await keyed("r-2", tablet)
        #expect(failedAgain.restoreID == failed.restoreID && failedAgain.restoredCount == 0)
        #expect(try await outcomes() == ["finished \(first.restoreID) 1", "failed \(failed.restoreID)"])
        #expect(try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = tablet }).transactions.count == 1)
        await client.shutdown()
        await fixture.stop()
    }

    @Test("the admin listings page through the service: page_size and page_token as the client sends them, INVALID_ARGUMENT for a made-up token")
    func listingPagesThroughTheService() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let phone = queueRef(device: "phone")
        var bought: [String] = []
        for _ in 0..<3 { bought.append(try await buy(client, phone, coins)) }
        func transactions(_ token: String) async throws -> Storebus_PaymentQueue_V1_ListAccountTransactionsResponse {
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "alice"; $0.includeFinished = true; $0.pageSize = 2; $0.pageToken = token
                })
        }
        let first = try await transactions("")
        let second = try await transactions(first.nextPageToken)
        #expect((first.transactions + second.transactions).map(\.transactionIdentifier) == bought)
        #expect(first.transactions.count == 2 && !first.nextPageToken.isEmpty && second.nextPageToken.isEmpty)
        let charges = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
            .with {
                $0.appBundleID = puzzle; $0.accountID = "alice"; $0.pageSize = 1
            })
        #expect(charges.charges.map(\.transactionIdentifier) == [bought[0]] && !charges.nextPageToken.isEmpty)
        let refused = await #expect(throws: RPCError.self) { try await transactions("bm90IGEgdG9rZW4") }
        #expect(refused?.code == .invalidArgument && refused?.details.fieldViolations.first?.field == "pageToken")
        await client.shutdown()
        await fixture.stop()
    }
}

extension PaymentQueueFixture {
    /// Every event of a queue so far.
    func events(_ queue: Storebus_PaymentQueue_V1_QueueRef, client: RPCClient) async throws -> [Storebus_PaymentQueue_V1_QueueEvent] {
        let page = try await client.call(
            Storebus_Eventlog_V1_EventLog.readEvents,
            .with {
                $0.key = queue.key; $0.limit = 1000
            })
        return try page.events.map { try Storebus_PaymentQueue_V1_QueueEvent(jsonString: try $0.payload.jsonString()) }
    }
}

@Suite("Hosted content, failing restores and configured restrictions, against the real processes")
struct PaymentQueueExtrasTests {
    @Test("a purchased or restored product with hosted content carries its downloads: content identifier, version, length")
    func downloads() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let queue = queueRef()
        let added = try await client.addPayment(queue, levelPack)
        #expect(added.downloads.isEmpty, "not while purchasing")
        var purchased: Storebus_PaymentQueue_V1_PaymentTransaction?
        #expect(
            await waitUntil {
                purchased = try? await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.first
                return purchased?.transactionState == .purchased
            })
        let download = try #require(purchased?.downloads.first)
        #expect(download.contentIdentifier == levelPack && download.contentVersion == "1.0" && download.contentLength == 86528)
        #expect(download.transactionIdentifier == added.transactionIdentifier && download.state == .waiting)
        let tablet = queueRef(device: "tablet")
        _ = try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions, .with { $0.queue = tablet })
        let restored = try #require(try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = tablet }).transactions.first)
        #expect(restored.downloads.map(\.contentIdentifier) == [levelPack])
        #expect(restored.downloads.first?.transactionIdentifier == restored.transactionIdentifier)
        await client.shutdown()
        await fixture.stop()
    }

    @Test("when the sandbox fails payments it fails restores too: restoreCompletedTransactionsFailedWithError with the reason")
    func failingRestore() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let queue = queueRef()
        try await client.setPolicy(
            account: "alice",
            .with {
                $0.mode = .fail; $0.failError = .cloudServiceNetworkConnectionFailed
            })
        let answer = try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions, .with { $0.queue = queue })
        let events = try await fixture.events(queue, client: client)
        let failed = try #require(events.last?.restoreCompletedTransactionsFailed)
        #expect(failed.restoreID == answer.restoreID)
        #expect(failed.error.code == .cloudServiceNetworkConnectionFailed)
        #expect(try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.isEmpty)
        await client.shutdown()
        await fixture.stop()
    }

    @Test("purchase restrictions can be set in the service's configuration")
    func configuredRestriction() async throws {
        let fixture = try PaymentQueueFixture { directory in
            let path = directory.path("payment-queue.json")
            try Data(
                #"""
                {"service": {"policies": [{"app": "com.storebus.demo.puzzle", "account": "kid", "policy": {"mode": "POLICY_MODE_APPROVE", "purchasesRestricted": true}}]}}
                """#.utf8
            ).write(to: URL(fileURLWithPath: path))
            return path
        }
        try await fixture.start()
        let client = try fixture.client()
        #expect(
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "kid"
                }
            ).canMakePayments == false)
        #expect(
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "parent"
                }
            ).canMakePayments)
        await client.shutdown()
        await fixture.stop()

        // A configured policy is held to the limits SetPaymentPolicy enforces: the service says so and
        // does not start.
        let overlong = try PaymentQueueFixture { directory in
            let path = directory.path("payment-queue.json")
            try Data(
                #"""
                {"service": {"policies": [{"app": "com.storebus.demo.puzzle", "policy": {"mode": "POLICY_MODE_APPROVE", "delayMs": 700000}}]}}
                """#.utf8
            ).write(to: URL(fileURLWithPath: path))
            return path
        }
        let refused = await #expect(throws: (any Error).self) { try await overlong.start() }
        #expect("\(refused.map { "\($0)" } ?? "")".contains(#"service.policies[0].policy: invalid field "policy.delayMs": must be at most 600000"#), "\(String(describing: refused))")
        await overlong.stop()
    }
}
