import Foundation
import StoreBus
import StoreSchema

extension Catalog {
    /// Most identifiers one request may name.
    public static let maxIdentifiersPerRequest = 1000
    /// Most bytes of JSON one product may take in a FetchProducts or LookupProducts answer (without
    /// its files), in any storefront: a thousand of them and the rest of the answer stay under the
    /// 4 MiB message limit. The catalog refuses a file with a larger product.
    public static let maxProductAnswerBytes = 3800
    /// Most bytes of JSON a product's record may take with its hosted content's files (LookupProducts
    /// with include_files).
    public static let maxFilesAnswerBytes = 3 * 1024 * 1024

    /// The storefront a request names, or the app's default when it names none.
    func storefront(named code: String, for app: App) throws(RPCError) -> Storefront {
        let resolved = code.isEmpty ? app.defaultStorefront : code
        // Not echoed when it cannot be a code: the answer would repeat whatever the request held.
        guard resolved.utf8.count == 3 else {
            throw RPCError.invalidArgument(field: "storefront", "must be an ISO 3166-1 alpha-3 code such as FRA (known: \(storefrontOrder.joined(separator: ", ")))")
        }
        guard let storefront = storefronts[resolved] else {
            throw RPCError.invalidArgument(field: "storefront", "unknown storefront \"\(code)\" (known: \(storefrontOrder.joined(separator: ", ")))")
        }
        return storefront
    }

    func app(_ bundleID: String) throws(RPCError) -> App {
        // Requests' bundle ids are at most 255 bytes (the contract's rule): no catalog holds a
        // longer one.
        // Byte for byte: Swift's dictionary takes canonically equivalent names for the same.
        guard let app = apps[bundleID], app.bundleID.utf8.elementsEqual(bundleID.utf8) else {
            throw RPCError.resource(.notFound, type: "app", name: bundleID, "unknown app \"\(RPCError.echo(bundleID))\"")
        }
        return app
    }

    static func checkCount(_ identifiers: [String]) throws(RPCError) {
        guard identifiers.count <= maxIdentifiersPerRequest else {
            throw RPCError.invalidArgument(field: "productIdentifiers", "at most \(maxIdentifiersPerRequest) identifiers per request; got \(identifiers.count)")
        }
    }

    /// SKProductsRequest: the products that can be bought in the storefront, localized for it, and
    /// every other identifier as invalid. Unknown identifiers, products not cleared for sale and
    /// products without a price in the storefront are invalid; an empty identifier is invalid, not an
    /// error; a repeated identifier is answered once. Order follows the request.
    public func fetchProducts(_ request: Storebus_Catalog_V1_FetchProductsRequest) throws(RPCError) -> Storebus_Catalog_V1_FetchProductsResponse {
        try Self.checkCount(request.productIdentifiers)
        let app = try app(request.appBundleID)
        let storefront = try storefront(named: request.storefront, for: app)
        var response = Storebus_Catalog_V1_FetchProductsResponse()
        response.storefront = storefront.countryCode
        var seen = Set<[UInt8]>()
        for identifier in request.productIdentifiers where seen.insert(Array(identifier.utf8)).inserted {
            guard let product = app.product(identifier), product.clearedForSale,
                let price = product.prices[storefront.countryCode]
            else {
                response.invalidProductIdentifiers.append(identifier)
                continue
            }
            response.products.append(product.message(price: price, in: storefront, app: app))
        }
        return response
    }

