import ContentPackage
import Foundation
import StoreSchema

/// A validated catalog, as the catalog service serves it. Immutable: a reload builds a new one.
public struct Catalog: Sendable {
    /// A hash of the catalog's content: equal content, equal version, across restarts and instances.
    /// Callers cache product lookups under it.
    public let version: UInt64
    /// When this catalog was loaded.
    public let loadedAt: Date
    /// Storefronts by ISO 3166-1 alpha-3 code.
    public let storefronts: [String: Storefront]
    /// Storefront codes in file order.
    public let storefrontOrder: [String]
    /// Apps by bundle id.
    public let apps: [String: App]
    /// Bundle ids in file order.
    public let appOrder: [String]

    /// A country's App Store: its currency and the locale its prices and titles are shown in.
    public struct Storefront: Sendable, Equatable {
        public let countryCode: String
        public let currencyCode: String
        public let locale: String
    }

    /// An app and its products.
    public struct App: Sendable {
        public let bundleID: String
        public let defaultLocale: String
        public let defaultStorefront: String
        public let products: [String: Product]
    }

    /// A product with everything needed to answer for any storefront.
    public struct Product: Sendable {
        public let identifier: String
        public let type: Storebus_Catalog_V1_ProductType
        public let clearedForSale: Bool
        public let familyShareable: Bool
        /// Prices by storefront, as normalized decimal strings ("0.99", "120").
        public let prices: [String: String]
        /// Prices by storefront as the storefront shows them ("0,99 €"), formatted once at load.
        public let formattedPrices: [String: String]
        /// Title and description by locale.
        public let localizations: [String: (title: String, description: String)]
        public let subscription: Subscription?
        public let hostedContent: HostedContent?
        /// Non-renewing subscriptions: how long one lasts, when the catalog says (their purchases
        /// then get an expiry date).
        public var duration: Period? = nil
    }

    /// An auto-renewable subscription's terms.
    public struct Subscription: Sendable {
        public let groupID: String
        public let period: Period
        public let introductoryOffer: IntroductoryOffer?
        /// Its level in the group, 1 the highest; 0 when the catalog gives none.
        public var level: Int = 0
    }

    /// An introductory offer.
    public struct IntroductoryOffer: Sendable {
        public let paymentMode: Storebus_Catalog_V1_PaymentMode
        public let period: Period
        public let periods: Int32
        /// Offer prices by storefront ("0" for a free trial in every storefront).
        public let prices: [String: String]
        /// Offer prices as each storefront shows them, formatted once at load.
        public let formattedPrices: [String: String]
    }

    /// A subscription period such as one month.
    public struct Period: Sendable, Equatable {
        public let unit: Storebus_Catalog_V1_PeriodUnit
        public let count: Int32
        /// The ISO 8601 form, such as `P1M`.
        public let iso8601: String

        /// Parses `P<n>D`, `P<n>W`, `P<n>M` or `P<n>Y` (n from 1 to 999).
        public init?(iso8601 text: String) {
            guard text.count >= 3, text.hasPrefix("P"), let count = Int32(text.dropFirst().dropLast()), (1...999).contains(count) else { return nil }
            switch text.last {
            case "D": unit = .day
            case "W": unit = .week
            case "M": unit = .month
            case "Y": unit = .year
            default: return nil
            }
            self.count = count
            self.iso8601 = text
        }

        /// The wire form.
        public var message: Storebus_Catalog_V1_SubscriptionPeriod {
            .with {
                $0.unit = unit
                $0.numberOfUnits = count
                $0.iso8601 = iso8601
            }
        }
    }

    /// Downloadable content of a product.
    public struct HostedContent: Sendable {
        public let contentID: String
        public let version: String
        /// Absolute directory of the files.
        public let location: String
        public let files: [(path: String, length: Int64, sha256: String)]
        /// The length of the package a download transfers: the files in one archive
        /// (``ContentPackage``), headers and padding included (the validator keeps the files within
        /// 1 TiB, so it cannot overflow).
        public var packageLength: Int64 { ContentPackage.archiveLength(fileLengths: files.map(\.length)) }
    }
}
