import Foundation
import StoreBusTesting
import Testing

@testable import CatalogFormat

/// A .storekit configuration covering every key the importer reads, written here.
let storeKitConfiguration = #"""
    {
      "identifier" : "6B2E1F0A",
      "nonRenewingSubscriptions" : [
        {
          "displayPrice" : "9.99",
          "familyShareable" : false,
          "internalID" : "6443000003",
          "localizations" : [
            { "description" : "Three months of events", "displayName" : "Season Pass", "locale" : "en_US" },
            { "description" : "Trois mois d'événements", "displayName" : "Passe saisonnier", "locale" : "fr_FR" }
          ],
          "productID" : "com.example.game.season",
          "referenceName" : "Season",
          "type" : "NonRenewingSubscription"
        }
      ],
      "products" : [
        {
          "displayPrice" : "0.99",
          "familyShareable" : false,
          "internalID" : "6443000001",
          "localizations" : [
            { "description" : "A pile of gems", "displayName" : "50 Gems", "locale" : "en_US" },
            { "description" : "Un tas de gemmes", "displayName" : "50 gemmes", "locale" : "fr_FR" }
          ],
          "productID" : "com.example.game.gems50",
          "referenceName" : "Gems 50",
          "type" : "Consumable"
        },
        {
          "displayPrice" : "4.99",
          "familyShareable" : true,
          "internalID" : "6443000002",
          "localizations" : [
            { "description" : "Unlock the desert world", "displayName" : "Desert World", "locale" : "en_US" }
          ],
          "productID" : "com.example.game.desert",
          "referenceName" : "Desert",
          "type" : "NonConsumable"
        }
      ],
      "settings" : {
        "_applicationInternalID" : "6443000000",
        "_developerTeamID" : "ABCDE12345",
        "_failTransactionsEnabled" : false,
        "_locale" : "en_US",
        "_storefront" : "FRA",
        "_storeKitErrors" : [ ]
      },
      "subscriptionGroups" : [
        {
          "id" : "21400001",
          "localizations" : [ { "description" : "", "displayName" : "Game Pass", "locale" : "en_US" } ],
          "name" : "Game Pass",
          "subscriptions" : [
            {
              "adHocOffers" : [ ],
              "codeOffers" : [ { "internalID" : "x1", "paymentMode" : "free", "subscriptionPeriod" : "P1M" } ],
              "displayPrice" : "2.99",
              "familyShareable" : false,
              "groupNumber" : 1,
              "internalID" : "6443000010",
              "introductoryOffer" : { "internalID" : "i1", "numberOfPeriods" : 1, "paymentMode" : "free", "subscriptionPeriod" : "P1W" },
              "localizations" : [ { "description" : "Every world, monthly", "displayName" : "Game Pass Monthly", "locale" : "en_US" } ],
              "productID" : "com.example.game.pass.monthly",
              "recurringSubscriptionPeriod" : "P1M",
              "referenceName" : "Pass Monthly",
              "subscriptionGroupID" : "21400001",
              "type" : "RecurringSubscription"
            },
            {
              "adHocOffers" : [ ],
              "codeOffers" : [ ],
              "displayPrice" : "24.99",
              "familyShareable" : false,
              "groupNumber" : 2,
              "internalID" : "6443000011",
              "introductoryOffer" : { "displayPrice" : "0.99", "internalID" : "i2", "numberOfPeriods" : 3, "paymentMode" : "payAsYouGo", "subscriptionPeriod" : "P1M" },
              "localizations" : [ { "description" : "Every world, yearly", "displayName" : "Game Pass Yearly", "locale" : "en_US" } ],
              "productID" : "com.example.game.pass.yearly",
              "recurringSubscriptionPeriod" : "P1Y",
              "referenceName" : "Pass Yearly",
              "subscriptionGroupID" : "21400001",
              "type" : "RecurringSubscription"
            },
            {
              "displayPrice" : "9.99",
              "familyShareable" : false,
              "introductoryOffer" : { "displayPrice" : 4.99, "numberOfPeriods" : 1, "paymentMode" : "payUpFront", "subscriptionPeriod" : "P3M" },
              "localizations" : [ { "description" : "Every world, quarterly", "displayName" : "Game Pass Quarterly", "locale" : "en_US" } ],
              "productID" : "com.example.game.pass.quarterly",
              "recurringSubscriptionPeriod" : "P3M",
              "referenceName" : "Pass Quarterly",
              "type" : "RecurringSubscription"
            }
          ]
        }
      ],
      "version" : { "major" : 3, "minor" : 0 }
    }
    """#

@Suite("Importing Xcode .storekit configurations")
struct StoreKitImportTests {
    @Test("every key is carried over, and what is not is reported")
    func importsEveryKey() throws {
        let result = try StoreKitConfigurationImporter.importConfiguration(Data(storeKitConfiguration.utf8), bundleID: "com.example.game")
        let app = try #require(result.catalog.apps?.first)
        #expect(app.bundleId == "com.example.game")
        #expect(app.defaultLocale == "en_US")
        #expect(app.defaultStorefront == "FRA")
        #expect(result.catalog.storefronts == [.init(countryCode: "FRA", currency: "EUR", locale: "fr_FR")])
        let products = Dictionary(uniqueKeysWithValues: (app.products ?? []).map { ($0.productId!, $0) })
        #expect(products.count == 6)

        let gems = try #require(products["com.example.game.gems50"])
        #expect(gems.type == "consumable" && gems.referenceName == "Gems 50" && gems.prices == ["FRA": "0.99"])
        #expect(gems.localizations?["fr_FR"] == .init(title: "50 gemmes", description: "Un tas de gemmes"))
        #expect(gems.familyShareable == false)
        #expect(products["com.example.game.desert"]?.type == "nonConsumable")
        #expect(products["com.example.game.desert"]?.familyShareable == true)
        #expect(products["com.example.game.season"]?.type == "nonRenewingSubscription")

        let monthly = try #require(products["com.example.game.pass.monthly"])
        #expect(monthly.type == "autoRenewableSubscription")
        #expect(monthly.subscription?.groupId == "21400001" && monthly.subscription?.period == "P1M")
        #expect(monthly.subscription?.introductoryOffer == .init(paymentMode: "freeTrial", period: "P1W", periods: 1))
        let yearly = try #require(products["com.example.game.pass.yearly"])
        #expect(yearly.subscription?.introductoryOffer == .init(paymentMode: "payAsYouGo", period: "P1M", periods: 3, prices: ["FRA": "0.99"]))
        // A price written as a number, as for products
        #expect(products["com.example.game.pass.quarterly"]?.subscription?.introductoryOffer == .init(paymentMode: "payUpFront", period: "P3M", periods: 1, prices: ["FRA": "4.99"]))

        // Reported, not silently dropped
        #expect(result.notCarriedOver.contains { $0.contains("codeOffers") && $0.contains("pass.monthly") })
        #expect(result.notCarriedOver.contains { $0.contains("_failTransactionsEnabled") })
        #expect(result.notCarriedOver.contains { $0.contains("subscriptionGroups[0].localizations") })
        // groupNumber is carried: the subscriptions' levels in their group
        #expect(monthly.subscription?.level == 1 && yearly.subscription?.level == 2)
        #expect(!result.notCarriedOver.contains { $0.contains("groupNumber") })

        // The result is a catalog that loads
        let catalog = try CatalogValidator.validate(result.catalog, fileName: "imported")
        let fetched = try catalog.fetchProducts(
            .with {
                $0.appBundleID = "com.example.game"; $0.productIdentifiers = ["com.example.game.gems50", "com.example.game.pass.yearly"]
            })
        #expect(fetched.products.map(\.formattedPrice) == ["0,99\u{00A0}€", "24,99\u{00A0}€"])
        #expect(fetched.products[1].introductoryPrice.numberOfPeriods == 3)
        let records = try catalog.lookupProducts(
            .with {
                $0.appBundleID = "com.example.game"; $0.productIdentifiers = ["com.example.game.pass.monthly", "com.example.game.pass.yearly"]
            })
        #expect(records.products.map(\.subscriptionGroupLevel) == [1, 2])
    }

    @Test("a file that is not a StoreKit configuration is a clear error")
    func notAConfiguration() {
        #expect(throws: StoreKitConfigurationImporter.ImportError.self) {
            _ = try StoreKitConfigurationImporter.importConfiguration(Data("[1, 2]".utf8), bundleID: "a")
        }
        #expect(throws: StoreKitConfigurationImporter.ImportError.self) {
            _ = try StoreKitConfigurationImporter.importConfiguration(Data("not json".utf8), bundleID: "a")
        }
    }

    @Test("storectl catalog import writes a catalog file that storebus-catalog serves")
    func storectlImport() async throws {
        let directory = try TemporaryDirectory(prefix: "import")
        defer { directory.remove() }
        let input = directory.path("Products.storekit")
        try Data(storeKitConfiguration.utf8).write(to: URL(fileURLWithPath: input))
        let output = directory.path("catalog.json")
        let importer = ServiceProcess(
            name: "storectl", arguments: ["catalog", "import", input, "--app", "com.example.game", "--output", output], logFile: directory.url.appendingPathComponent("import.log"))
        try importer.start()
        #expect(await importer.waitForExit(timeout: .seconds(30)) == 0, "\(importer.output)")
        #expect(importer.output.contains("imported 6 products for com.example.game"))
        #expect(importer.output.contains("not carried over:"))

        let endpoint = directory.ipcEndpoint("catalog")
        let catalog = ServiceProcess(name: "storebus-catalog", arguments: ["--rpc-endpoint", endpoint, "--catalog", output], logFile: directory.url.appendingPathComponent("catalog.log"))
        try catalog.start()
        try await catalog.waitUntilServing(endpoint: endpoint)
        await catalog.stop()

        let missing = ServiceProcess(name: "storectl", arguments: ["catalog", "import", directory.path("nope.storekit"), "--app", "x"], logFile: directory.url.appendingPathComponent("missing.log"))
        try missing.start()
        #expect(await missing.waitForExit(timeout: .seconds(30)) != 0)
        #expect(missing.output.contains("cannot read"))
        #expect(!missing.output.contains("Fatal error"))
    }

    @Test("storectl catalog import leaves the output alone and fails when the catalog would not load, unless --force")
    func storectlImportRefusesAnInvalidCatalog() async throws {
        let directory = try TemporaryDirectory(prefix: "import")
        defer { directory.remove() }
        // Given a configuration priced in the Japanese storefront with euro-cent prices (the yen has no decimals)
        let input = directory.path("Products.storekit")
        try Data(storeKitConfiguration.replacingOccurrences(of: #""_storefront" : "FRA""#, with: #""_storefront" : "JPN""#).utf8)
            .write(to: URL(fileURLWithPath: input))
        // And an output file that already holds a catalog
        let output = directory.path("catalog.json")
        try Data("previous catalog".utf8).write(to: URL(fileURLWithPath: output))

        // When it is imported
        let importer = ServiceProcess(
            name: "storectl", arguments: ["catalog", "import", input, "--app", "com.example.game", "--output", output], logFile: directory.url.appendingPathComponent("import.log"))
        try importer.start()
        // Then storectl fails, listing the problems, and the previous catalog is still there
        #expect(await importer.waitForExit(timeout: .seconds(30)) == 1, "\(importer.output)")
        #expect(importer.output.contains("will not load") && importer.output.contains("prices.JPN"), "\(importer.output)")
        #expect(try String(contentsOfFile: output, encoding: .utf8) == "previous catalog")

        // When it is imported with --force
        let forced = ServiceProcess(
            name: "storectl", arguments: ["catalog", "import", input, "--app", "com.example.game", "--output", output, "--force"], logFile: directory.url.appendingPathComponent("forced.log"))
        try forced.start()
        // Then the catalog is written, with a warning
        #expect(await forced.waitForExit(timeout: .seconds(30)) == 0, "\(forced.output)")
        #expect(forced.output.contains("will not load"), "\(forced.output)")
        #expect(try String(contentsOfFile: output, encoding: .utf8).contains("com.example.game.gems50"))
    }
}
