import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing

/// StoreKit 1's shape where it has one and StoreKit 2's conveniences, against real processes.
@Suite(.serialized)
struct SDKConveniencesTests {
    static func policy(_ admin: StoreConnection, account: String, _ mode: Storebus_PaymentQueue_V1_PolicyMode, error: Storebus_PaymentQueue_V1_SKError = .unknown) async throws {
        _ = try await admin.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.setPaymentPolicy,
            .with {
                $0.appBundleID = puzzle
                $0.accountID = account
                $0.policy = .with {
                    $0.mode = mode
                    $0.failError = error
                }
            })
    }

    /// A products delegate that keeps what it is told.
    final class ProductsDelegate: ProductsRequestDelegate {
        let events = Mutex<[String]>([])
        func productsRequest(_ request: ProductsRequest, didReceive response: ProductsResponse) {
            events.withLock { $0.append("response \(response.products.map(\.productIdentifier)) invalid \(response.invalidProductIdentifiers)") }
        }
        func request(_ request: ProductsRequest, didFailWithError error: any Error) {
            events.withLock { $0.append("failed") }
        }
        func requestDidFinish(_ request: ProductsRequest) {
            events.withLock { $0.append("finished") }
        }
    }

    @Test(
        "purchase awaits the outcome: success, pending for Ask to Buy, userCancelled; transactionUpdates sees each; verified transactions and current entitlements check the JWS; a restored transaction has its original"
    )
    func purchaseOutcomes() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let admin = try cluster.admin()
            let queue = try PaymentQueue(configuration: cluster.configuration(account: "dana"))
            let updates = Mutex<[String]>([])
            let watcher = Task {
                for await transaction in queue.transactionUpdates {
                    updates.withLock { $0.append("\(transaction.payment.productIdentifier) \(transaction.transactionState.rawValue)") }
                }
            }

            // Success
            let result = try await queue.purchase(Payment(productIdentifier: levelPack))
            guard case .success(let bought) = result else { Issue.record("\(result)"); return }
            #expect(bought.transactionState == .purchased)
            try await queue.finish(bought)

            // Pending (Ask to Buy)
            let pending = try await queue.purchase(Payment(productIdentifier: coins, simulatesAskToBuyInSandbox: true))
            guard case .pending(let deferred) = pending else { Issue.record("\(pending)"); return }
            #expect(deferred.transactionState == .deferred)

            // userCancelled
            try await Self.policy(admin, account: "dana", .fail, error: .paymentCancelled)
            let cancelled = try await queue.purchase(Payment(productIdentifier: coins))
            guard case .userCancelled(let failed) = cancelled else { Issue.record("\(cancelled)"); return }
            try await queue.finish(failed)
            // Another failure throws its StoreKit error.
            try await Self.policy(admin, account: "dana", .fail, error: .paymentNotAllowed)
            await #expect(throws: StoreKitError.self) { _ = try await queue.purchase(Payment(productIdentifier: coins)) }
            try await Self.policy(admin, account: "dana", .approve)

            #expect(await waitUntil { updates.withLock { $0.contains("\(levelPack) purchased") && $0.contains("\(coins) deferred") && $0.contains("\(coins) failed") } })

            // The purchase, verified against the root; the account's entitlements, each verified.
            let verified = try await queue.connection.verifiedTransaction(bought.id)
            #expect(verified.transactionIdentifier == bought.id && verified.productIdentifier == levelPack && verified.revocationDate == nil)
            let current = try await queue.connection.currentEntitlements()
            #expect(current.map(\.productIdentifier) == [levelPack])

            // A restore on another device: its transaction has the purchase as its original.
            let tablet = try PaymentQueue(configuration: cluster.configuration(account: "dana", device: "tablet"))
            let restored = Mutex<PaymentTransaction?>(nil)
            let restoreWatch = Task {
                for await transaction in tablet.transactionUpdates where transaction.transactionState == .restored {
                    restored.withLock { $0 = transaction }
                    break
                }
            }
            _ = try await tablet.restore()
            #expect(await waitUntil { restored.withLock { $0 } != nil })
            let copy = try #require(restored.withLock { $0 })
            #expect(copy.original?.transactionIdentifier == bought.id && copy.original?.transactionState == .purchased)
            #expect(copy.originalTransactionIdentifier == bought.id)
            restoreWatch.cancel()
            watcher.cancel()
            await tablet.close()
            await queue.close()
            await admin.close()
        }
    }

    @Test("the default queue, the delegate form of ProductsRequest, observingStates as a stream, and shutdown letting a finish reach the store")
    func storeKitShapeAndLifecycle() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let queue = try await PaymentQueue.configureDefault(cluster.configuration(account: "erin"))
            #expect(PaymentQueue.default() === queue)

            let delegate = ProductsDelegate()
            ProductsRequest(productIdentifiers: [coins, "nope"], connection: queue.connection).start(delegate: delegate)
            #expect(await waitUntil { delegate.events.withLock { $0.count == 2 } })
            #expect(delegate.events.withLock { $0 } == ["response [\"\(coins)\"] invalid [\"nope\"]", "finished"])

            let states = Mutex<[String]>([])
            let stateWatch = Task {
                for await error in queue.observingStates { states.withLock { $0.append(error == nil ? "ok" : "interrupted") } }
            }
            let recorder = Recorder(queue)
            #expect(await recorder.attached())
            let bought = try await queue.addPayment(Payment(productIdentifier: coins))
            #expect(await recorder.purchased(bought.id))
            let settled = try #require(queue.transactions.first { $0.id == bought.id })
            // A finish made fire-and-forget, then shutdown: it reaches the store before the queue closes.
            queue.finishTransaction(settled)
            #expect(await queue.shutdown().isEmpty)
            let other = try PaymentQueue(configuration: cluster.configuration(account: "erin"))
            let otherRecorder = Recorder(other)
            #expect(await otherRecorder.attached(), "the launch replay is empty: the finish went through")
            #expect(states.withLock { $0.first } == "ok")
            stateWatch.cancel()
            await other.close()
        }
    }

    @Test("shutdown says which payments and finishes it cut off when the store cannot be reached in time")
    func shutdownSaysWhatWasCutOff() async throws {
        let nowhere = try TemporaryDirectory(prefix: "nowhere")
        defer { nowhere.remove() }
        var configuration = StoreConfiguration(gatewayEndpoints: [nowhere.ipcEndpoint("gateway")], apiKey: "k", appBundleID: puzzle, accountID: "gus", deviceID: "d")
        configuration.callTimeout = .seconds(30)
        let queue = try PaymentQueue(configuration: configuration)
        let payment = Payment(productIdentifier: coins, quantity: 2)
        queue.add(payment)
        let started = ContinuousClock.now
        let cutOff = await queue.shutdown(waitingAtMost: .milliseconds(300))
        #expect(cutOff == [.payment(payment)])
        #expect(started.duration(to: .now) < .seconds(20), "it waited as long as it was told, not the call's timeout")
    }

    @Test("a download's progress as an asynchronous sequence, ending with FINISHED")
    func downloadProgressSequence() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let (queue, recorder) = try await cluster.device("fay", downloads: cluster.directory.url.appendingPathComponent("fay"))
            let bought = try await cluster.buy(levelPack, queue, recorder)
            let download = try #require(bought.downloads.first)
            let progress = queue.progress(of: download)
            try await queue.startDownloads([download])
            var states: [DownloadState] = []
            for await update in progress { states.append(update.state) }
            #expect(states.last == .finished && states.allSatisfy { [.active, .finished].contains($0) }, "\(states)")
            await queue.close()
        }
    }
}

