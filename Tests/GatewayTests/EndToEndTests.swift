import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing

/// Every live callback's seq follows the one before: nothing lost, nothing repeated.
func expectConsecutive(_ callbacks: [PaymentQueueCallback], after start: UInt64, sourceLocation: SourceLocation = #_sourceLocation) {
    let seqs = callbacks.map(\.seq)
    #expect(seqs == Array((start + 1)..<(start + 1 + UInt64(seqs.count))), "callback positions \(seqs)", sourceLocation: sourceLocation)
}

extension StoreConnection {
    func setPolicy(account: String, _ policy: Storebus_PaymentQueue_V1_PaymentPolicy) async throws {
        _ = try await call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.setPaymentPolicy,
            .with {
                $0.appBundleID = puzzle
                $0.accountID = account
                $0.policy = policy
            })
    }
}

/// The StoreKit pattern: deliver purchased transactions, then finish them, from the observer.
final class AutoFinisher: PaymentTransactionObserver {
    let delivered = Mutex<[String]>([])
    let removed = Mutex<[String]>([])
    let revoked = Mutex<[String]>([])

    func paymentQueue(_ queue: PaymentQueue, updatedTransactions transactions: [PaymentTransaction]) {
        for transaction in transactions where transaction.transactionState == .purchased {
            delivered.withLock { $0.append(transaction.transactionIdentifier) }
            queue.finishTransaction(transaction)
        }
    }

    func paymentQueue(_ queue: PaymentQueue, removedTransactions transactions: [PaymentTransaction]) {
        removed.withLock { $0 += transactions.map(\.transactionIdentifier) }
    }

    func paymentQueue(_ queue: PaymentQueue, didRevokeEntitlementsForProductIdentifiers productIdentifiers: [String]) {
        revoked.withLock { $0 += productIdentifiers }
    }
}

@Suite("End to end: every service as its own process, clients through the gateways", .serialized)
struct EndToEndTests {
    @Test("products, purchase, finish, Ask to Buy, a cancelled payment, an interrupted purchase, two restores, a failed restore and a refund, in order", arguments: [true, false])
    func purchaseFlows(fastPaths: Bool) async throws {
        // The same with StoreBus's shortcuts on and off (STOREBUS_FAST_PATHS=off: the plain
        // implementations, see docs/performance.md).
        let store = try StoreCluster(fastPaths: fastPaths)
        try await store.start()
        // Each service runs with its shortcuts as asked
        for endpoint in [store.directory.ipcEndpoint("catalog"), store.directory.ipcEndpoint("pq")] {
            let direct = try RPCClient(configuration: ClientConfiguration(endpoints: [endpoint]))
            #expect(try await direct.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init()).fastPaths == fastPaths)
            await direct.shutdown()
        }
        let admin = try store.admin()
        // An app launch on an empty queue: the replay says so, then live callbacks follow.
        let (queue, recorder) = try await store.launch(account: "alice")
        let start = recorder.callbacks.last!.seq

        // Products, one identifier invalid.
        let response = try await ProductsRequest(productIdentifiers: [coins, "com.storebus.demo.puzzle.nothing", levelPack], connection: queue.connection).start()
        #expect(response.products.map(\.productIdentifier) == [coins, levelPack])
        #expect(response.invalidProductIdentifiers == ["com.storebus.demo.puzzle.nothing"])
        #expect(response.products.allSatisfy { !$0.formattedPrice.isEmpty && $0.price > 0 })
        #expect(try await queue.canMakePayments())

        // Buy: purchasing, then purchased; finish: removed.
        let bought = try await queue.addPayment(Payment(productIdentifier: coins))
        #expect(bought.transactionState == .purchasing)
        #expect(await recorder.wait { $0.states(of: bought.id) == [.purchasing, .purchased] })
        try await queue.finish(bought)
        #expect(await recorder.wait { $0.removed(bought.id) })

        // Ask to Buy: deferred until a parent approves.
        let asked = try await queue.addPayment(Payment(productIdentifier: coins, simulatesAskToBuyInSandbox: true))
        #expect(await recorder.wait { $0.states(of: asked.id) == [.purchasing, .deferred] })
        _ = try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.approveAskToBuy, .with { $0.transactionIdentifier = asked.id })
        #expect(await recorder.wait { $0.states(of: asked.id) == [.purchasing, .deferred, .purchased] })
        try await queue.finish(asked)