    /// An app's products by identifier in byte order, a page at a time: after the identifier
    /// `page_token` names (empty: from the first), at most `page_size` (0: 1000).
    public func listProducts(_ request: Storebus_Catalog_V1_ListProductsRequest) throws(RPCError) -> Storebus_Catalog_V1_ListProductsResponse {
        guard (0...Self.maxIdentifiersPerRequest).contains(Int(request.pageSize)) else {
            throw RPCError.invalidArgument(field: "pageSize", "must be 1 to \(Self.maxIdentifiersPerRequest), or 0 for \(Self.maxIdentifiersPerRequest)")
        }
        let app = try app(request.appBundleID)
        let size = request.pageSize == 0 ? Self.maxIdentifiersPerRequest : Int(request.pageSize)
        // Byte order: the UTF-8 views, not Swift's String order (which compares Unicode canonically).
        let after = request.pageToken.utf8
        let identifiers = app.products.keys
            .filter { after.lexicographicallyPrecedes($0.utf8) }
            .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        var response = Storebus_Catalog_V1_ListProductsResponse()
        response.catalogVersion = version
        for identifier in identifiers.prefix(size) {
            guard let product = app.products[identifier] else { continue }
            response.products.append(
                .with {
                    $0.productIdentifier = product.identifier
                    $0.productType = product.type
                    $0.clearedForSale = product.clearedForSale
                })
        }
        if identifiers.count > size, let last = response.products.last { response.nextPageToken = last.productIdentifier }
        return response
    }

    /// Product facts for other services: type, sale status, price in the storefront, hosted content.
    public func lookupProducts(_ request: Storebus_Catalog_V1_LookupProductsRequest) throws(RPCError) -> Storebus_Catalog_V1_LookupProductsResponse {
        try Self.checkCount(request.productIdentifiers)
        let app = try app(request.appBundleID)
        let storefront = try storefront(named: request.storefront, for: app)
        var response = Storebus_Catalog_V1_LookupProductsResponse()
        response.catalogVersion = version
        response.storefront = storefront.countryCode
        var seen = Set<[UInt8]>()
        for identifier in request.productIdentifiers where seen.insert(Array(identifier.utf8)).inserted {
            guard let product = app.product(identifier) else {
                response.unknownProductIdentifiers.append(identifier)
                continue
            }
            response.products.append(product.record(in: storefront, includeFiles: request.includeFiles))
        }
        return response
    }

    /// What the catalog holds, for GetCatalogInfo.
    public var info: Storebus_Catalog_V1_GetCatalogInfoResponse {
        .with { info in
            info.catalogVersion = version
            info.loadedAt = .init(date: loadedAt)
            info.apps = appOrder.map { bundleID in
                let app = apps[bundleID]!
                return .with {
                    $0.bundleID = app.bundleID
                    $0.defaultLocale = app.defaultLocale
                    $0.defaultStorefront = app.defaultStorefront
                }
            }
            info.storefronts = storefrontOrder.map { code in
                let storefront = storefronts[code]!
                return .with {
                    $0.countryCode = storefront.countryCode
                    $0.currencyCode = storefront.currencyCode
                    $0.locale = storefront.locale
                }
            }
        }
    }
}

extension Catalog.App {
    /// The product whose identifier is `identifier` byte for byte. Swift compares strings by canonical
    /// equivalence ("\u{212A}" is "K"), the App Store and SQLite by bytes: a product asked for under
    /// another spelling would be sold under that spelling, and the payment queue, which keeps the
    /// spelling it was given, would not know it for the same product.
    func product(_ identifier: String) -> Catalog.Product? {
        guard let product = products[identifier], product.identifier.utf8.elementsEqual(identifier.utf8) else { return nil }
        return product
    }
}

extension Catalog.Product {
    /// Title and description for a locale: the exact locale; else one of the same language written
    /// in the same script (zh_Hant_TW takes zh_TW or zh_Hant_HK, never zh_Hans_CN), the app's default
    /// locale first when it is one of them, else the first by name; else the app's default locale.
    func localization(for locale: String, app: Catalog.App) -> (title: String, description: String) {
        if let exact = localizations[locale] { return exact }
        let wanted = LocaleParts(locale)
        let candidates = localizations.keys.filter { wanted.sharesLanguageAndScript(with: LocaleParts($0)) }
        if let chosen = candidates.contains(app.defaultLocale) ? app.defaultLocale : candidates.min() {
            return localizations[chosen]!
        }
        return localizations[app.defaultLocale] ?? ("", "")
    }

