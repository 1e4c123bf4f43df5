import Foundation

/// Converts an Xcode StoreKit configuration file (`.storekit`, the JSON iOS teams keep for StoreKit
/// testing) into a StoreBus catalog file, and says what could not be carried over.
///
/// Carried over: top-level `products` and `nonRenewingSubscriptions`, `subscriptionGroups` with their
/// `subscriptions`; for each product `productID`, `referenceName`, `type`, `displayPrice` (as the price
/// in the file's `settings._storefront`), `familyShareable`, `localizations` (`locale`, `displayName`,
/// `description`), `recurringSubscriptionPeriod`, `groupNumber` (as the subscription's `level`) and
/// `introductoryOffer`; `settings._locale` becomes
/// the app's default locale.
public enum StoreKitConfigurationImporter {
    /// The result of an import.
    public struct Result: Sendable {
        /// The catalog file to write.
        public var catalog: CatalogFile
        /// Everything in the .storekit file that the catalog does not carry, one sentence each.
        public var notCarriedOver: [String]
    }

    /// An import that cannot proceed.
    public struct ImportError: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// Imports the .storekit JSON for the app `bundleID`.
    public static func importConfiguration(_ data: Data, bundleID: String) throws(ImportError) -> Result {
        let root: [String: Any]
        do {
            guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw ImportError(description: "the file is not a StoreKit configuration (expected a JSON object)")
            }
            root = object
        } catch let error as ImportError {
            throw error
        } catch {
            throw ImportError(description: "the file is not valid JSON: \(error.localizedDescription)")
        }
        var notes: [String] = []
        let settings = root["settings"] as? [String: Any] ?? [:]
        let storefrontCode = (settings["_storefront"] as? String).flatMap { $0.isEmpty ? nil : $0 } ?? "USA"
        let locale = ((settings["_locale"] as? String).flatMap { $0.isEmpty ? nil : $0 } ?? "en_US").replacingOccurrences(of: "-", with: "_")
        if settings["_storefront"] == nil { notes.append("settings._storefront is missing; prices were put in the USA storefront") }
        for key in settings.keys.sorted() where !["_storefront", "_locale"].contains(key) {
            notes.append("settings.\(key) (StoreKit testing option) has no catalog equivalent")
        }
        let storefront = knownStorefronts[storefrontCode] ?? CatalogFile.Storefront(countryCode: storefrontCode, currency: "USD", locale: locale)
        if knownStorefronts[storefrontCode] == nil {
            notes.append("storefront \(storefrontCode) is not in the importer's table; its currency was set to USD — check it")
        }

