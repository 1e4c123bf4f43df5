import Foundation
import StoreBus
import StoreBusSDK
import StoreBusSDKTesting
import StoreBusTesting
import StoreSchema
import Testing

/// What a scenario needs of a store: queues for devices, and the sandbox's controls.
protocol ScenarioStore: Sendable {
    /// A device's queue, its downloads going into `downloads`.
    func queue(account: String, device: String, downloads: URL) throws -> PaymentQueue
    func setPolicy(_ policy: InMemoryStore.Policy, account: String) async throws
    func approveAskToBuy(_ id: String) async throws
    func refund(_ id: String) async throws
    /// The sandbox's subscription controls: the period running ends now and renews, or expires.
    func renewNow(account: String, group: String) async throws
    func expireNow(account: String, group: String) async throws
}

/// The demo catalog's monthly subscription and its group.
let premiumMonthly = "com.storebus.demo.puzzle.premium.monthly"
let premiumGroup = "puzzle.premium"

/// The real services, through a gateway, with an admin session for the controls.
struct ServicesStore: ScenarioStore {
    let cluster: StoreCluster
    let admin: StoreConnection

    func queue(account: String, device: String, downloads: URL) throws -> PaymentQueue {
        var configuration = cluster.configuration(account: account, device: device)
        configuration.downloadDirectory = downloads
        return try PaymentQueue(configuration: configuration)
    }

    func setPolicy(_ policy: InMemoryStore.Policy, account: String) async throws {
        _ = try await admin.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.setPaymentPolicy,
            .with {
                $0.appBundleID = puzzle
                $0.accountID = account
                $0.policy = .with {
                    switch policy {
                    case .approve: $0.mode = .approve
                    case .askToBuy: $0.mode = .askToBuy
                    case .fail(let code):
                        $0.mode = .fail
                        $0.failError = Storebus_PaymentQueue_V1_SKError(rawValue: code.rawValue) ?? .unknown
                    }
                }
            })
    }

    func approveAskToBuy(_ id: String) async throws {
        _ = try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.approveAskToBuy, .with { $0.transactionIdentifier = id })
    }

    func renewNow(account: String, group: String) async throws {
        _ = try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.renewNow, Self.subscription(account, group))
    }

    func expireNow(account: String, group: String) async throws {
        _ = try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.expireNow, Self.subscription(account, group))
    }

    static func subscription(_ account: String, _ group: String) -> Storebus_PaymentQueue_V1_SubscriptionRef {
        .with {
            $0.appBundleID = puzzle
            $0.accountID = account
            $0.subscriptionGroupIdentifier = group
        }
    }

    func refund(_ id: String) async throws {
        _ = try await admin.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction,
            .with {
                $0.transactionIdentifier = id
                $0.revocationReason = .appIssue
            })
    }
}

/// StoreBusSDKTesting's store in memory, selling the demo catalog's products the scenarios buy, the
/// level pack with the demo content's files.
struct MemoryStore: ScenarioStore {
    let store: InMemoryStore

    init() throws {
        let folder = deployDirectory.appendingPathComponent("content/puzzle-levelpack1")
        let files = try ["levels.json", "palette.txt"].map { name in (path: name, bytes: Array(try Data(contentsOf: folder.appendingPathComponent(name)))) }
        store = try InMemoryStore(
            app: puzzle,
            products: [
                .init(id: coins, kind: .consumable, title: "100 Coins", price: "0.99"),
                .init(id: levelPack, kind: .nonConsumable, title: "Garden Level Pack", price: "2.99", hostedContent: files),
                .init(id: premiumMonthly, kind: .autoRenewable, title: "Premium (monthly)", price: "4.99", group: premiumGroup)
            ])
    }

    func queue(account: String, device: String, downloads: URL) throws -> PaymentQueue { store.queue(account: account, device: device, downloads: downloads) }
    func setPolicy(_ policy: InMemoryStore.Policy, account: String) async throws { store.setPolicy(policy, account: account) }
    func approveAskToBuy(_ id: String) async throws { try store.approveAskToBuy(id) }
    func refund(_ id: String) async throws { try store.refund(id) }
    func renewNow(account: String, group: String) async throws { try store.renewNow(account: account, group: group) }
    func expireNow(account: String, group: String) async throws { try store.expireNow(account: account, group: group) }
}

