import Foundation
import StoreBusTesting
import Testing

@testable import CatalogFormat

@Suite("Catalog file validation")
struct CatalogValidatorTests {
    /// A minimal valid file, edited per case.
    func file(_ edit: (inout CatalogFile) -> Void = { _ in }) -> CatalogFile {
        var file = CatalogFile(
            storefronts: [.init(countryCode: "FRA", currency: "EUR", locale: "fr_FR"), .init(countryCode: "JPN", currency: "JPY", locale: "ja_JP")],
            apps: [
                .init(
                    bundleId: "com.example.app", defaultLocale: "en_US",
                    products: [
                        .init(productId: "p1", type: "consumable", prices: ["FRA": "0.99", "JPN": "120"], localizations: ["en_US": .init(title: "One", description: "")])
                    ])
            ]
        )
        edit(&file)
        return file
    }

    func problems(_ file: CatalogFile) -> [CatalogProblem] {
        do {
            _ = try CatalogValidator.validate(file, fileName: "test.json")
            return []
        } catch {
            return error.problems
        }
    }

    @Test("the sample catalog in deploy/ loads")
    func sampleLoads() throws {
        let catalog = try CatalogValidator.load(path: deployDirectory.appendingPathComponent("catalog/catalog.json").path)
        #expect(catalog.apps.count == 2)
        #expect(catalog.storefrontOrder == ["USA", "FRA", "JPN"])
    }

    @Test("a valid file has no problems, and its version depends on its content only")
    func versionIsContentHash() throws {
        #expect(problems(file()).isEmpty)
        let a = try CatalogValidator.validate(file(), fileName: "a")
        let b = try CatalogValidator.validate(file(), fileName: "b", now: Date(timeIntervalSince1970: 0))
        let c = try CatalogValidator.validate(file { $0.apps![0].products![0].prices!["FRA"] = "1.09" }, fileName: "c")
        #expect(a.version == b.version)
        #expect(a.version != c.version)
    }