@Suite("Entitlements as of the queue, against the real services")
struct EntitlementsAsOfQueueTests {
    @Test("right after the queue shows purchased, entitlements asked as of its position list the purchase, with no polling; a position never reached is OUT_OF_RANGE, for subscription statuses too")
    func readYourPurchase() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            // Given devices of five accounts, each buying the level pack
            for index in 1...5 {
                let queue = try PaymentQueue(configuration: cluster.configuration(account: "reader-\(index)"))
                let result = try await queue.purchase(Payment(productIdentifier: levelPack))
                guard case .success(let bought) = result else { Issue.record("\(result)"); await queue.close(); return }
                // When the app asks at once, as of what its queue showed
                let entitlements = try await queue.entitlements()
                // Then the purchase is there
                #expect(entitlements.contains { $0.productIdentifier == levelPack && $0.isActive }, "account reader-\(index): \(entitlements)")
                try await queue.finish(bought)
                await queue.close()
            }
            // A queue position the queue never reached: the receipt service says so at once.
            let connection = try StoreConnection(configuration: cluster.configuration(account: "reader-1"))
            do {
                _ = try await connection.call(Storebus_Receipt_V1_Receipt.getEntitlements, .with { $0.minQueueSeq = 1_000_000 })
                Issue.record("a queue position never reached was answered")
            } catch let error as StoreError {
                #expect(error.status == .outOfRange, "\(error)")
            }
            // Subscription statuses wait for a position of the device's queue the same way.
            do {
                _ = try await connection.subscriptionStatus(for: "puzzle.premium", asOfQueuePosition: 1_000_000)
                Issue.record("subscription statuses as of a queue position never reached were answered")
            } catch let error as StoreError {
                #expect(error.status == .outOfRange, "\(error)")
            }
            await connection.close()
        }
    }
}

@Suite("Subscription status, verified, against the real services")
struct SubscriptionStatusSDKTests {
    @Test("a subscriber's status in the group: subscribed, its transaction and renewal info verified; once expired, status 2, intent 1, and gone from the current entitlements")
    func status() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let queue = try PaymentQueue(configuration: cluster.configuration(account: "subscriber"))
            let admin = try cluster.admin()
            let result = try await queue.purchase(Payment(productIdentifier: premiumMonthly))
            guard case .success(let bought) = result else { Issue.record("\(result)"); return }
            let statuses = try await queue.subscriptionStatus(for: premiumGroup)
            let status = try #require(statuses.first)
            #expect(statuses.count == 1 && status.state == .subscribed && status.originalTransactionIdentifier == bought.id)
            #expect(status.transaction.transactionId == bought.id && status.transaction.productId == premiumMonthly)
            #expect(status.transaction.expiresDate == bought.expirationDate.map(EpochMilliseconds.of))
            #expect(status.renewalInfo.autoRenewStatus == 1 && status.renewalInfo.autoRenewProductId == premiumMonthly)
            #expect(try await queue.connection.currentEntitlements().map(\.productIdentifier) == [premiumMonthly])
            #expect(try await queue.subscriptionStatus(for: "another.group").isEmpty)

            try await queue.connection.setAutoRenew(false, group: premiumGroup)
            _ = try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.expireNow, ServicesStore.subscription("subscriber", premiumGroup))
            // The receipt service follows the payment queue's log: it hears of the expiry shortly.
            #expect(await waitUntil { (try? await queue.subscriptionStatus(for: premiumGroup).first?.state) == .expired })
            let expired = try #require(try await queue.subscriptionStatus(for: premiumGroup).first)
            #expect(expired.renewalInfo.expirationIntent == 1 && expired.renewalInfo.autoRenewStatus == 0)
            #expect(try await queue.connection.currentEntitlements().isEmpty, "an expired subscription unlocks nothing")
            await admin.close()
            await queue.close()
        }
    }
}
