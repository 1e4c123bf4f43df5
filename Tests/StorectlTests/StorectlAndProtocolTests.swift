import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing

@Suite("storectl and the client protocol against the running system", .serialized)
struct StorectlAndProtocolTests {
    /// Runs storectl against one of the fixture's gateways (the first by default); returns its exit
    /// status and output.
    func storectl(_ store: StoreCluster, _ arguments: [String], name: String, gateway: Int = 0) async throws -> (Int32?, String) {
        let process = ServiceProcess(
            name: "storectl",
            arguments: arguments + ["--gateway", store.gatewayEndpoints[gateway]],
            logFile: store.directory.url.appendingPathComponent("\(name).log")
        )
        // Downloads into the cluster's folder: the tests of this target run at once, and every
        // cluster numbers its transactions alike, so a shared ./storebus-downloads would mix them.
        try process.start(environment: ["STOREBUS_API_KEY": appKey, "STOREBUS_ADMIN_KEY": adminKey, "STOREBUS_DOWNLOAD_DIR": store.directory.path("downloads")])
        let status = await process.waitForExit(timeout: .seconds(60))
        return (status, process.output)
    }

    @Test("storectl demo, buy with Ask to Buy, admin approve, transactions, finish; errors read as sentences")
    func storectlFlows() async throws {
        let store = try StoreCluster()
        try await store.start()

        let (demoStatus, demo) = try await storectl(store, ["demo", "--account", "frank"], name: "demo")
        #expect(demoStatus == 0, "\(demo)")
        #expect(demo.contains("updatedTransactions: ") && demo.contains(" purchasing"))
        #expect(demo.contains(" purchased"))
        #expect(demo.contains("removedTransactions: "))

        let (buyStatus, buy) = try await storectl(store, ["buy", removeAds, "--ask-to-buy", "--account", "gina"], name: "buy")
        #expect(buyStatus == 0, "\(buy)")
        #expect(buy.contains(" deferred"))
        let id = try #require(buy.split(separator: "\n").first { $0.hasPrefix("added transaction ") }?.split(separator: " ")[2]).description

        // A transaction is found by its identifier: a command acting on none takes no --account.
        let (misleadStatus, mislead) = try await storectl(store, ["admin", "approve", "--account", "gina", id], name: "approve-account")
        #expect(misleadStatus != 0 && mislead.contains("--account"), "\(mislead)")
        let (approveStatus, approve) = try await storectl(store, ["admin", "approve", id], name: "approve")
        #expect(approveStatus == 0, "\(approve)")
        #expect(approve.contains("\(id) is now purchased"))

        let (listStatus, list) = try await storectl(store, ["transactions", "--account", "gina"], name: "list")
        #expect(listStatus == 0)
        #expect(list.contains("\(id)  \(removeAds)  purchased"), "\(list)")

        let (finishStatus, finish) = try await storectl(store, ["finish", id, "--account", "gina"], name: "finish")
        #expect(finishStatus == 0, "\(finish)")
        #expect(finish.contains("finished \(id)"))

        // The account's history and ledger, as an admin sees them
        let (historyStatus, history) = try await storectl(store, ["admin", "transactions", "--account", "gina"], name: "history")
        #expect(historyStatus == 0, "\(history)")
        #expect(history.contains("\(id)  storectl  \(removeAds)  purchased  finished"), "\(history)")
        let (chargesStatus, charges) = try await storectl(store, ["admin", "charges", "--account", "gina"], name: "charges")
        #expect(chargesStatus == 0, "\(charges)")
        #expect(charges.split(separator: "\n").filter { $0.contains("  \(id)  \(removeAds)  ") }.count == 1, "\(charges)")
        let (emptyStatus, empty) = try await storectl(store, ["admin", "charges", "--account", "nobody"], name: "no-charges")
        #expect(emptyStatus == 0 && empty.contains("no charges"), "\(empty)")
        // The app's products, as a new client learns their identifiers
        let (productsStatus, products) = try await storectl(store, ["admin", "products"], name: "products")
        #expect(productsStatus == 0, "\(products)")
        #expect(products.contains("\(removeAds)  nonConsumable") && products.contains("\(coins)  consumable"), "\(products)")

        // The demo stops at a deferred purchase and says how to go on.
        let (policyStatus, policy) = try await storectl(store, ["admin", "policy", "--mode", "ask-to-buy", "--account", "kim"], name: "policy")
        #expect(policyStatus == 0, "\(policy)")
        let (deferredStatus, deferred) = try await storectl(store, ["demo", "--account", "kim"], name: "demo-deferred")
        #expect(deferredStatus == 0, "\(deferred)")
        #expect(deferred.contains("is deferred (Ask to Buy)"))

        // A failed purchase is no success: demo and buy say so and exit non-zero (a script can tell).
        let (failStatus, failPolicy) = try await storectl(store, ["admin", "policy", "--mode", "fail", "--fail-error", "payment-cancelled", "--account", "lena"], name: "policy-fail")
        #expect(failStatus == 0, "\(failPolicy)")
        let (failedDemoStatus, failedDemo) = try await storectl(store, ["demo", "--account", "lena"], name: "demo-failed")
        #expect(failedDemoStatus != 0, "\(failedDemo)")
        #expect(failedDemo.contains("the purchase failed") && failedDemo.contains("nothing to deliver") && !failedDemo.contains("done"), "\(failedDemo)")
        let (failedBuyStatus, failedBuy) = try await storectl(store, ["buy", coins, "--finish", "--account", "lena"], name: "buy-failed")
        #expect(failedBuyStatus != 0, "\(failedBuy)")
        #expect(failedBuy.contains("The purchase failed"), "\(failedBuy)")
        // So is a failed restore (under the same policy), and a restore that works exits 0.
        let (failedRestoreStatus, failedRestore) = try await storectl(store, ["restore", "--account", "lena"], name: "restore-failed")
        #expect(failedRestoreStatus != 0, "\(failedRestore)")
        #expect(failedRestore.contains("restoreCompletedTransactionsFailedWithError") && failedRestore.contains("failed: "), "\(failedRestore)")
        let (restoreStatus, restore) = try await storectl(store, ["restore", "--account", "kim"], name: "restore")
        #expect(restoreStatus == 0, "\(restore)")
        #expect(restore.contains("restoreCompletedTransactionsFinished"), "\(restore)")

        // --wait bounds the wait for callbacks: a policy that answers after 3 s outlasts a 1 s wait
        // (a sentence, non-zero) and not a 20 s one.
        let (slowStatus, slowPolicy) = try await storectl(store, ["admin", "policy", "--mode", "approve", "--delay-ms", "3000", "--account", "mia"], name: "policy-slow")
        #expect(slowStatus == 0, "\(slowPolicy)")
        let (impatientStatus, impatient) = try await storectl(store, ["buy", coins, "--account", "mia", "--wait", "1"], name: "buy-impatient")
        #expect(impatientStatus != 0, "\(impatient)")
        #expect(impatient.contains("did not settle within 1 second;"), "\(impatient)")
        let (patientStatus, patient) = try await storectl(store, ["buy", coins, "--finish", "--account", "mia", "--wait", "20"], name: "buy-patient")
        #expect(patientStatus == 0, "\(patient)")
        #expect(patient.contains(" purchased"), "\(patient)")

        // health checks who answers: the gateway at the catalog's endpoint is no catalog; an endpoint
        // that is not one is a sentence, and the other entries are still checked.
        // (The helper adds --gateway: the gateway is checked too.)
        let (healthStatus, health) = try await storectl(
            store,
            [
                "health", "--service", "catalog=\(store.gatewayEndpoints[0])", "--service", "queue=not-an-endpoint"
            ], name: "health")
        #expect(healthStatus != 0, "\(health)")
        #expect(health.contains("catalog not found (storebus-gateway answers there)"), "\(health)")
        #expect(health.contains("queue cannot be checked"), "\(health)")
        #expect(health.contains("gateway serving"), "\(health)")

        // Another account cannot finish it; a wrong key is a sentence, not a stack trace.
        let (otherStatus, other) = try await storectl(store, ["finish", id, "--account", "hank"], name: "other")
        #expect(otherStatus != 0)
        #expect(other.contains("is not an unfinished transaction of account hank"))
        let (keyStatus, key) = try await storectl(store, ["products", coins, "--api-key", "wrong-key-0000000000"], name: "key")
        #expect(keyStatus != 0)
        #expect(key.contains("The gateway refused the credentials"), "\(key)")
        #expect(!key.contains("Fatal error"))

        await store.stop()
    }