        var products: [CatalogFile.Product] = []
        for (index, item) in (root["products"] as? [[String: Any]] ?? []).enumerated() {
            if let product = convert(item, path: "products[\(index)]", storefront: storefrontCode, notes: &notes) { products.append(product) }
        }
        for (index, item) in (root["nonRenewingSubscriptions"] as? [[String: Any]] ?? []).enumerated() {
            if let product = convert(item, path: "nonRenewingSubscriptions[\(index)]", storefront: storefrontCode, notes: &notes) { products.append(product) }
        }
        for (groupIndex, group) in (root["subscriptionGroups"] as? [[String: Any]] ?? []).enumerated() {
            let groupID = (group["id"] as? String) ?? (group["name"] as? String) ?? "group-\(groupIndex)"
            if let localizations = group["localizations"] as? [Any], !localizations.isEmpty {
                notes.append("subscriptionGroups[\(groupIndex)].localizations (group display names) are not carried")
            }
            for (index, item) in (group["subscriptions"] as? [[String: Any]] ?? []).enumerated() {
                let path = "subscriptionGroups[\(groupIndex)].subscriptions[\(index)]"
                if let product = convert(item, path: path, storefront: storefrontCode, groupID: groupID, notes: &notes) { products.append(product) }
            }
        }
        for key in root.keys.sorted() where !["products", "nonRenewingSubscriptions", "subscriptionGroups", "settings", "identifier", "version"].contains(key) {
            notes.append("\(key) is not carried")
        }
        let app = CatalogFile.App(bundleId: bundleID, defaultLocale: locale, defaultStorefront: storefrontCode, products: products)
        return Result(catalog: CatalogFile(storefronts: [storefront], apps: [app]), notCarriedOver: notes)
    }

    private static func convert(
        _ item: [String: Any], path: String, storefront: String, groupID: String? = nil, notes: inout [String]
    ) -> CatalogFile.Product? {
        guard let productID = item["productID"] as? String, !productID.isEmpty else {
            notes.append("\(path) has no productID and was skipped")
            return nil
        }
        let type: String
        switch item["type"] as? String {
        case "Consumable": type = "consumable"
        case "NonConsumable": type = "nonConsumable"
        case "NonRenewingSubscription": type = "nonRenewingSubscription"
        case "RecurringSubscription", "AutoRenewableSubscription": type = "autoRenewableSubscription"
        default:
            notes.append("\(path) (\(productID)) has an unknown type \"\(item["type"] ?? "")\" and was skipped")
            return nil
        }
        var product = CatalogFile.Product(productId: productID, referenceName: item["referenceName"] as? String, type: type)
        product.familyShareable = item["familyShareable"] as? Bool
        if let price = item["displayPrice"] as? String {
            product.prices = [storefront: price]
        } else if let price = item["displayPrice"] as? NSNumber {
            product.prices = [storefront: price.stringValue]
        } else {
            notes.append("\(path) (\(productID)) has no displayPrice: it will be an invalid identifier until priced")
        }
        var localizations: [String: CatalogFile.Localization] = [:]
        for localization in item["localizations"] as? [[String: Any]] ?? [] {
            guard let locale = (localization["locale"] as? String)?.replacingOccurrences(of: "-", with: "_") else { continue }
            localizations[locale] = CatalogFile.Localization(title: localization["displayName"] as? String, description: localization["description"] as? String)
        }
        product.localizations = localizations
        if type == "autoRenewableSubscription" {
            var subscription = CatalogFile.Subscription(
                groupId: groupID ?? (item["subscriptionGroupID"] as? String), period: item["recurringSubscriptionPeriod"] as? String,
                level: (item["groupNumber"] as? NSNumber)?.intValue)
            if let offer = item["introductoryOffer"] as? [String: Any] {
                let mode: String? =
                    switch offer["paymentMode"] as? String {
                    case "free": "freeTrial"
                    case "payAsYouGo": "payAsYouGo"
                    case "payUpFront": "payUpFront"
                    default: nil
                    }
                if let mode {
                    var intro = CatalogFile.IntroductoryOffer(paymentMode: mode, period: offer["subscriptionPeriod"] as? String, periods: offer["numberOfPeriods"] as? Int)
                    if mode != "freeTrial" {
                        if let price = offer["displayPrice"] as? String {
                            intro.prices = [storefront: price]
                        } else if let price = offer["displayPrice"] as? NSNumber {
                            intro.prices = [storefront: price.stringValue]
                        }
                    }
                    subscription.introductoryOffer = intro
                } else {
                    notes.append("\(path) (\(productID)): introductory offer payment mode \"\(offer["paymentMode"] ?? "")\" is unknown; offer skipped")
                }
            }
            for key in ["promotionalOffers", "adHocOffers", "codeOffers", "winbackOffers"] {
                if let offers = item[key] as? [Any], !offers.isEmpty {
                    notes.append("\(path) (\(productID)): \(offers.count) \(key) are not carried (only introductory offers are)")
                }
            }
            product.subscription = subscription
        }
        return product
    }

    /// Storefronts the importer knows the currency and locale of.
    static let knownStorefronts: [String: CatalogFile.Storefront] = {
        let table: [(String, String, String)] = [
            ("USA", "USD", "en_US"), ("FRA", "EUR", "fr_FR"), ("JPN", "JPY", "ja_JP"), ("GBR", "GBP", "en_GB"),
            ("DEU", "EUR", "de_DE"), ("CAN", "CAD", "en_CA"), ("AUS", "AUD", "en_AU"), ("CHN", "CNY", "zh_CN"),
            ("ITA", "EUR", "it_IT"), ("ESP", "EUR", "es_ES"), ("KOR", "KRW", "ko_KR"), ("BRA", "BRL", "pt_BR"),
            ("MEX", "MXN", "es_MX"), ("IND", "INR", "en_IN"), ("CHE", "CHF", "de_CH"), ("NLD", "EUR", "nl_NL"),
            ("SWE", "SEK", "sv_SE")
        ]
        return Dictionary(uniqueKeysWithValues: table.map { ($0.0, CatalogFile.Storefront(countryCode: $0.0, currency: $0.1, locale: $0.2)) })
    }()
}
