import Foundation

/// The StoreBus catalog file: JSON, documented in deploy/README.md ("Catalog files").
///
/// This is the on-disk shape, decoded leniently (every field optional) so that validation can name
/// each problem precisely; ``CatalogValidator`` turns it into a ``Catalog`` or a list of problems.
public struct CatalogFile: Codable, Sendable, Equatable {
    /// Storefronts every app sells in.
    public var storefronts: [Storefront]?
    /// The apps.
    public var apps: [App]?

    public init(storefronts: [Storefront]? = nil, apps: [App]? = nil) {
        self.storefronts = storefronts
        self.apps = apps
    }

    /// A country's App Store.
    public struct Storefront: Codable, Sendable, Equatable {
        /// ISO 3166-1 alpha-3 country code, such as `FRA`.
        public var countryCode: String?
        /// ISO 4217 currency code, such as `EUR`.
        public var currency: String?
        /// The locale prices and titles are shown in, such as `fr_FR`.
        public var locale: String?

        public init(countryCode: String? = nil, currency: String? = nil, locale: String? = nil) {
            self.countryCode = countryCode
            self.currency = currency
            self.locale = locale
        }
    }

    /// An app and its products.
    public struct App: Codable, Sendable, Equatable {
        /// The app's bundle id, such as `com.example.puzzle`.
        public var bundleId: String?
        /// Locale used when a product has no localization for the storefront's locale.
        public var defaultLocale: String?
        /// Storefront used when a request names none.
        public var defaultStorefront: String?
        /// The products.
        public var products: [Product]?

        public init(bundleId: String? = nil, defaultLocale: String? = nil, defaultStorefront: String? = nil, products: [Product]? = nil) {
            self.bundleId = bundleId
            self.defaultLocale = defaultLocale
            self.defaultStorefront = defaultStorefront
            self.products = products
        }
    }

    /// A product for sale.
    public struct Product: Codable, Sendable, Equatable {
        /// The product identifier apps ask for.
        public var productId: String?
        /// A name for people managing the catalog; never shown to buyers.
        public var referenceName: String?
        /// `consumable`, `nonConsumable`, `autoRenewableSubscription` or `nonRenewingSubscription`.
        public var type: String?
        /// Whether the product can be bought now (default true).
        public var clearedForSale: Bool?
        /// Whether Family Sharing applies (default false).
        public var familyShareable: Bool?
        /// Price per storefront, as decimal strings: `{"FRA": "0.99", "JPN": "120"}`.
        public var prices: [String: String]?
        /// Title and description per locale: `{"fr_FR": {"title": ..., "description": ...}}`.
        public var localizations: [String: Localization]?
        /// Auto-renewable subscriptions only.
        public var subscription: Subscription?
        /// Non-renewing subscriptions: their duration (optional, informative).
        public var duration: String?
        /// Products with Apple-style hosted content.
        public var hostedContent: HostedContent?

        public init(
            productId: String? = nil, referenceName: String? = nil, type: String? = nil, clearedForSale: Bool? = nil,
            familyShareable: Bool? = nil, prices: [String: String]? = nil, localizations: [String: Localization]? = nil,
            subscription: Subscription? = nil, duration: String? = nil, hostedContent: HostedContent? = nil
        ) {
            self.productId = productId
            self.referenceName = referenceName
            self.type = type
            self.clearedForSale = clearedForSale
            self.familyShareable = familyShareable
            self.prices = prices
            self.localizations = localizations
            self.subscription = subscription
            self.duration = duration
            self.hostedContent = hostedContent
        }
    }

    /// What a buyer reads about a product in one locale.
    public struct Localization: Codable, Sendable, Equatable {
        public var title: String?
        public var description: String?

        public init(title: String? = nil, description: String? = nil) {
            self.title = title
            self.description = description
        }
    }

    /// An auto-renewable subscription's terms.
    public struct Subscription: Codable, Sendable, Equatable {
        /// The subscription group; a buyer holds at most one subscription of a group.
        public var groupId: String?
        /// Renewal period, ISO 8601: `P1W`, `P1M`, `P3M`, `P1Y`, `P3D`.
        public var period: String?
        /// An offer for new subscribers.
        public var introductoryOffer: IntroductoryOffer?
        /// The product's level in its group (a `.storekit` file's `groupNumber`): 1 is the highest.
        /// Buying a higher level is an upgrade, a lower one a downgrade, the same one a crossgrade.
        public var level: Int?

        public init(groupId: String? = nil, period: String? = nil, introductoryOffer: IntroductoryOffer? = nil, level: Int? = nil) {
            self.groupId = groupId
            self.period = period
            self.introductoryOffer = introductoryOffer
            self.level = level
        }
    }

    /// An introductory offer.
    public struct IntroductoryOffer: Codable, Sendable, Equatable {
        /// `freeTrial`, `payAsYouGo` or `payUpFront`.
        public var paymentMode: String?
        /// Length of one offer period, ISO 8601.
        public var period: String?
        /// How many periods the offer lasts (default 1).
        public var periods: Int?
        /// Offer price per storefront (not needed for a free trial).
        public var prices: [String: String]?

        public init(paymentMode: String? = nil, period: String? = nil, periods: Int? = nil, prices: [String: String]? = nil) {
            self.paymentMode = paymentMode
            self.period = period
            self.periods = periods
            self.prices = prices
        }
    }

    /// Downloadable content hosted by StoreBus's download service.
    public struct HostedContent: Codable, Sendable, Equatable {
        /// The content identifier (SKDownload.contentIdentifier); defaults to the product id.
        public var contentId: String?
        /// The content version (SKDownload.contentVersion), such as `1.0`.
        public var version: String?
        /// The folder holding the files, relative to the download service's content root.
        public var root: String?
        /// The files, with their lengths in bytes.
        public var files: [HostedFile]?

        public init(contentId: String? = nil, version: String? = nil, root: String? = nil, files: [HostedFile]? = nil) {
            self.contentId = contentId
            self.version = version
            self.root = root
            self.files = files
        }
    }

    /// One file of hosted content.
    public struct HostedFile: Codable, Sendable, Equatable {
        /// Path relative to the content root.
        public var path: String?
        /// Length in bytes.
        public var length: Int64?
        /// Optional SHA-256 of the file, hex.
        public var sha256: String?

        public init(path: String? = nil, length: Int64? = nil, sha256: String? = nil) {
            self.path = path
            self.length = length
            self.sha256 = sha256
        }
    }
}