    @Test("health through a gateway checks the services behind it: exit 0 only while the catalog and the payment queue answer too")
    func healthBehindTheGateway() async throws {
        let store = try StoreCluster()
        try await store.start()

        // Given the whole system running, a check of the gateway alone passes and names what it asked.
        let (status, health) = try await storectl(store, ["health"], name: "health-all")
        #expect(status == 0, "\(health)")
        #expect(health.contains("gateway serving at \(store.gatewayEndpoints[0])"), "\(health)")
        #expect(health.contains("catalog behind it serving (storebus-catalog "), "\(health)")
        #expect(health.contains("payment-queue behind it serving (storebus-payment-queue "), "\(health)")

        // When the payment queue stops, the gateway still answers, but the check fails and says why.
        _ = await store.queue.stop()
        let (downStatus, down) = try await storectl(store, ["health"], name: "health-queue-down")
        #expect(downStatus != 0, "\(down)")
        #expect(down.contains("gateway serving at"), "\(down)")
        #expect(down.contains("catalog behind it serving"), "\(down)")
        #expect(down.contains("payment-queue behind it not serving: "), "\(down)")
        // A check naming a service the gateway forwards to answers with that service's status.
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [store.gatewayEndpoints[0]]))
        let queueHealth = try await client.call(Storebus_Health_V1_Health.check, .with { $0.service = Storebus_PaymentQueue_V1_PaymentQueueAdmin.serviceName })
        #expect(queueHealth.status == .notServing && queueHealth.upstreams.map(\.name) == ["payment-queue"])
        let catalogHealth = try await client.call(Storebus_Health_V1_Health.check, .with { $0.service = Storebus_Catalog_V1_Catalog.serviceName })
        #expect(catalogHealth.status == .serving && catalogHealth.process == "storebus-gateway")

        // Then, once it is back and the gateway has reconnected to it, the check passes again.
        try store.queue.start()
        try await store.queue.waitUntilServing(endpoint: store.directory.ipcEndpoint("pq"))
        #expect(await waitUntil { (try? await client.call(Storebus_Health_V1_Health.check, .init()))?.upstreams.allSatisfy { $0.status == .serving } == true })
        let (backStatus, back) = try await storectl(store, ["health"], name: "health-back")
        #expect(backStatus == 0, "\(back)")

        await client.shutdown()
        await store.stop()
    }

    @Test("storectl watch prints each callback as it arrives, says on standard error when its gateway is gone and when it is back, and misses nothing meanwhile")
    func watchPrintsTheStream() async throws {
        let store = try StoreCluster()
        try await store.start()
        let keys = ["STOREBUS_API_KEY": appKey, "STOREBUS_ADMIN_KEY": adminKey]
        // Given a watch of wendy's device through the first gateway alone, stopping after the launch
        // replay's end and two purchases' three callbacks each
        let watch = ServiceProcess(
            name: "storectl", arguments: ["watch", "--account", "wendy", "--count", "7", "--timeout", "2", "--gateway", store.gatewayEndpoints[0]],
            logFile: store.directory.url.appendingPathComponent("watch.log")
        )
        try watch.start(environment: keys)
        #expect(await waitUntil { watch.output.contains("replay complete: 0 unfinished transactions") }, "\(watch.output)")

        // When the device buys and finishes, the watch prints each callback live
        let (buyStatus, buy) = try await storectl(store, ["buy", coins, "--finish", "--account", "wendy"], name: "watch-buy")
        #expect(buyStatus == 0, "\(buy)")
        #expect(await waitUntil { watch.output.contains("removedTransactions: ") }, "\(watch.output)")
        #expect(watch.isRunning)

        // When its gateway is killed, it says so on standard error and keeps trying
        await store.gateways[0].kill()
        #expect(await waitUntil(timeout: .seconds(20)) { watch.output.contains("storectl: the observer stream is interrupted (") }, "\(watch.output)")
        // And a purchase made meanwhile through the other gateway reaches it once its gateway is back
        let (otherStatus, other) = try await storectl(store, ["buy", coins, "--finish", "--account", "wendy"], name: "watch-buy-other", gateway: 1)
        #expect(otherStatus == 0, "\(other)")
        try await store.startGateway(0)
        #expect(await watch.waitForExit(timeout: .seconds(30)) == 0, "\(watch.output)")
        #expect(watch.output.contains("storectl: the observer stream is back"), "\(watch.output)")

        // Then it printed the seven callbacks, at consecutive positions after the replay's, none twice
        let lines = watch.output.split(separator: "\n").filter { $0.hasPrefix("[") }
        let positions = lines.compactMap { line in line.dropFirst().split(separator: "]").first.flatMap { UInt64($0) } }
        #expect(lines.count == 7 && positions.count == 7, "\(watch.output)")
        #expect(positions.count == 7 && positions == Array(positions[0]...(positions[0] + 6)), "\(positions)")
        #expect(lines.filter { $0.hasSuffix(" purchased") && $0.contains("updatedTransactions: ") }.count == 2, "\(watch.output)")
        #expect(lines.filter { $0.contains("removedTransactions: ") }.count == 2, "\(watch.output)")
        await store.stop()
    }

    @Test("Observe never sends more than the credit granted, holds the call while nothing happens, and refuses positions past the head")
    func creditAndHold() async throws {
        let store = try StoreCluster()
        try await store.start()
        let queue = try PaymentQueue(configuration: store.configuration(account: "ivan"))
        let connection = queue.connection
        var transactions: [PaymentTransaction] = []
        for _ in 0..<6 { transactions.append(try await queue.addPayment(Payment(productIdentifier: coins))) }
        let ids = transactions.map(\.id)

        // Wait until every purchase is decided (the authority may decide several in one event).
        let head = Mutex<UInt64>(0)
        let settled = await waitUntil {
            guard
                let page = try? await connection.call(
                    Storebus_Gateway_V1_Gateway.observe,
                    .with {
                        $0.afterSeq = 0; $0.credit = 500
                    })
            else { return false }
            let purchased = Set(page.events.flatMap(\.updatedTransactions.transactions).filter { $0.transactionState == .purchased }.map(\.transactionIdentifier))
            head.withLock { $0 = page.headSeq }
            return purchased == Set(ids)
        }
        #expect(settled)
        let last = head.withLock { $0 }
        #expect(last >= 7, "six additions and at least one decision")

        // Credit 5: at most five callbacks an answer, consecutive, and the head says what is waiting.
        var position: UInt64 = 0
        var seen: [UInt64] = []
        while position < last {
            let page = try await connection.call(
                Storebus_Gateway_V1_Gateway.observe,
                .with {
                    $0.afterSeq = position
                    $0.credit = 5
                })
            #expect(page.events.count <= 5)
            #expect(page.headSeq == last)
            seen += page.events.map(\.seq)
            position = page.events.last?.seq ?? position
        }
        #expect(seen == Array(1...last))

        // Nothing new: the call is held for its wait, then answered empty.
        let started = ContinuousClock.now
        let idle = try await connection.call(
            Storebus_Gateway_V1_Gateway.observe,
            .with {
                $0.afterSeq = last
                $0.waitMs = 400
            })
        #expect(idle.events.isEmpty)
        #expect(started.duration(to: .now) >= .milliseconds(350))

        // A held call answers as soon as the queue changes.
        let held = Task {
            try await connection.call(
                Storebus_Gateway_V1_Gateway.observe,
                .with {
                    $0.afterSeq = last
                    $0.waitMs = 10_000
                })
        }
        try await Task.sleep(for: .milliseconds(200))
        let heldStart = ContinuousClock.now
        try await queue.finish(transactions[0])
        let woke = try await held.value
        #expect(woke.events.first?.seq == last + 1)
        #expect(heldStart.duration(to: .now) < .seconds(5))

        // Past the head: OUT_OF_RANGE; too much credit: INVALID_ARGUMENT naming the field.
        do {
            _ = try await connection.call(Storebus_Gateway_V1_Gateway.observe, .with { $0.afterSeq = 99 })
            Issue.record("a position past the head was accepted")
        } catch let error as StoreError {
            #expect(error.status == .outOfRange)
        }
        // So are positions past any the log can hold, up to UInt64.max: once, one crashed the gateway
        // (its kept events) and another the payment queue (binding it to SQLite). Both answer on below.
        for huge in [UInt64(Int64.max), UInt64(Int64.max) + 1, .max - 1, .max] {
            do {
                _ = try await connection.call(Storebus_Gateway_V1_Gateway.observe, .with { $0.afterSeq = huge })
                Issue.record("position \(huge) was accepted")
            } catch let error as StoreError {
                #expect(error.status == .outOfRange, "position \(huge): \(error)")
            }
        }
        do {
            _ = try await connection.call(
                Storebus_Gateway_V1_Gateway.observe,
                .with {
                    $0.afterSeq = 1; $0.credit = 501
                })
            Issue.record("credit over the limit was accepted")
        } catch let error as StoreError {
            #expect(error.status == .invalidArgument && error.message.contains("credit"))
        }
        // A replay answer holds two callbacks: a credit of 1 cannot take it.
        do {
            _ = try await connection.call(
                Storebus_Gateway_V1_Gateway.observe,
                .with {
                    $0.replay = true; $0.credit = 1
                })
            Issue.record("a replay with credit 1 was accepted")
        } catch let error as StoreError {
            #expect(error.status == .invalidArgument && error.message.contains("credit"))
        }

        // One queue holds at most eight parked calls on a gateway: the ninth is answered at once, while
        // another account's call is still held.
        let now = last + 1
        let first = try StoreConnection(configuration: store.configuration(account: "ivan", gateways: [0]))
        let parked = (0..<8).map { _ in
            Task {
                try await first.call(
                    Storebus_Gateway_V1_Gateway.observe,
                    .with {
                        $0.afterSeq = now; $0.waitMs = 5_000
                    })
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let ninthStart = ContinuousClock.now
        let ninth = try await first.call(
            Storebus_Gateway_V1_Gateway.observe,
            .with {
                $0.afterSeq = now; $0.waitMs = 5_000
            })
        #expect(ninth.events.isEmpty)
        #expect(ninthStart.duration(to: .now) < .seconds(2), "answered at once, not held")
        let other = try PaymentQueue(configuration: store.configuration(account: "judy", gateways: [0]))
        let otherStart = ContinuousClock.now
        let otherIdle = try await other.connection.call(
            Storebus_Gateway_V1_Gateway.observe,
            .with {
                $0.afterSeq = 0; $0.waitMs = 400
            })
        #expect(otherIdle.events.isEmpty)
        #expect(otherStart.duration(to: .now) >= .milliseconds(350), "another queue's call is still held")
        for call in parked { call.cancel() }
        await first.close()
        await other.close()

        // An SDK granting a credit of 1 still gets its launch replay (it asks for 2 for that call).
        var stingy = store.configuration(account: "kate")
        stingy.observerCredit = 1
        let oneByOne = try PaymentQueue(configuration: stingy)
        let recorder = Recorder(oneByOne)
        #expect(await recorder.attached())
        recorder.cancel()
        await oneByOne.close()
        await queue.close()
        await store.stop()
    }
}

@Suite("storectl and CURVE: key files, and a gateway whose client endpoint is encrypted")
struct StorectlCurveTests {
    @Test("keys make writes each service's key pair once (0600) and its public key, keys show prints and checks them; a CURVE gateway answers storectl with its public key, and nothing without it")
    func keysAndCurveGateway() async throws {
        let store = try StoreCluster(gatewayCount: 1, gatewaysOnTCP: true, gatewayKeys: true)
        try await store.start()
        let keys = store.directory.path("made-keys")
        func storectl(_ arguments: [String], _ name: String) async throws -> (Int32?, String) {
            let process = ServiceProcess(name: "storectl", arguments: arguments, logFile: store.directory.url.appendingPathComponent("\(name).log"))
            try process.start(environment: ["STOREBUS_API_KEY": appKey, "STOREBUS_ADMIN_KEY": adminKey, "STOREBUS_DOWNLOAD_DIR": store.directory.path("downloads")])
            return (await process.waitForExit(timeout: .seconds(60)), process.output)
        }

        // Given every service's key pair made, and made again only where missing
        let (madeStatus, made) = try await storectl(["keys", "make", "--dir", keys], "keys-make")
        #expect(madeStatus == 0, "\(made)")
        for service in ServiceRegistry.all.map(\.name) {
            #expect(made.contains("\(service) made "), "\(made)")
            #expect(try FileManager.default.attributesOfItem(atPath: "\(keys)/\(service).key")[.posixPermissions] as? Int == 0o600)
        }
        let (againStatus, again) = try await storectl(["keys", "make", "--dir", keys, "catalog"], "keys-make-again")
        #expect(againStatus != 0 && again.contains("exists already"), "\(again)")
        let (keptStatus, kept) = try await storectl(["keys", "make", "--dir", keys, "--if-missing", "catalog", "extra"], "keys-make-missing")
        #expect(keptStatus == 0 && kept.contains("catalog kept ") && kept.contains("extra made "), "\(kept)")
        // Then show prints every public key, and fails on a key pair others may read
        let (showStatus, show) = try await storectl(["keys", "show", "--dir", keys], "keys-show")
        #expect(showStatus == 0 && show.components(separatedBy: " key pair, public ").count == ServiceRegistry.all.count + 2, "\(show)")
        chmod("\(keys)/extra.key", 0o644)
        let (looseStatus, loose) = try await storectl(["keys", "show", "--dir", keys, "extra"], "keys-show-loose")
        #expect(looseStatus != 0 && loose.contains("chmod 600"), "\(loose)")

        // When storectl talks to the CURVE gateway with its public key, a purchase goes through
        let gateway = store.gatewayEndpoints[0]
        let (demoStatus, demo) = try await storectl(["demo", "--gateway", gateway, "--gateway-key", store.gatewayPublicKeyFile!, "--account", "curve"], "demo-curve")
        #expect(demoStatus == 0 && demo.contains(" purchased"), "\(demo)")
        // And without the key, or with another, it gets no answer
        let (plainStatus, plain) = try await storectl(["products", "com.storebus.demo.puzzle.coins100", "--gateway", gateway, "--timeout", "2"], "products-plain")
        #expect(plainStatus != 0, "\(plain)")
        let (wrongStatus, wrong) = try await storectl(
            ["products", "com.storebus.demo.puzzle.coins100", "--gateway", gateway, "--gateway-key", "\(keys)/gateway.pub", "--timeout", "2"], "products-wrong-key")
        #expect(wrongStatus != 0, "\(wrong)")
        let (healthStatus, health) = try await storectl(["health", "--gateway", gateway, "--gateway-key", store.gatewayPublicKeyFile!], "health-curve")
        #expect(healthStatus == 0 && health.contains("download behind it serving"), "\(health)")

        await store.stop()
    }
}
