import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

@Suite("Payment queue, against the real storebus-payment-queue and storebus-catalog processes")
struct PaymentQueueProcessTests {
    func add(
        _ client: RPCClient, _ queue: Storebus_PaymentQueue_V1_QueueRef, _ product: String, quantity: Int32 = 1, storefront: String = "FRA", key: String = ""
    ) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
            .with {
                $0.queue = queue
                $0.payment = .with {
                    $0.productIdentifier = product; $0.quantity = quantity
                }
                $0.storefront = storefront
                $0.idempotencyKey = key
            }
        ).transaction
    }

    @Test("a purchase goes purchasing -> purchased; the app delivers, finishes, and the transaction is removed from the queue")
    func purchaseAndFinish() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let queue = queueRef()
        let observed = Observed()
        let follower = try fixture.follower(queue, client: client)
        let observing = Task { try await follower.follow(after: 0) { try observed.append($0) } }

        // When the app adds a payment for coins
        let added = try await add(client, queue, coins)
        // Then the payment queue answers with a purchasing transaction with a numeric identifier
        #expect(added.transactionState == .purchasing)
        #expect(UInt64(added.transactionIdentifier) != nil)
        // And the observer sees it purchasing, then purchased
        #expect(await waitUntil { observed.states(of: added.transactionIdentifier) == ["purchasing", "purchased"] })
        // And the unfinished transaction stays in the queue (it comes back at every launch) until finished
        let pending = try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue })
        #expect(pending.transactions.map(\.transactionIdentifier) == [added.transactionIdentifier])
        // When the app finishes it
        let finished = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction,
            .with {
                $0.queue = queue; $0.transactionIdentifier = added.transactionIdentifier
            })
        #expect(!finished.alreadyFinished)
        // Then it is removed and never listed again; finishing again is OK
        #expect(await waitUntil { observed.states(of: added.transactionIdentifier).last == "removed" })
        #expect(try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.isEmpty)
        #expect(
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction,
                .with {
                    $0.queue = queue; $0.transactionIdentifier = added.transactionIdentifier
                }
            ).alreadyFinished)
        // And the ledger has one charge in euros
        let charges = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
            .with {
                $0.appBundleID = puzzle; $0.accountID = "alice"
            }
        ).charges
        #expect(charges.map(\.amount) == ["0.99"] && charges.first?.currencyCode == "EUR")
        observing.cancel()
        await follower.shutdown()
        await client.shutdown()
        await fixture.stop()
    }

    @Test("unknown, not cleared and unpriced products fail with storeProductNotAvailable; bad quantities and unknown apps are call errors")
    func invalidPayments() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let queue = queueRef()
        for product in ["com.storebus.demo.puzzle.nope", "com.storebus.demo.puzzle.retired", "com.storebus.demo.puzzle.usonly"] {
            let failed = try await add(client, queue, product)
            #expect(failed.transactionState == .failed)
            #expect(failed.error.code == .storeProductNotAvailable)
        }
        let tooMany = await #expect(throws: RPCError.self) { _ = try await add(client, queue, coins, quantity: 11) }
        #expect(tooMany?.details.fieldViolations.first?.field == "payment.quantity")
        let notConsumable = await #expect(throws: RPCError.self) { _ = try await add(client, queue, levelPack, quantity: 2) }
        #expect(notConsumable?.code == .invalidArgument)
        let three = try await add(client, queue, coins, quantity: 3)
        #expect(three.payment.quantity == 3)
        // Fields every event of the transaction carries are bounded.
        let longName = await #expect(throws: RPCError.self) {
            _ = try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
                .with {
                    $0.queue = queue
                    $0.payment = .with {
                        $0.productIdentifier = coins; $0.applicationUsername = String(repeating: "u", count: 1025)
                    }
                })
        }
        #expect(longName?.details.fieldViolations.first?.field == "payment.applicationUsername")
        let bigData = await #expect(throws: RPCError.self) {
            _ = try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
                .with {
                    $0.queue = queue
                    $0.payment = .with {
                        $0.productIdentifier = coins; $0.requestData = Data(count: 4097)
                    }
                })
        }
        #expect(bigData?.details.fieldViolations.first?.field == "payment.requestData")
        let restoreName = await #expect(throws: RPCError.self) {
            _ = try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions,
                .with {
                    $0.queue = queue
                    $0.applicationUsername = String(repeating: "u", count: 1025)
                })
        }
        #expect(restoreName?.details.fieldViolations.first?.field == "applicationUsername")
        // An unknown product makes a FAILED transaction carrying its identifier: bounded as the
        // catalog's are. So are idempotency keys, in the field or the metadata.
        let longest = try await add(client, queue, String(repeating: "p", count: 255))
        #expect(longest.transactionState == .failed && longest.error.code == .storeProductNotAvailable)
        let longProduct = await #expect(throws: RPCError.self) { _ = try await add(client, queue, String(repeating: "p", count: 256)) }
        #expect(longProduct?.details.fieldViolations.first?.field == "payment.productIdentifier")
        let longKey = await #expect(throws: RPCError.self) {
            _ = try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
                .with {
                    $0.queue = queue
                    $0.payment = .with { $0.productIdentifier = coins }
                    $0.idempotencyKey = String(repeating: "k", count: 129)
                })
        }
        #expect(longKey?.details.fieldViolations.first?.field == "idempotencyKey")
        let longMetadataKey = await #expect(throws: RPCError.self) {
            _ = try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions, .with { $0.queue = queue },
                options: CallOptions(metadata: [WireProtocol.idempotencyKeyMetadata: String(repeating: "k", count: 129)]))
        }
        #expect(longMetadataKey?.details.fieldViolations.first?.field == "idempotency-key")
        var unknownApp = queue
        unknownApp.appBundleID = "com.example.nobody"
        let notFound = await #expect(throws: RPCError.self) { _ = try await add(client, unknownApp, coins) }
        #expect(notFound?.code == .notFound)
        #expect(
            await waitUntil {
                (try? await client.call(
                    Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                    .with {
                        $0.appBundleID = puzzle; $0.accountID = "alice"
                    }
                ).charges.map(\.amount)) == ["2.97"]
            })
        await client.shutdown()
        await fixture.stop()
    }

    @Test("an idempotency key returns the same transaction and never charges twice; reused for another payment it is FAILED_PRECONDITION")
    func idempotencyKeys() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let queue = queueRef()
        let first = try await add(client, queue, coins, key: "order-1")
        let retried = try await add(client, queue, coins, key: "order-1")
        #expect(retried.transactionIdentifier == first.transactionIdentifier)
        // The key may also travel as metadata, as the RPC layer's retries use it
        let viaMetadata = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
            .with {
                $0.queue = queue
                $0.payment = .with {
                    $0.productIdentifier = coins; $0.quantity = 1
                }
                $0.storefront = "FRA"
            }, options: CallOptions(idempotencyKey: "order-1"))
        #expect(viaMetadata.transaction.transactionIdentifier == first.transactionIdentifier)
        let reused = await #expect(throws: RPCError.self) { _ = try await add(client, queue, levelPack, key: "order-1") }
        #expect(reused?.code == .failedPrecondition)
        #expect(
            await waitUntil {
                (try? await client.call(
                    Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                    .with {
                        $0.appBundleID = puzzle; $0.accountID = "alice"
                    }
                ).charges.count) == 1
            })
        await client.shutdown()
        await fixture.stop()
    }

    @Test("a retry under an idempotency key gets its transaction or restore while the catalog is down; a new payment or restore does not")
    func idempotentRetryWithoutCatalog() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let queue = queueRef()
        func restore(_ key: String, _ queue: Storebus_PaymentQueue_V1_QueueRef) async throws -> Storebus_PaymentQueue_V1_RestoreCompletedTransactionsResponse {
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions,
                .with {
                    $0.queue = queue; $0.idempotencyKey = key
                })
        }
        let first = try await add(client, queue, coins, key: "order-7")
        let firstRestore = try await restore("restore-7", queue)
        await fixture.catalog.stop()
        try await Task.sleep(for: .milliseconds(1_500)) // past the payment queue's one-second catalog cache
        // Each call waits for the catalog until its own deadline: all at once, then.
        func failure(_ call: () async throws -> Void) async -> StatusCode? {
            do { try await call(); return nil } catch { return (error as? RPCError)?.code }
        }
        async let retried = add(client, queue, coins, key: "order-7")
        async let fresh = failure { _ = try await add(client, queue, coins, key: "order-8") }
        async let retriedRestore = restore("restore-7", queue)
        async let elsewhere = failure { _ = try await restore("restore-7", queueRef(device: "tablet")) }
        async let freshRestore = failure { _ = try await restore("restore-8", queue) }
        #expect(try await retried.transactionIdentifier == first.transactionIdentifier)
        #expect(try await retriedRestore.restoreID == firstRestore.restoreID)
        for code in [await fresh, await freshRestore] {
            #expect(code == .unavailable || code == .deadlineExceeded, "\(String(describing: code))")
        }
        #expect(await elsewhere == .failedPrecondition)
        await client.shutdown()
        await fixture.stop()
    }

    @Test("Ask to Buy: deferred until a parent approves (purchased) or declines (failed); a deferred transaction cannot be finished")
    func askToBuy() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let queue = queueRef(account: "child")
        try await client.setPolicy(account: "child", .with { $0.mode = .askToBuy })
        let asked = try await add(client, queue, levelPack)
        #expect(
            await waitUntil {
                (try? await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.first?.transactionState) == .deferred
            })
        let early = await #expect(throws: RPCError.self) {
            _ = try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction,
                .with {
                    $0.queue = queue; $0.transactionIdentifier = asked.transactionIdentifier
                })
        }
        #expect(early?.code == .failedPrecondition)
        let approved = try await client.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.approveAskToBuy, .with { $0.transactionIdentifier = asked.transactionIdentifier })
        #expect(approved.transaction.transactionState == .purchased)
        let second = try await add(client, queue, coins)
        _ = await waitUntil {
            (try? await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.last?.transactionState) == .deferred
        }
        let declined = try await client.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.declineAskToBuy, .with { $0.transactionIdentifier = second.transactionIdentifier })
        #expect(declined.transaction.transactionState == .failed && declined.transaction.error.code == .paymentCancelled)
        await client.shutdown()
        await fixture.stop()
    }

    @Test("an account with purchase restrictions cannot make payments, and its payments fail with paymentNotAllowed")
    func restrictedAccount() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        #expect(
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "kid"
                }
            ).canMakePayments)
        try await client.setPolicy(
            account: "kid",
            .with {
                $0.mode = .approve; $0.purchasesRestricted = true
            })
        #expect(
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "kid"
                }
            ).canMakePayments == false)
        let refused = try await add(client, queueRef(account: "kid"), coins)
        #expect(refused.transactionState == .failed && refused.error.code == .paymentNotAllowed)
        await client.shutdown()
        await fixture.stop()
    }

    @Test("killed with SIGKILL while a purchase is still purchasing, the restarted service completes it: nothing stays purchasing")
    func purchasingSurvivesKill() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let queue = queueRef()
        // Given a policy that decides two seconds after the payment
        try await client.setPolicy(
            account: "alice",
            .with {
                $0.mode = .approve; $0.delayMs = 2_000
            })
        let added = try await add(client, queue, coins, key: "before-the-crash")
        #expect(added.transactionState == .purchasing)
        // When the service is killed before deciding, and restarted
        await fixture.queue.kill()
        try await fixture.startQueue()
        // Then the purchase completes, once, and a retry with the key finds it
        #expect(
            await waitUntil(timeout: .seconds(15)) {
                (try? await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.first?.transactionState) == .purchased
            })
        #expect(try await add(client, queue, coins, key: "before-the-crash").transactionIdentifier == added.transactionIdentifier)
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

    @Test("a product is sold under its own spelling only: a canonically equivalent one (the Kelvin sign for K) is an unknown product, even just after the real one was looked up")
    func productSpellingIsExact() async throws {
        let source = deployDirectory.appendingPathComponent("catalog/catalog.json")
        let kit = "com.storebus.demo.puzzle.Kit"
        let fixture = try PaymentQueueFixture(catalogFile: { directory in
            // The sample catalog with one more product, whose identifier holds a K.
            var catalog = try JSONSerialization.jsonObject(with: Data(contentsOf: source)) as! [String: Any]
            var apps = catalog["apps"] as! [[String: Any]]
            var products = (apps[0]["products"] as! [[String: Any]]).filter { $0["hostedContent"] == nil }
            products.append([
                "productId": kit, "type": "nonConsumable", "prices": ["USA": "0.99", "FRA": "0.99", "JPN": "120"],
                "localizations": ["en_US": ["title": "Kit", "description": ""]]
            ])
            apps[0]["products"] = products
            catalog["apps"] = Array(apps.prefix(1))
            let path = directory.path("catalog.json")
            try JSONSerialization.data(withJSONObject: catalog).write(to: URL(fileURLWithPath: path))
            return path
        })
        try await fixture.start()
        let client = try fixture.client()
        let queue = queueRef()
        // Given the product bought under its own spelling (its catalog answer now kept)
        let bought = try await add(client, queue, kit)
        #expect(bought.payment.productIdentifier == kit)
        // When it is asked for with the Kelvin sign, which Swift takes for the same string
        let kelvin = "com.storebus.demo.puzzle.\u{212A}it"
        #expect(kelvin == kit)
        let other = try await add(client, queue, kelvin)
        // Then that payment fails as for a product the store does not sell
        #expect(other.transactionState == .failed && other.error.code == .storeProductNotAvailable, "\(other.transactionState)")
        await client.shutdown()
        await fixture.stop()
    }

    @Test("a reloaded catalog's price applies to payments once the payment queue's kept answer has expired")
    func catalogReloadReachesPayments() async throws {
        // The sample catalog, copied so that it can change, with its hosted content still found.
        let source = deployDirectory.appendingPathComponent("catalog/catalog.json")
        func writeCatalog(to path: String, coinsInFrance price: String) throws {
            var catalog = try JSONSerialization.jsonObject(with: Data(contentsOf: source)) as! [String: Any]
            var apps = catalog["apps"] as! [[String: Any]]
            for (appIndex, app) in apps.enumerated() {
                var products = app["products"] as! [[String: Any]]
                for (index, product) in products.enumerated() {
                    var product = product
                    if product["productId"] as? String == coins {
                        var prices = product["prices"] as! [String: String]
                        prices["FRA"] = price
                        product["prices"] = prices
                    }
                    products[index] = product
                }
                apps[appIndex]["products"] = products
            }
            catalog["apps"] = apps
            try JSONSerialization.data(withJSONObject: catalog).write(to: URL(fileURLWithPath: path))
        }
        let fixture = try PaymentQueueFixture(
            catalogFile: { directory in
                let path = directory.path("catalog.json")
                try writeCatalog(to: path, coinsInFrance: "0.99")
                return path
            },
            queueArguments: ["--catalog-cache-ms", "300"]
        )
        try await fixture.start()
        let client = try fixture.client()
        let catalogClient = try RPCClient(configuration: ClientConfiguration(endpoints: [fixture.catalogEndpoint]), context: PaymentQueueFixture.context)
        let queue = queueRef()
        func charged() async throws -> [String] {
            try await client.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                .with {
                    $0.appBundleID = puzzle; $0.accountID = "alice"
                }
            ).charges.map(\.amount)
        }

        // Given a payment at the first price (its answer is now kept by the payment queue)
        _ = try await add(client, queue, coins)
        #expect(await waitUntil { (try? await charged()) == ["0.99"] })
        // When the catalog is reloaded with a new price
        try writeCatalog(to: fixture.directory.path("catalog.json"), coinsInFrance: "1.49")
        let reloaded = try await catalogClient.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .init())
        #expect(reloaded.changed)
        // Then a payment made after the kept answer's 300 ms is charged the new price
        try await Task.sleep(for: .milliseconds(400))
        _ = try await add(client, queue, coins)
        #expect(await waitUntil { (try? await charged()) == ["0.99", "1.49"] })
        await catalogClient.shutdown()
        await client.shutdown()
        await fixture.stop()
    }
}
