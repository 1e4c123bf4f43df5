import Catalog
import CatalogFormat
import Foundation
import Glibc
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

/// A no-break space, as CLDR puts between a French price and its currency symbol.
let nbsp = "\u{00A0}"

@Suite("Catalog service, against the real storebus-catalog process")
struct CatalogServiceTests {
    func fetch(_ client: RPCClient, app: String = puzzle, _ identifiers: [String], storefront: String = "") async throws -> Storebus_Catalog_V1_FetchProductsResponse {
        try await client.call(
            Storebus_Catalog_V1_Catalog.fetchProducts,
            .with {
                $0.appBundleID = app
                $0.productIdentifiers = identifiers
                $0.storefront = storefront
            })
    }

    @Test("products and invalid identifiers, as SKProductsResponse: unknown, not cleared for sale, unpriced in the storefront, empty; repeats answered once")
    func validAndInvalidIdentifiers() async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let client = try catalog.client()
        // Given a request mixing valid and invalid identifiers, in the French storefront
        let response = try await fetch(client, [coins, "com.storebus.demo.puzzle.nope", retired, usOnly, "", coins, levelPack, "com.storebus.demo.puzzle.nope"], storefront: "FRA")
        // Then the sellable ones come back in request order, once each
        #expect(response.products.map(\.productIdentifier) == [coins, levelPack])
        // And every other identifier is invalid, once each, in request order
        #expect(response.invalidProductIdentifiers == ["com.storebus.demo.puzzle.nope", retired, usOnly, ""])
        #expect(response.storefront == "FRA")
        // The US-only product is valid in its own storefront
        let us = try await fetch(client, [usOnly], storefront: "USA")
        #expect(us.products.map(\.productIdentifier) == [usOnly])
        await client.shutdown()
        await catalog.stop()
    }

    @Test(
        "titles and prices follow the storefront, whatever the caller's locale",
        arguments: [
            ("FRA", "100 pièces", "0.99", "EUR", "fr_FR", "0,99\u{00A0}€"),
            ("JPN", "コイン100枚", "120", "JPY", "ja_JP", "¥120"),
            ("USA", "100 Coins", "0.99", "USD", "en_US", "$0.99")
        ])
    func localizedPricing(storefront: String, title: String, price: String, currency: String, locale: String, formatted: String) async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let client = try catalog.client()
        let product = try #require(try await fetch(client, [coins], storefront: storefront).products.first)
        #expect(product.localizedTitle == title)
        #expect(!product.localizedDescription.isEmpty)
        #expect(product.price == price)
        #expect(product.currencyCode == currency)
        #expect(product.priceLocale == locale)
        #expect(product.formattedPrice == formatted)
        await client.shutdown()
        await catalog.stop()
    }

    @Test("a product without the storefront's localization falls back to the app's default locale; the app's default storefront applies when none is named")
    func fallbacks() async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let client = try catalog.client()
        // The sticker refill has en_US and ja_JP texts only
        let french = try #require(try await fetch(client, app: notes, ["com.storebus.demo.notes.stickers"], storefront: "FRA").products.first)
        #expect(french.localizedTitle == "Sticker Refill")
        #expect(french.formattedPrice == "0,99\(nbsp)€")
        // Field Notes' default storefront is FRA
        let defaulted = try await fetch(client, app: notes, ["com.storebus.demo.notes.pro"])
        #expect(defaulted.storefront == "FRA")
        #expect(defaulted.products.first?.price == "5.49")
        await client.shutdown()
        await catalog.stop()
    }

    @Test("every product type carries its StoreKit fields")
    func productFields() async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let client = try catalog.client()
        let response = try await fetch(client, [coins, levelPack, removeAds, monthly, yearly, seasonPass], storefront: "JPN")
        let byID = Dictionary(uniqueKeysWithValues: response.products.map { ($0.productIdentifier, $0) })
        #expect(byID[coins]?.productType == .consumable)
        #expect(byID[coins]?.isDownloadable == false)

        let pack = try #require(byID[levelPack])
        #expect(pack.productType == .nonConsumable)
        #expect(pack.isDownloadable)
        #expect(pack.downloadContentVersion == "1.0")
        // The package: each file's header block and its bytes in whole 512-byte blocks, then two zero blocks
        #expect(pack.downloadContentLengths == [512 + 27136 + 512 + 57344 + 1024])

        #expect(byID[removeAds]?.isFamilyShareable == true)

        let month = try #require(byID[monthly])
        #expect(month.productType == .autoRenewableSubscription)
        #expect(month.subscriptionPeriod.unit == .month && month.subscriptionPeriod.numberOfUnits == 1 && month.subscriptionPeriod.iso8601 == "P1M")
        #expect(month.subscriptionGroupIdentifier == "puzzle.premium")
        #expect(month.introductoryPrice.paymentMode == .freeTrial)
        #expect(month.introductoryPrice.price == "0")
        #expect(month.introductoryPrice.subscriptionPeriod.iso8601 == "P1W")

        let year = try #require(byID[yearly])
        #expect(year.subscriptionPeriod.unit == .year)
        #expect(year.introductoryPrice.paymentMode == .payUpFront)
        #expect(year.introductoryPrice.formattedPrice == "¥1,200")
        #expect(year.introductoryPrice.numberOfPeriods == 1)

        #expect(byID[seasonPass]?.productType == .nonRenewingSubscription)
        #expect(byID[seasonPass]?.hasSubscriptionPeriod == false)
        await client.shutdown()
        await catalog.stop()
    }

    @Test("bad input: unknown app is NOT_FOUND, more than 1,000 identifiers, an unknown storefront and names too long to be any are INVALID_ARGUMENT naming them")
    func badInput() async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let client = try catalog.client()
        let unknownApp = await #expect(throws: RPCError.self) { _ = try await fetch(client, app: "com.example.nobody", [coins]) }
        #expect(unknownApp?.code == .notFound)
        #expect(unknownApp?.details.resource.resourceName == "com.example.nobody")

        let tooMany = await #expect(throws: RPCError.self) { _ = try await fetch(client, (0...1000).map { "p\($0)" }) }
        #expect(tooMany?.code == .invalidArgument)
        #expect(tooMany?.details.fieldViolations.first?.field == "productIdentifiers")
        // Exactly 1,000 is fine
        #expect(try await fetch(client, (0..<1000).map { "p\($0)" }).invalidProductIdentifiers.count == 1000)

        let storefront = await #expect(throws: RPCError.self) { _ = try await fetch(client, [coins], storefront: "ATL") }
        #expect(storefront?.code == .invalidArgument)
        #expect(storefront?.details.fieldViolations.first?.field == "storefront")
        #expect(storefront?.message.contains("ATL") == true)

        // Names no catalog holds, a megabyte long, are refused without being repeated back (three
        // times over, the answer would pass the message limit)
        let huge = String(repeating: "x", count: 1024 * 1024)
        let longApp = await #expect(throws: RPCError.self) { _ = try await fetch(client, app: huge, [coins]) }
        #expect(longApp?.code == .invalidArgument && longApp?.details.fieldViolations.first?.field == "appBundleId", "\(String(describing: longApp?.code))")
        let longStorefront = await #expect(throws: RPCError.self) { _ = try await fetch(client, [coins], storefront: huge) }
        #expect(longStorefront?.code == .invalidArgument && longStorefront?.details.fieldViolations.first?.field == "storefront", "\(String(describing: longStorefront?.code))")
        #expect((longStorefront?.message.utf8.count ?? .max) < 1024)
        await client.shutdown()
        await catalog.stop()
    }

    @Test("lookups for other services: type, sale status, price in the storefront, hosted content, catalog version")
    func lookups() async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let client = try catalog.client()
        let response = try await client.call(
            Storebus_Catalog_V1_Catalog.lookupProducts,
            .with {
                $0.appBundleID = puzzle
                $0.productIdentifiers = [levelPack, retired, usOnly, "com.storebus.demo.puzzle.nope"]
                $0.storefront = "FRA"
            })
        let info = try await client.call(Storebus_Catalog_V1_Catalog.getCatalogInfo, .init())
        #expect(response.catalogVersion == info.catalogVersion && info.catalogVersion != 0)
        #expect(response.unknownProductIdentifiers == ["com.storebus.demo.puzzle.nope"])
        let byID = Dictionary(uniqueKeysWithValues: response.products.map { ($0.productIdentifier, $0) })
        let pack = try #require(byID[levelPack])
        #expect(pack.productType == .nonConsumable && pack.clearedForSale && pack.price == "2.99" && pack.currencyCode == "EUR")
        let content = try #require(pack.hostedContent.first)
        #expect(content.contentIdentifier == levelPack && content.version == "1.0" && content.contentLength == 512 + 27136 + 512 + 57344 + 1024)
        #expect(content.files.isEmpty, "files only when asked for")
        let withFiles = try await client.call(
            Storebus_Catalog_V1_Catalog.lookupProducts,
            .with {
                $0.appBundleID = puzzle
                $0.productIdentifiers = [levelPack]
                $0.includeFiles = true
            })
        #expect(withFiles.products.first?.hostedContent.first?.files.map(\.path) == ["levels.json", "palette.txt"])
        #expect(content.location == "puzzle-levelpack1", "relative to the download service's content root")
        #expect(byID[retired]?.clearedForSale == false)
        #expect(byID[usOnly]?.price == "", "no price in FRA")
        #expect(info.storefronts.map(\.countryCode) == ["USA", "FRA", "JPN"])
        #expect(info.apps.map(\.bundleID) == [puzzle, notes])
        await client.shutdown()
        await catalog.stop()
    }

    @Test("ListProducts pages through an app's products by identifier, with type and sale status; an unknown app is NOT_FOUND, a page over 1000 INVALID_ARGUMENT")
    func listProducts() async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let client = try catalog.client()
        // Given the demo catalog's puzzle app, read three products a page
        var listed: [Storebus_Catalog_V1_ListedProduct] = []
        var token = ""
        var pages = 0
        repeat {
            let page = try await client.call(
                Storebus_Catalog_V1_Catalog.listProducts,
                .with {
                    $0.appBundleID = puzzle
                    $0.pageSize = 3
                    $0.pageToken = token
                })
            #expect(page.products.count <= 3 && page.catalogVersion != 0)
            listed += page.products
            token = page.nextPageToken
            pages += 1
        } while !token.isEmpty && pages < 10
        // Then every product comes once, in byte order, as the catalog file lists them
        let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: catalog.catalogPath))) as! [String: Any]
        let apps = file["apps"] as! [[String: Any]]
        let products = (apps.first { $0["bundleId"] as? String == puzzle }!["products"] as! [[String: Any]]).map { $0["productId"] as! String }
        #expect(listed.map(\.productIdentifier) == products.sorted())
        #expect(pages == (products.count + 2) / 3)
        let byID = Dictionary(uniqueKeysWithValues: listed.map { ($0.productIdentifier, $0) })
        #expect(byID[levelPack]?.productType == .nonConsumable && byID[levelPack]?.clearedForSale == true)
        #expect(byID[retired]?.clearedForSale == false)
        // And one page holds them all by default
        let all = try await client.call(Storebus_Catalog_V1_Catalog.listProducts, .with { $0.appBundleID = puzzle })
        #expect(all.products == listed && all.nextPageToken.isEmpty)
        // And bad requests are refused for what they are
        await #expect(throws: RPCError.self) { _ = try await client.call(Storebus_Catalog_V1_Catalog.listProducts, .with { $0.appBundleID = "com.example.none" }) }
        let tooMany = await #expect(throws: RPCError.self) {
            _ = try await client.call(
                Storebus_Catalog_V1_Catalog.listProducts,
                .with {
                    $0.appBundleID = puzzle; $0.pageSize = 1001
                })
        }
        #expect(tooMany?.code == .invalidArgument && tooMany?.details.fieldViolations.first?.field == "pageSize")
        await client.shutdown()
        await catalog.stop()
    }

    @Test("reload by admin call and by SIGHUP: a product removed from sale is invalid from the next request on; a bad file is rejected and the old catalog keeps serving")
    func reload() async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let client = try catalog.client()
        let before = try await client.call(Storebus_Catalog_V1_Catalog.getCatalogInfo, .init()).catalogVersion

        // Unchanged file: same version
        let same = try await client.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .init())
        #expect(same.catalogVersion == before && !same.changed)

        // When coins are taken off sale and the catalog is reloaded by the admin call
        try catalog.editCatalog { $0.editProduct(app: 0, id: coins) { $0["clearedForSale"] = false } }
        let reloaded = try await client.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .init())
        #expect(reloaded.changed && reloaded.catalogVersion != before)
        // Then they are invalid from the next request on
        #expect(try await fetch(client, [coins]).invalidProductIdentifiers == [coins])

        // When a broken file is reloaded
        try catalog.editCatalog { $0.editProduct(app: 0, id: levelPack) { $0["prices"] = ["FRA": "two euros"] } }
        let rejected = await #expect(throws: RPCError.self) { _ = try await client.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .init()) }
        // Then the reason names the file, the field and the problem
        #expect(rejected?.code == .failedPrecondition)
        #expect(rejected?.details.fieldViolations.first?.field == "apps[0].products[1].prices.FRA")
        #expect(rejected?.message.contains(catalog.catalogPath) == true)
        // And the previous catalog keeps serving
        #expect(try await client.call(Storebus_Catalog_V1_Catalog.getCatalogInfo, .init()).catalogVersion == reloaded.catalogVersion)
        #expect(try await fetch(client, [levelPack]).products.count == 1)
        // A dry run lists the problems without failing
        let dry = try await client.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .with { $0.dryRun = true })
        #expect(dry.problems.first?.location == "apps[0].products[1].prices.FRA")

        // When the file is fixed (coins back on sale) and the process gets SIGHUP
        try catalog.editCatalog {
            $0.editProduct(app: 0, id: levelPack) { $0["prices"] = ["USA": "2.99", "FRA": "2.99", "JPN": "360"] }
            $0.editProduct(app: 0, id: coins) { $0["clearedForSale"] = true }
        }
        catalog.process.signal(SIGHUP)
        // Then coins are sold again
        #expect(await waitUntil { (try? await fetch(client, [coins]).products.count) == 1 })
        await client.shutdown()
        await catalog.stop()
    }

    @Test("a file with tens of thousands of problems, quoting megabytes, is refused with a clear answer that fits: the first problems, and how many more")
    func manyProblemsFit() async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let client = try catalog.client()
        let before = try await client.call(Storebus_Catalog_V1_Catalog.getCatalogInfo, .init()).catalogVersion
        // Given a product priced in 30,000 storefronts that do not exist and, in one that does, at a
        // price of 2 MB of text (each problem quotes it): several megabytes of problems
        let bogus = String(repeating: "x", count: 2 * 1024 * 1024)
        try catalog.editCatalog {
            $0.editProduct(app: 0, id: coins) { product in
                var prices: [String: String] = ["FRA": bogus]
                for index in 0..<30_000 { prices[String(format: "Z%05d", index)] = "1.00" }
                product["prices"] = prices
            }
        }

        // When the catalog is reloaded
        let rejected = await #expect(throws: RPCError.self) { _ = try await client.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .init()) }
        // Then it is refused as invalid (not an answer too large to send), naming the file, the
        // first problems cut short and how many more there are; the old catalog keeps serving
        #expect(rejected?.code == .failedPrecondition, "\(String(describing: rejected))")
        #expect(rejected?.message.contains(catalog.catalogPath) == true)
        #expect(rejected?.message.contains("… and 29991 more problems") == true, "\(String(describing: rejected?.message.suffix(200)))")
        #expect((rejected?.message.utf8.count ?? .max) < 64 * 1024)
        let violations = rejected?.details.fieldViolations ?? []
        #expect(!violations.isEmpty && violations.count < 30_001 && violations.allSatisfy { $0.description_p.utf8.count <= 1024 })
        #expect(rejected?.details.info.metadata["problems"] == "30001")
        #expect(try await client.call(Storebus_Catalog_V1_Catalog.getCatalogInfo, .init()).catalogVersion == before)

        // And a dry run answers with the problems that fit, then how many more there are
        let dry = try await client.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .with { $0.dryRun = true })
        #expect(dry.problems.count > 1 && dry.problems.count < 30_001)
        #expect(dry.problems.last?.location == "" && dry.problems.last?.message.hasSuffix("more problems not listed; fix these and check again") == true)
        #expect(dry.catalogVersion == before && !dry.changed)
        await client.shutdown()
        await catalog.stop()
    }

    @Test("a product too large for an answer is refused when the file is loaded, naming it; a thousand products at the limit fit in one FetchProducts answer")
    func productsFitAnswers() async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let client = try catalog.client()
        let bulk = (0..<Catalog.maxIdentifiersPerRequest).map { String(format: "com.storebus.demo.puzzle.bulk%04d", $0) }
        func addBulk(description: String) throws {
            try catalog.editCatalog { object in
                var apps = object["apps"] as! [[String: Any]]
                var products = (apps[0]["products"] as! [[String: Any]]).filter { !(($0["productId"] as! String).contains(".bulk")) }
                for id in bulk {
                    products.append([
                        "productId": id, "type": "consumable", "prices": ["USA": "0.99", "FRA": "0.99", "JPN": "120"],
                        "localizations": ["en_US": ["title": "Bulk", "description": description]]
                    ])
                }
                apps[0]["products"] = products
                object["apps"] = apps
            }
        }
        // Given a thousand products whose descriptions (quotes: two bytes each in JSON) bring each
        // close to the limit
        try addBulk(description: String(repeating: "\"", count: 1650))
        _ = try await client.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .init())
        // When all of them are asked for at once, in each storefront
        for storefront in ["USA", "FRA", "JPN"] {
            let body = try await client.callRaw(
                path: Storebus_Catalog_V1_Catalog.fetchProducts.path, idempotent: true,
                body: JSONCodec.encode(
                    Storebus_Catalog_V1_FetchProductsRequest.with {
                        $0.appBundleID = puzzle
                        $0.productIdentifiers = bulk
                        $0.storefront = storefront
                    }), options: CallOptions(timeout: .seconds(10)))
            // Then the answer holds them all, under the message limit
            #expect(body.code == .ok, "\(String(describing: body.error))")
            let answer = try JSONCodec.decode(Storebus_Catalog_V1_FetchProductsResponse.self, from: body.body)
            #expect(answer.products.count == bulk.count && body.body.count > 3_000_000 && Int64(body.body.count) < WireProtocol.defaultMaxMessageBytes, "\(body.body.count) bytes")
        }

        // When their descriptions are longer still
        try addBulk(description: String(repeating: "\"", count: 1900))
        let rejected = await #expect(throws: RPCError.self) { _ = try await client.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .init()) }
        // Then the file is refused, each product named with its size, and the old catalog serves on
        #expect(rejected?.code == .failedPrecondition)
        let violations = rejected?.details.fieldViolations ?? []
        #expect(violations.count >= 10 && violations.allSatisfy { $0.description_p.contains("bytes of JSON in an answer for storefront") }, "\(violations.prefix(2))")
        #expect(try await fetch(client, [bulk[0]]).products.count == 1)
        await client.shutdown()
        await catalog.stop()
    }

    @Test("SIGHUP the instant the ready line is printed, and again, never kills the catalog")
    func hangupRightAfterReady() async throws {
        let catalog = try CatalogFixture()
        for _ in 1...3 {
            // Given a catalog that gets SIGHUP several times as soon as it says it is ready
            try catalog.process.start(onReady: { pid in
                for _ in 1...5 { kill(pid, SIGHUP) }
            })
            // Then it serves, and keeps serving through more of them
            try await catalog.process.waitUntilServing(endpoint: catalog.endpoint)
            for _ in 1...3 { catalog.process.signal(SIGHUP) }
            let client = try catalog.client()
            let health = try await client.call(Storebus_Health_V1_Health.check, .init())
            #expect(health.status == .serving)
            await client.shutdown()
            #expect(await catalog.process.stop() == 0, "\(catalog.process.output)")
        }
        await catalog.stop()
    }

    @Test("a catalog file that does not validate stops the process at start with the file, field and reason")
    func badFileAtStart() async throws {
        let catalog = try CatalogFixture()
        try catalog.editCatalog { $0.editProduct(app: 1, id: "com.storebus.demo.notes.pro") { $0["type"] = "lifetime" } }
        try catalog.process.start()
        let status = await catalog.process.waitForExit(timeout: .seconds(20))
        #expect(status != nil && status != 0)
        #expect(catalog.process.output.contains("apps[1].products[0].type"), "\(catalog.process.output)")
        #expect(catalog.process.output.contains(catalog.catalogPath))
        catalog.directory.remove()
    }
}