    /// The product's record for other services (LookupProducts) in a storefront; the hosted content's
    /// files only with `includeFiles`.
    func record(in storefront: Catalog.Storefront, includeFiles: Bool) -> Storebus_Catalog_V1_ProductRecord {
        .with {
            $0.productIdentifier = identifier
            $0.productType = type
            $0.clearedForSale = clearedForSale
            if let price = prices[storefront.countryCode] {
                $0.price = price
                $0.currencyCode = storefront.currencyCode
            }
            if let content = hostedContent { $0.hostedContent = [content.message(includeFiles: includeFiles)] }
            if let duration { $0.subscriptionPeriod = duration.message }
            if let subscription {
                $0.subscriptionPeriod = subscription.period.message
                $0.subscriptionGroupIdentifier = subscription.groupID
                $0.subscriptionGroupLevel = Int32(subscription.level)
                if let offer = subscription.introductoryOffer, let message = offer.message(in: storefront) {
                    $0.introductoryPrice = message
                }
            }
            $0.isFamilyShareable = familyShareable
        }
    }

    func message(price: String, in storefront: Catalog.Storefront, app: Catalog.App) -> Storebus_Catalog_V1_Product {
        let text = localization(for: storefront.locale, app: app)
        return .with {
            $0.productIdentifier = identifier
            $0.localizedTitle = text.title
            $0.localizedDescription = text.description
            $0.price = price
            $0.priceLocale = storefront.locale
            $0.currencyCode = storefront.currencyCode
            $0.formattedPrice = formattedPrices[storefront.countryCode] ?? price
            $0.productType = type
            $0.isFamilyShareable = familyShareable
            if let content = hostedContent {
                $0.isDownloadable = true
                $0.downloadContentLengths = [content.packageLength]
                $0.downloadContentVersion = content.version
            }
            if let subscription {
                $0.subscriptionPeriod = subscription.period.message
                $0.subscriptionGroupIdentifier = subscription.groupID
                if let offer = subscription.introductoryOffer, let message = offer.message(in: storefront) {
                    $0.introductoryPrice = message
                }
            }
        }
    }
}

extension Catalog.IntroductoryOffer {
    /// The offer in a storefront; nil when it has no price there.
    func message(in storefront: Catalog.Storefront) -> Storebus_Catalog_V1_IntroductoryPrice? {
        guard let price = prices[storefront.countryCode] else { return nil }
        return .with {
            $0.price = price
            $0.formattedPrice = formattedPrices[storefront.countryCode] ?? price
            $0.paymentMode = paymentMode
            $0.subscriptionPeriod = period.message
            $0.numberOfPeriods = periods
        }
    }
}

extension Catalog.HostedContent {
    func message(includeFiles: Bool) -> Storebus_Catalog_V1_HostedContent {
        .with {
            $0.contentIdentifier = contentID
            $0.version = version
            $0.contentLength = packageLength
            $0.location = location
            if includeFiles {
                $0.files = files.map { file in
                    .with {
                        $0.path = file.path; $0.length = file.length; $0.sha256 = file.sha256
                    }
                }
            }
        }
    }
}

/// A locale identifier's language, script and region (`zh_Hant_TW`, `fr_FR`, `en`), the script
/// filled in where the region decides it.
struct LocaleParts: Equatable {
    let language: Substring
    let script: Substring?
    let region: Substring?

    init(_ identifier: String) {
        let parts = identifier.split(separator: "_")
        language = parts.first ?? ""
        var script: Substring?
        var region: Substring?
        for part in parts.dropFirst() {
            if part.count == 4 { script = part } else { region = part }
        }
        self.region = region
        self.script = script ?? Self.impliedScript(language: language, region: region)
    }

    /// The script a region implies for a language written in more than one (Chinese: traditional
    /// characters in Taiwan, Hong Kong and Macao, simplified ones elsewhere).
    static func impliedScript(language: Substring, region: Substring?) -> Substring? {
        guard language == "zh" else { return nil }
        guard let region else { return nil }
        return ["TW", "HK", "MO"].contains(region) ? "Hant" : "Hans"
    }

    /// Same language, and the same script when both say which.
    func sharesLanguageAndScript(with other: LocaleParts) -> Bool {
        guard language == other.language else { return false }
        guard let script, let otherScript = other.script else { return true }
        return script == otherScript
    }
}