/// One list of scenarios, run against the real services and against the store in memory: what an
/// app's tests see of the double is what it sees of StoreBus.
@Suite(.serialized)
struct SDKScenarioTests {
    enum Scenario: String, CaseIterable, Sendable {
        case purchase, askToBuy, failure, restore, refund, download, subscription
    }

    /// A launched device: observer attached, launch replay over.
    static func launch(_ store: some ScenarioStore, account: String, device: String = "phone") async throws -> (PaymentQueue, Recorder) {
        let downloads = FileManager.default.temporaryDirectory.appendingPathComponent("storebus-scenario-\(UUID().uuidString)")
        let queue = try store.queue(account: account, device: device, downloads: downloads)
        let recorder = Recorder(queue)
        guard await recorder.attached() else { throw ClusterFailure(description: "the launch replay did not end") }
        return (queue, recorder)
    }

    /// The status a control answered with, whichever store: nil when it succeeded.
    static func code(_ call: () async throws -> Void) async -> StatusCode? {
        do {
            try await call()
            return nil
        } catch let error as StoreError {
            return error.status
        } catch let error as RPCError {
            return error.code
        } catch {
            return .unknown
        }
    }

    static func run(_ scenario: Scenario, on store: some ScenarioStore) async throws {
        let account = "scenario-\(scenario.rawValue)"
        let (phone, recorder) = try await launch(store, account: account)
        switch scenario {
        case .purchase:
            let bought = try await phone.addPayment(Payment(productIdentifier: coins, quantity: 2))
            #expect(await recorder.purchased(bought.id))
            #expect(recorder.states(of: bought.id) == [.purchasing, .purchased])
            let settled = try #require(phone.transactions.first { $0.id == bought.id })
            #expect(settled.payment.quantity == 2 && settled.error == nil)
            #expect(try await phone.finish(settled) == false)
            #expect(await recorder.wait { $0.removed(bought.id) })
            #expect(try await phone.finish(settled) == true, "finishing twice says it was finished already")
            let (again, _) = try await launch(store, account: account, device: "phone")
            #expect(again.transactions.isEmpty, "nothing comes back at the next launch")
            await again.close()

        case .askToBuy:
            let asked = try await phone.addPayment(Payment(productIdentifier: levelPack, simulatesAskToBuyInSandbox: true))
            #expect(await recorder.wait { $0.states(of: asked.id).last == .deferred })
            await #expect(throws: StoreError.self, "a deferred transaction cannot be finished") {
                _ = try await phone.finish(try #require(phone.transactions.first { $0.id == asked.id }))
            }
            try await store.approveAskToBuy(asked.id)
            #expect(await recorder.purchased(asked.id))
            #expect(recorder.states(of: asked.id) == [.purchasing, .deferred, .purchased])
            // The same rules in both stores (one state machine): approving again is OK and changes
            // nothing; an unknown transaction is NOT_FOUND; one that never asked is FAILED_PRECONDITION.
            try await store.approveAskToBuy(asked.id)
            #expect(await Self.code { try await store.approveAskToBuy("999999999999999") } == .notFound)
            let plain = try await phone.addPayment(Payment(productIdentifier: coins))
            #expect(await recorder.purchased(plain.id))
            #expect(await Self.code { try await store.approveAskToBuy(plain.id) } == .failedPrecondition)
            #expect(await Self.code { try await store.refund("999999999999999") } == .notFound)
            #expect(recorder.states(of: asked.id) == [.purchasing, .deferred, .purchased])

        case .failure:
            try await store.setPolicy(.fail(.paymentNotAllowed), account: account)
            let result = try await phone.addPayment(Payment(productIdentifier: coins))
            #expect(await recorder.wait { $0.states(of: result.id).last == .failed })
            let failed = try #require(phone.transactions.first { $0.id == result.id })
            #expect(failed.error?.code == .paymentNotAllowed)
            try await phone.finish(failed)
            #expect(await recorder.wait { $0.removed(result.id) })
            try await store.setPolicy(.fail(.paymentCancelled), account: account)
            guard case .userCancelled = try await phone.purchase(Payment(productIdentifier: coins)) else {
                Issue.record("a cancelled payment is userCancelled")
                return
            }
            try await store.setPolicy(.approve, account: account)
            let unknown = try await phone.addPayment(Payment(productIdentifier: "com.storebus.demo.puzzle.nope"))
            #expect(await recorder.wait { $0.states(of: unknown.id).last == .failed })
            #expect(phone.transactions.first { $0.id == unknown.id }?.error?.code == .storeProductNotAvailable)

        case .restore:
            let bought = try await phone.addPayment(Payment(productIdentifier: levelPack))
            #expect(await recorder.purchased(bought.id))
            try await phone.finish(try #require(phone.transactions.first { $0.id == bought.id }))
            let (tablet, tabletRecorder) = try await launch(store, account: account, device: "tablet")
            let (restoreID, count) = try await tablet.restore()
            #expect(count == 1)
            #expect(await tabletRecorder.wait { $0.callbacks.contains { $0.event == .restoreCompletedTransactionsFinished(restoreID: restoreID, restoredCount: 1) } })
            let copy = try #require(tablet.transactions.first { $0.transactionState == .restored })
            #expect(copy.original?.transactionIdentifier == bought.id && copy.payment.productIdentifier == levelPack)
            await tablet.close()

        case .refund:
            let bought = try await phone.addPayment(Payment(productIdentifier: levelPack))
            #expect(await recorder.purchased(bought.id))
            try await phone.finish(try #require(phone.transactions.first { $0.id == bought.id }))
            try await store.refund(bought.id)
            #expect(await recorder.wait { $0.callbacks.contains { $0.event == .didRevokeEntitlements(productIdentifiers: [levelPack]) } })

        case .download:
            let bought = try await phone.addPayment(Payment(productIdentifier: levelPack))
            #expect(await recorder.purchased(bought.id))
            let transaction = try #require(phone.transactions.first { $0.id == bought.id })
            let download = try #require(transaction.downloads.first)
            #expect(download.state == .waiting && download.contentLength == 86_528)
            var states: [DownloadState] = []
            let progress = phone.progress(of: download)
            try await phone.startDownloads([download])
            for await update in progress where states.last != update.state { states.append(update.state) }
            #expect(states == [.active, .finished])
            // The recorder is another observer: it may hear FINISHED a moment after this stream.
            #expect(await recorder.download(bought.id, reaches: .finished))
            let folder = try #require(recorder.lastDownload(of: bought.id)?.contentURL)
            let levels = try Data(contentsOf: folder.appendingPathComponent("Contents/levels.json"))
            #expect(levels == (try Data(contentsOf: deployDirectory.appendingPathComponent("content/puzzle-levelpack1/levels.json"))))
            try? FileManager.default.removeItem(at: folder.deletingLastPathComponent())
            // Finishing after the download cancels nothing.
            try await phone.finish(transaction)
            #expect(await recorder.wait { $0.removed(bought.id) })
            #expect(recorder.downloadStates(of: bought.id) == [.active, .finished])

        case .subscription:
            try await subscription(store, account: account, phone: phone, recorder: recorder)
        }
        await phone.close()
    }

    @Test("the scenarios against the real services", arguments: Scenario.allCases)
    func againstTheServices(scenario: Scenario) async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let admin = try cluster.admin()
            try await Self.run(scenario, on: ServicesStore(cluster: cluster, admin: admin))
            await admin.close()
        }
    }