        // The user cancels the payment sheet.
        try await admin.setPolicy(
            account: "alice",
            .with {
                $0.mode = .fail; $0.failError = .paymentCancelled
            })
        let cancelled = try await queue.addPayment(Payment(productIdentifier: coins))
        #expect(await recorder.wait { $0.states(of: cancelled.id).last == .failed })
        let failed = try #require(queue.transactions.first { $0.id == cancelled.id })
        #expect(failed.error?.code == .paymentCancelled)
        try await queue.finish(failed)

        // An interrupted purchase fails; once resolved, a new purchased transaction arrives.
        try await admin.setPolicy(account: "alice", .with { $0.mode = .interrupt })
        let interrupted = try await queue.addPayment(Payment(productIdentifier: coins))
        #expect(await recorder.wait { $0.states(of: interrupted.id).last == .failed })
        let resolved = try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.resolveInterruptedPurchase, .with { $0.transactionIdentifier = interrupted.id }).transaction
        #expect(await recorder.wait { $0.states(of: resolved.transactionIdentifier) == [.purchased] })
        try await queue.finish(queue.transactions.first { $0.id == interrupted.id }!)
        try await queue.finish(queue.transactions.first { $0.id == resolved.transactionIdentifier }!)

        // A non-consumable, then two restores: each adds a RESTORED transaction and ends with finished.
        try await admin.setPolicy(account: "alice", .with { $0.mode = .approve })
        let lasting = try await queue.addPayment(Payment(productIdentifier: removeAds))
        #expect(await recorder.purchased(lasting.id))
        try await queue.finish(lasting)
        for round in 1...2 {
            let (restoreID, count) = try await queue.restore()
            #expect(count == 1)
            #expect(
                await recorder.wait {
                    $0.callbacks.contains { $0.event == .restoreCompletedTransactionsFinished(restoreID: restoreID, restoredCount: 1) }
                }, "restore \(round)")
            let restored = queue.transactions.filter { $0.transactionState == .restored }
            #expect(restored.count == 1 && restored.first?.originalTransactionIdentifier == lasting.id)
            for transaction in restored { try await queue.finish(transaction) }
            #expect(await recorder.wait { recorder in restored.allSatisfy { recorder.removed($0.id) } })
        }

        // A restore the store fails: the observer hears restoreCompletedTransactionsFailedWithError.
        try await admin.setPolicy(
            account: "alice",
            .with {
                $0.mode = .fail; $0.failError = .cloudServiceNetworkConnectionFailed
            })
        let (failedRestore, _) = try await queue.restore()
        #expect(
            await recorder.wait {
                $0.callbacks.contains {
                    if case .restoreCompletedTransactionsFailed(failedRestore, let error) = $0.event { return error.code == .cloudServiceNetworkConnectionFailed }
                    return false
                }
            })

        // A refund revokes the non-consumable: didRevokeEntitlementsForProductIdentifiers.
        _ = try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction, .with { $0.transactionIdentifier = lasting.id })
        #expect(await recorder.wait { $0.callbacks.contains { $0.event == .didRevokeEntitlements(productIdentifiers: [removeAds]) } })

        #expect(queue.transactions.isEmpty)
        expectConsecutive(recorder.live, after: start)

        // The next launch replays nothing more: every transaction was finished.
        let relaunch = try PaymentQueue(configuration: store.configuration(account: "alice"))
        let second = Recorder(relaunch)
        #expect(await second.attached())
        #expect(second.callbacks.first?.seq == recorder.callbacks.last?.seq)

        recorder.cancel()
        second.cancel()
        await relaunch.close()
        await queue.close()
        await admin.close()
        await store.stop()
    }

    @Test("unfinished transactions come back at the next launch, marked as replayed", arguments: [true, false])
    func launchReplay(fastPaths: Bool) async throws {
        // The same with StoreBus's shortcuts on and off (STOREBUS_FAST_PATHS=off: the plain
        // implementations, see docs/performance.md).
        let store = try StoreCluster(fastPaths: fastPaths)
        try await store.start()
        // The app has attached (its launch replay is in) before it buys.
        let (first, recorder) = try await store.launch(account: "carol")
        let bought = try await first.addPayment(Payment(productIdentifier: coins))
        #expect(await recorder.purchased(bought.id))
        await first.close()

        // The app starts again without having finished the purchase.
        let relaunched = try PaymentQueue(configuration: store.configuration(account: "carol"))
        let replay = Recorder(relaunched)
        #expect(await replay.wait { $0.callbacks.count >= 2 })
        let callbacks = replay.callbacks
        guard case .updatedTransactions(let transactions, replayed: true) = callbacks.first?.event else {
            Issue.record("expected the replay first, got \(callbacks)")
            return
        }
        #expect(transactions.map(\.id) == [bought.id])
        #expect(transactions.first?.transactionState == .purchased)
        #expect(callbacks[1].event == .replayCompleted(count: 1))
        #expect(callbacks[0].seq == callbacks[1].seq && callbacks[0].seq == recorder.callbacks.last?.seq)
        try await relaunched.finish(transactions[0])
        #expect(await replay.wait { $0.removed(bought.id) })
        expectConsecutive(replay.live, after: callbacks[1].seq)
        replay.cancel()
        recorder.cancel()
        await relaunched.close()
        await store.stop()
    }

    @Test("a gateway killed with SIGKILL and restarted mid-stream: clients resume with no callback lost or repeated", arguments: [true, false])
    func gatewayKilledMidStream(fastPaths: Bool) async throws {
        // The same with StoreBus's shortcuts on and off (STOREBUS_FAST_PATHS=off: the plain
        // implementations, see docs/performance.md).
        let store = try StoreCluster(fastPaths: fastPaths)
        try await store.start()
        let admin = try store.admin()
        // Dave's device knows only the first gateway: it waits for it to come back.
        // Erin's device knows both: it moves to the second.
        let dave = try PaymentQueue(configuration: store.configuration(account: "dave", gateways: [0]))
        let erin = try PaymentQueue(configuration: store.configuration(account: "erin", gateways: [0, 1]))
        let daveCallbacks = Recorder(dave)
        let erinCallbacks = Recorder(erin)
        #expect(await daveCallbacks.attached())
        #expect(await erinCallbacks.attached())

        try await admin.setPolicy(account: "dave", .with { $0.mode = .askToBuy })
        var asked: [String] = []
        for _ in 0..<5 {
            asked.append(try await dave.addPayment(Payment(productIdentifier: coins)).id)
        }
        let deferred = asked
        #expect(await daveCallbacks.wait { recorder in deferred.allSatisfy { recorder.states(of: $0).last == .deferred } })

        // Purchases keep going for Erin while the first gateway dies.
        let buying = Task {
            var ids: [String] = []
            for _ in 0..<30 {
                if let transaction = try? await erin.addPayment(Payment(productIdentifier: coins), idempotencyKey: UUID().uuidString) {
                    ids.append(transaction.id)
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return ids
        }
        try await Task.sleep(for: .milliseconds(150))
        await store.gateways[0].kill()

        // While it is down, the parent approves Dave's purchases through the other gateway.
        for id in deferred {
            _ = try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.approveAskToBuy, .with { $0.transactionIdentifier = id })
        }
        let erinIDs = await buying.value
        #expect(erinIDs.count == 30, "every purchase went through, on the surviving gateway")
        #expect(await erinCallbacks.wait { recorder in erinIDs.allSatisfy { recorder.states(of: $0) == [.purchasing, .purchased] } })

        // The first gateway comes back on the same endpoint; Dave resumes where he acknowledged.
        try await store.startGateway(0)
        #expect(await daveCallbacks.wait(timeout: .seconds(15)) { recorder in deferred.allSatisfy { recorder.states(of: $0) == [.purchasing, .deferred, .purchased] } })

        expectConsecutive(daveCallbacks.live, after: daveCallbacks.callbacks.first { $0.event == .replayCompleted(count: 0) }!.seq)
        expectConsecutive(erinCallbacks.live, after: erinCallbacks.callbacks.first { $0.event == .replayCompleted(count: 0) }!.seq)

        daveCallbacks.cancel()
        erinCallbacks.cancel()
        await dave.close()
        await erin.close()
        await admin.close()
        await store.stop()
    }

    @Test("a client sees and acts on its own account only; a wrong API key is refused")
    func isolationAndKeys() async throws {
        let store = try StoreCluster()
        try await store.start()

        // A wrong key: UNAUTHENTICATED, and nothing else is answered without a session.
        let intruder = try StoreConnection(configuration: store.configuration(account: "alice", key: "not-a-key-at-all-000000"))
        await #expect(throws: StoreError.self) { try await intruder.authenticate() }
        do {
            try await intruder.authenticate()
        } catch let error as StoreError {
            #expect(error.status == .unauthenticated)
        }
        let raw = try RPCClient(configuration: ClientConfiguration(endpoints: [store.gatewayEndpoints[0]]))
        var forged = Metadata()
        Principal(app: puzzle, account: "alice", device: "phone").apply(to: &forged)
        let anonymous = try await raw.callRaw(
            path: Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path, idempotent: true,
            body: Array(#"{"queue": {"appBundleId": "com.storebus.demo.puzzle", "accountId": "alice", "deviceId": "phone"}}"#.utf8),
            options: CallOptions(metadata: forged)
        )
        #expect(anonymous.code == .unauthenticated, "a client's own principal metadata is not a session")
        let badSession = try await raw.callRaw(
            path: Storebus_Catalog_V1_Catalog.fetchProducts.path, idempotent: true, body: Array("{}".utf8),
            options: CallOptions(metadata: ["session": "v1.e30.AAAA"])
        )
        #expect(badSession.code == .unauthenticated)
        // A malformed Observe without a session hears UNAUTHENTICATED, not what is wrong with its body.
        let badObserve = try await raw.callRaw(path: Storebus_Gateway_V1_Gateway.observe.path, idempotent: true, body: Array(#"{"credit": "x"}"#.utf8))
        #expect(badObserve.code == .unauthenticated)
        // Diagnostics stays with the services: an internal method, which the gateway refuses.
        let echo = try await raw.callRaw(path: Storebus_Diagnostics_V1_Diagnostics.echo.path, idempotent: true, body: Array(#"{"delayMs": 60000}"#.utf8))
        #expect(echo.code == .permissionDenied && echo.error?.details.info.reason == "INTERNAL_METHOD")
        await raw.shutdown()
        await intruder.close()

        // Names equal to Swift but not to SQLite are refused: "\u{212A}ate" (a Kelvin sign) is "Kate" to
        // Swift's ==, and the gateway's kept events and the permission checks once took it for her,
        // while the database kept the two queues apart. Only names in normalization form C pass.
        for (account, device) in [("\u{212A}ate", "phone"), ("cafe\u{301}", "phone"), ("kate", "pa|\u{301}d")] {
            let lookalike = try StoreConnection(configuration: store.configuration(account: account, device: device))
            do {
                try await lookalike.authenticate()
                Issue.record("\(account)/\(device) was accepted")
            } catch let error as StoreError {
                #expect(error.status == .invalidArgument, "\(account)/\(device): \(error)")
            }
            await lookalike.close()
        }
        let composed = try StoreConnection(configuration: store.configuration(account: "caf\u{e9}"))
        try await composed.authenticate()
        await composed.close()

        // Alice buys.
        let alice = try PaymentQueue(configuration: store.configuration(account: "alice"))
        let bought = try await alice.addPayment(Payment(productIdentifier: coins))
        let aliceQueue = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = puzzle
            $0.accountID = "alice"
            $0.deviceID = "phone"
        }

        // Bob, signed in with the same app key, tries to read and finish Alice's transaction.
        let bob = try StoreConnection(configuration: store.configuration(account: "bob"))
        func expectDenied<R>(_ what: String, reason: String, domain: String = "storebus.gateway", _ body: () async throws -> R) async {
            do {
                _ = try await body()
                Issue.record("\(what) was allowed")
            } catch let error as StoreError {
                #expect(error.status == .permissionDenied, "\(what): \(error)")
                #expect(error.reason == reason && error.domain == domain, "\(what): \(error.domain) \(error.reason)")
            } catch {
                Issue.record("\(what): \(error)")
            }
        }
        await expectDenied("reading another account's queue", reason: "OTHER_ACCOUNT") {
            try await bob.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = aliceQueue })
        }
        await expectDenied("finishing another account's transaction", reason: "OTHER_ACCOUNT") {
            try await bob.call(
                Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction,
                .with {
                    $0.queue = aliceQueue
                    $0.transactionIdentifier = bought.id
                })
        }
        await expectDenied("buying into another account's queue", reason: "OTHER_ACCOUNT") {
            try await bob.call(
                Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
                .with {
                    $0.queue = aliceQueue
                    $0.payment.productIdentifier = coins
                })
        }
        // An admin session (opened for Bob's app) reads the other app's products on each gateway; a
        // gateway never gives that answer to a session of Bob's app asking the same.
        for index in [0, 1] {
            let admin = try StoreConnection(configuration: store.configuration(account: "operator", device: "console", key: adminKey, gateways: [index]))
            _ = try await admin.call(
                Storebus_Catalog_V1_Catalog.fetchProducts,
                .with {
                    $0.appBundleID = notes
                    $0.productIdentifiers = ["com.storebus.demo.notes.pro"]
                })
            await admin.close()
        }
        await expectDenied("asking another app's products", reason: "OTHER_APP") {
            try await bob.call(
                Storebus_Catalog_V1_Catalog.fetchProducts,
                .with {
                    $0.appBundleID = notes
                    $0.productIdentifiers = ["com.storebus.demo.notes.pro"]
                })
        }
        await expectDenied("an admin method without an admin key", reason: "ADMIN_REQUIRED") {
            try await bob.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                .with {
                    $0.appBundleID = puzzle
                    $0.accountID = "alice"
                })
        }
        // Naming his own queue, Bob still may not finish Alice's transaction.
        do {
            _ = try await bob.call(
                Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction,
                .with {
                    $0.queue = .with {
                        $0.appBundleID = puzzle; $0.accountID = "bob"; $0.deviceID = "phone"
                    }
                    $0.transactionIdentifier = bought.id
                })
            Issue.record("finishing Alice's transaction from Bob's queue was allowed")
        } catch let error as StoreError {
            #expect(error.status == .permissionDenied)
            #expect(error.reason == "OTHER_ACCOUNT" && error.domain == "storebus.payment_queue", "\(error.domain) \(error.reason)")
        }
        // A key for one app opens no session for another.
        let otherApp = try StoreConnection(configuration: store.configuration(account: "alice", app: notes))
        do {
            try await otherApp.authenticate()
            Issue.record("the puzzle key opened a session for the notes app")
        } catch let error as StoreError {
            #expect(error.status == .permissionDenied)
            #expect(error.reason == "APP_NOT_ALLOWED", "\(error.reason)")
        }

        // Alice's transaction is untouched and still hers to finish.
        #expect(try await alice.finish(bought) == false)
        await otherApp.close()
        await bob.close()
        await alice.close()
        await store.stop()
    }

    @Test("an observer registered at launch delivers and finishes each purchase, StoreKit style", arguments: [true, false])
    func observerPattern(fastPaths: Bool) async throws {
        // The same with StoreBus's shortcuts on and off (STOREBUS_FAST_PATHS=off: the plain
        // implementations, see docs/performance.md).
        let store = try StoreCluster(fastPaths: fastPaths)
        try await store.start()
        let queue = try PaymentQueue(configuration: store.configuration(account: "judy"))
        let observer = AutoFinisher()
        queue.add(observer)
        queue.add(Payment(productIdentifier: coins))
        queue.add(Payment(productIdentifier: coins, quantity: 2))
        queue.add(Payment(productIdentifier: removeAds))
        #expect(await waitUntil { observer.removed.withLock { $0.count } == 3 })
        #expect(Set(observer.delivered.withLock { $0 }) == Set(observer.removed.withLock { $0 }))
        #expect(queue.transactions.isEmpty)
        queue.remove(observer)
        await queue.close()
        await store.stop()
    }

    @Test("a call the gateway could not forward (the payment queue down) is UNAVAILABLE with NOT_SENT and retry advice: it did not run")
    func unforwardedCallDidNotRun() async throws {
        let store = try StoreCluster()
        try await store.start()
        let connection = try StoreConnection(configuration: store.configuration(account: "ines"))
        _ = try await connection.authenticate()
        await store.queue.stop()
        // The gateway learns of the disconnection a moment after the process is gone: a call sent
        // before that went into the closing connection and can only time out (it may have run). Once
        // the gateway knows, a call is never sent.
        var refused: StoreError?
        for _ in 0..<5 {
            do {
                _ = try await connection.call(
                    Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
                    .with {
                        $0.queue = .with {
                            $0.appBundleID = puzzle; $0.accountID = "ines"; $0.deviceID = "phone"
                        }
                        $0.payment = .with {
                            $0.productIdentifier = coins; $0.quantity = 1
                        }
                    }, timeout: .seconds(1))
                Issue.record("a payment was taken with the payment queue stopped")
                break
            } catch let error as StoreError {
                refused = error
                if error.status != .deadlineExceeded { break }
            }
        }
        #expect(refused?.status == .unavailable, "\(String(describing: refused))")
        #expect(refused?.reason == "NOT_SENT" && refused?.domain == "storebus.rpc", "\(String(describing: refused))")
        await connection.close()
        await store.stop()
    }

    @Test("when the payment queue's data is replaced, a client ahead of the new log starts over with a replay")
    func logBehindClient() async throws {
        let store = try StoreCluster()
        try await store.start()
        let (queue, recorder) = try await store.launch(account: "lena")
        try await completedPurchase(queue, recorder)
        // One purchase stays unfinished: the client's transaction list holds it.
        let lingering = try await queue.addPayment(Payment(productIdentifier: coins))
        #expect(await recorder.purchased(lingering.id))
        #expect(queue.transactions.map(\.transactionIdentifier) == [lingering.id])

        // The operator replaces the payment queue's database with an empty one.
        try await store.replacePaymentQueueDatabase()

        // The client's position is past the new log's head: it replays the (empty) queue, then
        // follows the new log from its start.
        #expect(await recorder.wait(timeout: .seconds(15)) { $0.callbacks.filter { $0.event == .replayCompleted(count: 0) }.count == 2 })
        // The new queue has no transaction, so neither has the client's list any more.
        #expect(queue.transactions.isEmpty, "\(queue.transactions.map(\.transactionIdentifier))")
        // (A new database numbers transactions from the start again: compare positions, not ids.)
        _ = try await queue.addPayment(Payment(productIdentifier: coins))
        @Sendable func afterReset(_ recorder: Recorder) -> [PaymentQueueCallback] {
            Array(recorder.callbacks.drop { $0.event != .replayCompleted(count: 0) }.dropFirst().drop { $0.event != .replayCompleted(count: 0) }.dropFirst())
        }
        #expect(await recorder.wait { afterReset($0).count >= 2 })
        let fresh = afterReset(recorder)
        #expect(fresh.map(\.seq) == [1, 2], "\(recorder.callbacks.map { "\($0.seq) \($0.event)".prefix(60) })")
        if case .updatedTransactions(let transactions, false) = fresh.last?.event {
            #expect(transactions.first?.transactionState == .purchased)
        } else {
            Issue.record("expected the purchase's callbacks after the reset, got \(fresh)")
        }
        recorder.cancel()
        await queue.close()
        await store.stop()
    }

    @Test("a client that stopped listening before the payment queue's database was replaced never hears the old database's events")
    func pausedClientOfReplacedLog() async throws {
        let store = try StoreCluster()
        try await store.start()
        let (queue, recorder) = try await store.launch(account: "mona")
        try await completedPurchase(queue, recorder)
        // The app stops listening; two more purchases are committed (and announced to the gateway).
        recorder.cancel()
        try await Task.sleep(for: .milliseconds(300))
        let unseen = [try await queue.addPayment(Payment(productIdentifier: coins)).id, try await queue.addPayment(Payment(productIdentifier: coins)).id]
        try await Task.sleep(for: .milliseconds(500))

        // The operator replaces the payment queue's database with an empty one.
        try await store.replacePaymentQueueDatabase()

        // Listening again, the client hears the new, empty queue, and nothing of the old database.
        let again = Recorder(queue)
        #expect(await again.attached(timeout: .seconds(15)))
        try await Task.sleep(for: .milliseconds(500))
        let old = again.callbacks.filter { callback in
            if case .updatedTransactions(let transactions, _) = callback.event { return transactions.contains { unseen.contains($0.transactionIdentifier) } }
            return false
        }
        #expect(old.isEmpty, "\(again.callbacks.map { "\($0.seq) \($0.event)".prefix(80) })")
        again.cancel()
        await queue.close()
        await store.stop()
    }
}