    @Test(
        "each problem names the field and the reason",
        arguments: [
            ({ @Sendable (f: inout CatalogFile) in f.storefronts = [] }, "storefronts", "at least one"),
            ({ @Sendable (f: inout CatalogFile) in f.storefronts![0].countryCode = "FR" }, "storefronts[0].countryCode", "alpha-3"),
            ({ @Sendable (f: inout CatalogFile) in f.storefronts![1].countryCode = "FRA" }, "storefronts[1].countryCode", "twice"),
            ({ @Sendable (f: inout CatalogFile) in f.storefronts![0].currency = "euro" }, "storefronts[0].currency", "ISO 4217"),
            ({ @Sendable (f: inout CatalogFile) in f.storefronts![0].locale = "French" }, "storefronts[0].locale", "locale"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].bundleId = "" }, "apps[0].bundleId", "required"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].defaultStorefront = "USA" }, "apps[0].defaultStorefront", "not one of the storefronts"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].products![0].productId = "has space" }, "apps[0].products[0].productId", "no spaces"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].products!.append(f.apps![0].products![0]) }, "apps[0].products[1].productId", "twice"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].products![0].type = "lifetime" }, "apps[0].products[0].type", "must be consumable"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].products![0].prices!["USA"] = "0.99" }, "apps[0].products[0].prices.USA", "not one of the storefronts"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].products![0].prices!["JPN"] = "120.5" }, "apps[0].products[0].prices.JPN", "at most 0 decimals"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].products![0].prices!["FRA"] = "-1" }, "apps[0].products[0].prices.FRA", "not a price"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].products![0].localizations = ["fr_FR": .init(title: "Un")] }, "apps[0].products[0].localizations", "default locale en_US"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].products![0].localizations!["en_US"] = .init(title: "") }, "apps[0].products[0].localizations.en_US.title", "required"),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].products![0].type = "autoRenewableSubscription" }, "apps[0].products[0].subscription", "need subscription terms"),
            (
                { @Sendable (f: inout CatalogFile) in
                    f.apps![0].products![0].type = "autoRenewableSubscription"
                    f.apps![0].products![0].subscription = .init(groupId: "g", period: "P1Q")
                }, "apps[0].products[0].subscription.period", "ISO 8601"
            ),
            (
                { @Sendable (f: inout CatalogFile) in
                    f.apps![0].products![0].type = "autoRenewableSubscription"
                    f.apps![0].products![0].subscription = .init(groupId: "g", period: "P1M", introductoryOffer: .init(paymentMode: "freeTrial", period: "P1W", prices: ["FRA": "0.99"]))
                }, "apps[0].products[0].subscription.introductoryOffer.prices.FRA", "free trial costs 0"
            ),
            // A paid offer without a price anywhere was loaded and shown nowhere.
            (
                { @Sendable (f: inout CatalogFile) in
                    f.apps![0].products![0].type = "autoRenewableSubscription"
                    f.apps![0].products![0].subscription = .init(groupId: "g", period: "P1M", introductoryOffer: .init(paymentMode: "payUpFront", period: "P1M"))
                }, "apps[0].products[0].subscription.introductoryOffer.prices", "needs a price"
            ),
            ({ @Sendable (f: inout CatalogFile) in f.apps![0].products![0].subscription = .init(groupId: "g", period: "P1M") }, "apps[0].products[0].subscription", "only auto-renewable"),
            (
                { @Sendable (f: inout CatalogFile) in f.apps![0].products![0].hostedContent = .init(version: "1", root: "c", files: [.init(path: "a", length: 1)]) },
                "apps[0].products[0].hostedContent", "only non-consumable"
            ),
            (
                { @Sendable (f: inout CatalogFile) in
                    f.apps![0].products![0].type = "nonConsumable"
                    f.apps![0].products![0].hostedContent = .init(version: "1", root: "c", files: [.init(path: "../etc/passwd", length: 1)])
                }, "apps[0].products[0].hostedContent.files[0].path", "inside the content root"
            ),
            // Lengths whose sum overflowed Int64 and trapped the catalog in FetchProducts.
            (
                { @Sendable (f: inout CatalogFile) in
                    f.apps![0].products![0].type = "nonConsumable"
                    f.apps![0].products![0].hostedContent = .init(version: "1", root: "c", files: [.init(path: "a", length: .max), .init(path: "b", length: 1)])
                }, "apps[0].products[0].hostedContent.files[0].length", "at most 1 TiB"
            ),
            (
                { @Sendable (f: inout CatalogFile) in
                    f.apps![0].products![0].type = "nonConsumable"
                    f.apps![0].products![0].hostedContent = .init(version: "1", root: "c", files: [.init(path: "a", length: 1 << 40), .init(path: "b", length: 1 << 40)])
                }, "apps[0].products[0].hostedContent.files", "add up to more than 1 TiB"
            ),
            // Fullwidth digits passed Character.isHexDigit.
            (
                { @Sendable (f: inout CatalogFile) in
                    f.apps![0].products![0].type = "nonConsumable"
                    f.apps![0].products![0].hostedContent = .init(version: "1", root: "c", files: [.init(path: "a", length: 1, sha256: String(repeating: "\u{FF10}", count: 64))])
                }, "apps[0].products[0].hostedContent.files[0].sha256", "64 hex digits"
            ),
            // SKDownload versions compare as dot-separated integers.
            (
                { @Sendable (f: inout CatalogFile) in
                    f.apps![0].products![0].type = "nonConsumable"
                    f.apps![0].products![0].hostedContent = .init(version: "1.0-beta", root: "c", files: [.init(path: "a", length: 1)])
                }, "apps[0].products[0].hostedContent.version", "not dot-separated integers"
            )
        ] as [(@Sendable (inout CatalogFile) -> Void, String, String)])
    func problemsNameTheField(edit: @Sendable (inout CatalogFile) -> Void, field: String, reason: String) {
        let found = problems(file(edit))
        #expect(found.contains { $0.field == field && $0.reason.contains(reason) && $0.file == "test.json" }, "\(found)")
    }

    @Test("identifiers and app names match byte for byte: a canonically equivalent spelling (the Kelvin sign for K) is another, unknown identifier, never the product under a second name")
    func identifiersMatchByBytes() throws {
        let catalog = try CatalogValidator.validate(
            file {
                $0.apps![0].bundleId = "com.example.Kit"
                $0.apps![0].products![0].productId = "com.example.Kit.gems"
            }, fileName: "test.json")
        let kelvin = "com.example.\u{212A}it.gems"
        #expect(kelvin == "com.example.Kit.gems", "Swift takes them for the same string")
        let fetched = try catalog.fetchProducts(
            .with {
                $0.appBundleID = "com.example.Kit"; $0.productIdentifiers = [kelvin, "com.example.Kit.gems"]
            })
        #expect(fetched.products.map(\.productIdentifier) == ["com.example.Kit.gems"])
        #expect(fetched.invalidProductIdentifiers.map { Array($0.utf8) } == [Array(kelvin.utf8)], "listed invalid, not dropped as a repeat")
        let looked = try catalog.lookupProducts(
            .with {
                $0.appBundleID = "com.example.Kit"; $0.productIdentifiers = [kelvin]
            })
        #expect(looked.products.isEmpty && looked.unknownProductIdentifiers.count == 1)
        #expect(throws: (any Error).self) {
            _ = try catalog.fetchProducts(
                .with {
                    $0.appBundleID = "com.example.\u{212A}it"; $0.productIdentifiers = ["com.example.Kit.gems"]
                })
        }
    }

    @Test(
        "a storefront without its own localization takes one of its language in its script, the app's default first, before the app's default of another language",
        arguments: [
            ("en_CA", ["en_US", "en_AU", "fr_FR"], "en_US"), // the app's default shares the language
            ("en_CA", ["en_AU", "en_GB", "fr_FR"], "en_AU"), // else the first by name
            ("zh_Hant_TW", ["zh_Hans_CN", "zh_Hant_HK", "fr_FR"], "zh_Hant_HK"), // never the other script
            ("zh_TW", ["zh_CN", "zh_HK", "fr_FR"], "zh_HK"), // the region says which script
            ("zh_Hant_TW", ["zh_Hans_CN", "zh_CN", "fr_FR"], "fr_FR"), // none in its script: the app's default
            ("pt_BR", ["pt_PT", "fr_FR"], "pt_PT"),
            ("de_DE", ["fr_FR", "en_US"], "en_US") // no German: the app's default
        ] as [(String, [String], String)])
    func localizationFallback(storefrontLocale: String, localized: [String], expected: String) throws {
        let catalog = try CatalogValidator.validate(
            file {
                $0.storefronts![0].locale = storefrontLocale
                $0.apps![0].defaultLocale = localized.contains("en_US") ? "en_US" : "fr_FR"
                $0.apps![0].products![0].localizations = Dictionary(uniqueKeysWithValues: localized.map { ($0, CatalogFile.Localization(title: $0)) })
            }, fileName: "test.json")
        let fetched = try catalog.fetchProducts(
            .with {
                $0.appBundleID = "com.example.app"; $0.productIdentifiers = ["p1"]; $0.storefront = "FRA"
            })
        #expect(fetched.products.first?.localizedTitle == expected)
    }

    @Test("a file that is not JSON, or has a wrong type, is named with its path")
    func decodingErrors() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let broken = directory.appendingPathComponent("broken.json")
        try Data("{\"apps\": [".utf8).write(to: broken)
        #expect(throws: CatalogLoadError.self) { _ = try CatalogValidator.load(path: broken.path) }
        let wrongType = directory.appendingPathComponent("wrong.json")
        try Data(#"{"storefronts": [{"countryCode": 250}]}"#.utf8).write(to: wrongType)
        do {
            _ = try CatalogValidator.load(path: wrongType.path)
            Issue.record("expected a problem")
        } catch {
            #expect(error.problems.first?.field == "storefronts[0].countryCode")
            #expect(error.problems.first?.file == wrongType.path)
        }
    }

    @Test(
        "prices are normalized decimal strings",
        arguments: [
            ("0.990", "EUR", "0.99"), ("120", "JPY", "120"), ("007.50", "USD", "7.5"), ("1.234", "KWD", "1.234"),
            ("1.", "EUR", nil), (".5", "EUR", nil), ("1,5", "EUR", nil), ("1e3", "EUR", nil), ("12.345", "EUR", nil)
        ] as [(String, String, String?)])
    func prices(text: String, currency: String, expected: String?) {
        #expect(CatalogValidator.normalizedPrice(text, currency: currency) == expected)
    }
}