    @Test("the same scenarios against the real services, the payment queue, receipt, download and notification services each on a PostgreSQL database", arguments: Scenario.allCases)
    func againstTheServicesOnPostgres(scenario: Scenario) async throws {
        try await PostgresServer.running { server in
            let receipts = try await server.createDatabase("receipts")
            let downloads = try await server.createDatabase("downloads")
            let notifications = try await server.createDatabase("notifications")
            try await StoreCluster(
                gatewayCount: 1, queuePostgres: server.settings(), receiptPostgres: receipts, downloadPostgres: downloads, notificationsPostgres: notifications
            ).running { cluster in
                let admin = try cluster.admin()
                try await Self.run(scenario, on: ServicesStore(cluster: cluster, admin: admin))
                await admin.close()
            }
        }
    }

    @Test(
        "the same scenarios against two payment-queue instances on PostgreSQL splitting four shards, through two gateways routing each account to its shard's owner; then one instance is killed and the other takes its shards over"
    )
    func againstTwoInstancesOnPostgres() async throws {
        try await PostgresServer.running { server in
            var settings = server.settings()
            settings.shards = 4
            settings.leaseSeconds = 2
            try await StoreCluster(queuePostgres: settings, queueInstances: 2).running { cluster in
                let admin = try cluster.admin()
                // The first instance takes every shard; the second, once it is alive, half of them.
                let split = try await Self.shardMap(admin) { map in Set(map.shards.map(\.owner)).count == 2 && map.shards.allSatisfy(\.leased) }
                #expect(split != nil, "the instances never split the shards: \(cluster.logs)")
                let store = ServicesStore(cluster: cluster, admin: admin)
                for scenario in Scenario.allCases { try await Self.run(scenario, on: store) }

                // One instance dies: purchases in every shard go on (the gateways wait for the
                // survivor to take the lapsed leases), and the survivor owns every shard.
                let dying = try await withRPCClient(endpoints: [cluster.queueEndpoint(1)]) { client in
                    try await client.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.getShardMap, .init())
                }
                let before = try #require(try await Self.shardMap(admin) { _ in true })
                let lost = before.shards.filter { $0.owner == dying.instance }
                #expect(!lost.isEmpty, "the second instance owns shards: \(before)")
                let accounts = accountsByShard(prefix: "failover", count: 4)
                // Asked straight to write for an account of a shard it does not own, an instance
                // refuses, naming the shard (the gateways route around it).
                let (foreignShard, foreign) = try #require(accounts.first { shard, _ in before.shards[Int(shard)].owner != dying.instance })
                let refused = await #expect(throws: RPCError.self) {
                    _ = try await withRPCClient(endpoints: [cluster.queueEndpoint(1)]) { client in
                        try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.addPayment, coinsPayment(account: foreign))
                    }
                }
                #expect(refused?.isNotOwner == true && refused?.notOwnerShard == foreignShard, "\(String(describing: refused))")
                await cluster.queues[1].kill()
                for (shard, account) in accounts.sorted(by: { $0.key < $1.key }) {
                    let (queue, recorder) = try await Self.launch(store, account: account)
                    let bought = try await queue.addPayment(Payment(productIdentifier: coins))
                    #expect(await recorder.purchased(bought.id), "shard \(shard): \(cluster.logs)")
                    // Each shard gives identifiers from its own range: the base, then 10^13 a shard.
                    let base: UInt64 = 1_000_000_000_000_000
                    let number = UInt64(bought.id) ?? 0
                    #expect(number > base && (number - base) / 10_000_000_000_000 == UInt64(shard), "\(bought.id) in shard \(shard)")
                    await queue.close()
                }
                let survivor = try await Self.shardMap(admin) { map in map.shards.allSatisfy { $0.owner == map.instance && $0.leased } }
                #expect(survivor != nil, "the survivor does not own every shard: \(cluster.logs)")
                for shard in lost {
                    let now = survivor?.shards.first { $0.shard == shard.shard }
                    #expect(now.map { $0.owner != dying.instance && $0.epoch > shard.epoch } == true, "shard \(shard.shard) taken over with a new epoch: \(String(describing: now))")
                }
                await admin.close()
            }
        }
    }

    /// The payment queue's shard map once `condition` holds (asked every 100 ms for up to 30 s);
    /// nil when it never does.
    static func shardMap(
        _ admin: StoreConnection, _ condition: (Storebus_PaymentQueue_V1_GetShardMapResponse) -> Bool
    ) async throws -> Storebus_PaymentQueue_V1_GetShardMapResponse? {
        var found: Storebus_PaymentQueue_V1_GetShardMapResponse?
        _ = await waitUntil(timeout: .seconds(30), interval: .milliseconds(100)) {
            found = try? await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.getShardMap, .init())
            return found.map(condition) ?? false
        }
        return found.flatMap { condition($0) ? $0 : nil }
    }

    @Test("the same scenarios against StoreBusSDKTesting's store in memory", arguments: Scenario.allCases)
    func againstTheDouble(scenario: Scenario) async throws {
        try await Self.run(scenario, on: try MemoryStore())
    }

    /// A subscription bought on the phone, renewed (the phone and the tablet both hear the renewal),
    /// turned off and expired, and restored once.
    static func subscription(_ store: some ScenarioStore, account: String, phone: PaymentQueue, recorder: Recorder) async throws {
        let (tablet, tabletRecorder) = try await launch(store, account: account, device: "tablet")
        let product = try #require(try await ProductsRequest(productIdentifiers: [premiumMonthly], connection: phone.connection).start().products.first)
        #expect(product.productType == .autoRenewable && product.subscriptionGroupIdentifier == premiumGroup)
        #expect(product.subscriptionPeriod == SubscriptionPeriod(unit: .month, numberOfUnits: 1))

        let bought = try await phone.addPayment(Payment(product: product))
        #expect(await recorder.purchased(bought.id))
        let first = try #require(phone.transactions.first { $0.id == bought.id })
        let firstEnd = try #require(first.expirationDate)
        #expect(firstEnd > (first.transactionDate ?? .distantFuture) && !first.isRenewal)
        #expect(first.subscriptionOriginalTransactionIdentifier == bought.id)
        try await phone.finish(first)
        #expect(tablet.transactions.isEmpty, "the purchase itself stays on the phone")

        try await store.renewNow(account: account, group: premiumGroup)
        #expect(await recorder.wait { recorder in recorder.live.contains { $0.renewal != nil } })
        let renewal = try #require(recorder.live.lazy.compactMap(\.renewal).first)
        #expect(renewal.transactionState == .purchased && renewal.subscriptionOriginalTransactionIdentifier == bought.id)
        #expect(renewal.transactionIdentifier != bought.id && (renewal.expirationDate ?? .distantPast) > (renewal.transactionDate ?? .distantFuture))
        #expect(renewal.transactionDate ?? .distantFuture <= firstEnd, "renewed now: the period that ran ends where the renewal starts")
        #expect(await tabletRecorder.wait { $0.states(of: renewal.id) == [.purchased] }, "every device of the account hears the renewal")
        try await tablet.finish(try #require(tablet.transactions.first { $0.id == renewal.id }))
        #expect(await tabletRecorder.wait { $0.removed(renewal.id) })
        #expect(phone.transactions.contains { $0.id == renewal.id }, "the phone finishes it on its own")

        var subscription = try #require(try await phone.connection.subscriptions().first)
        #expect(subscription.groupIdentifier == premiumGroup && subscription.status == .subscribed && subscription.renewalCount == 1)
        #expect(subscription.latestTransactionIdentifier == renewal.id && subscription.originalTransactionIdentifier == bought.id)
        subscription = try await phone.connection.setAutoRenew(false, group: premiumGroup)
        #expect(!subscription.willAutoRenew && subscription.status == .subscribed)
        try await store.expireNow(account: account, group: premiumGroup)
        subscription = try #require(try await phone.connection.subscriptions().first)
        #expect(subscription.status == .expired && subscription.expirationIntent == 1 && !subscription.isEntitled)
        #expect(await Self.code { try await phone.connection.setAutoRenew(true, group: premiumGroup) } == .failedPrecondition, "buy it again to resubscribe")

        let (restoreID, count) = try await tablet.restore()
        #expect(count == 1, "one subscription, restored once: its first purchase")
        #expect(await tabletRecorder.wait { $0.callbacks.contains { $0.event == .restoreCompletedTransactionsFinished(restoreID: restoreID, restoredCount: 1) } })
        #expect(tablet.transactions.first { $0.transactionState == .restored }?.original?.transactionIdentifier == bought.id)
        await tablet.close()
    }
}

extension PaymentQueueCallback {
    /// The renewal this callback announces as purchased, if it does.
    fileprivate var renewal: PaymentTransaction? {
        guard case .updatedTransactions(let transactions, false) = event else { return nil }
        return transactions.first { $0.isRenewal && $0.transactionState == .purchased }
    }
}
