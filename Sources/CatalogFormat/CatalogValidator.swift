import ContentPackage
import Foundation
import StoreBus
import StoreSchema

/// Turns a ``CatalogFile`` into a ``Catalog``, or into the list of every problem in it.
public enum CatalogValidator {
    /// Loads and validates the catalog file at `path`.
    public static func load(path: String, now: Date = Date()) throws(CatalogLoadError) -> Catalog {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CatalogLoadError(problems: [CatalogProblem(file: path, field: "", reason: "cannot be read: \(error.localizedDescription)")])
        }
        let file: CatalogFile
        do {
            file = try JSONDecoder().decode(CatalogFile.self, from: data)
        } catch {
            throw CatalogLoadError(problems: [CatalogProblem(file: path, field: Self.decodingPath(error), reason: Self.decodingReason(error))])
        }
        return try validate(file, fileName: path, now: now)
    }

    /// Validates a decoded file.
    public static func validate(_ file: CatalogFile, fileName: String, now: Date = Date()) throws(CatalogLoadError) -> Catalog {
        var problems: [CatalogProblem] = []
        func problem(_ field: String, _ reason: String) {
            problems.append(CatalogProblem(file: fileName, field: field, reason: reason))
        }

        var storefronts: [String: Catalog.Storefront] = [:]
        var storefrontOrder: [String] = []
        let fileStorefronts = file.storefronts ?? []
        if fileStorefronts.isEmpty { problem("storefronts", "at least one storefront is required") }
        for (index, storefront) in fileStorefronts.enumerated() {
            let path = "storefronts[\(index)]"
            guard let code = storefront.countryCode, isAlpha3(code) else {
                problem("\(path).countryCode", "must be an ISO 3166-1 alpha-3 code such as FRA")
                continue
            }
            guard storefronts[code] == nil else {
                problem("\(path).countryCode", "\(code) appears twice")
                continue
            }
            guard let currency = storefront.currency, isAlpha3(currency) else {
                problem("\(path).currency", "must be an ISO 4217 code such as EUR")
                continue
            }
            guard let locale = storefront.locale, isLocale(locale) else {
                problem("\(path).locale", "must be a locale identifier such as fr_FR")
                continue
            }
            storefronts[code] = Catalog.Storefront(countryCode: code, currencyCode: currency, locale: locale)
            storefrontOrder.append(code)
        }

        let orderedStorefronts = storefrontOrder.compactMap { storefronts[$0] }
        var apps: [String: Catalog.App] = [:]
        var appOrder: [String] = []
        let fileApps = file.apps ?? []
        if fileApps.isEmpty { problem("apps", "at least one app is required") }
        for (appIndex, app) in fileApps.enumerated() {
            let appPath = "apps[\(appIndex)]"
            guard let bundleID = app.bundleId, !bundleID.isEmpty, bundleID.utf8.count <= 255 else {
                problem("\(appPath).bundleId", "is required (1 to 255 characters)")
                continue
            }
            guard apps[bundleID] == nil else {
                problem("\(appPath).bundleId", "\(bundleID) appears twice")
                continue
            }
            let defaultLocale = app.defaultLocale ?? "en_US"
            if !isLocale(defaultLocale) { problem("\(appPath).defaultLocale", "must be a locale identifier such as en_US") }
            let defaultStorefront = app.defaultStorefront ?? storefrontOrder.first ?? ""
            if storefronts[defaultStorefront] == nil {
                problem("\(appPath).defaultStorefront", "\(defaultStorefront) is not one of the storefronts")
            }
            var products: [String: Catalog.Product] = [:]
            for (productIndex, product) in (app.products ?? []).enumerated() {
                let path = "\(appPath).products[\(productIndex)]"
                guard let identifier = product.productId, !identifier.isEmpty, identifier.utf8.count <= 255, !identifier.contains(where: \.isWhitespace) else {
                    problem("\(path).productId", "is required (1 to 255 characters, no spaces)")
                    continue
                }
                guard products[identifier] == nil else {
                    problem("\(path).productId", "\(identifier) appears twice in \(bundleID)")
                    continue
                }
                guard let type = productType(product.type) else {
                    problem("\(path).type", "must be consumable, nonConsumable, autoRenewableSubscription or nonRenewingSubscription")
                    continue
                }
                var prices: [String: String] = [:]
                for (code, text) in (product.prices ?? [:]).sorted(by: { $0.key < $1.key }) {
                    guard let storefront = storefronts[code] else {
                        problem("\(path).prices.\(code)", "\(code) is not one of the storefronts")
                        continue
                    }
                    guard let price = normalizedPrice(text, currency: storefront.currencyCode) else {
                        problem(
                            "\(path).prices.\(code)", "\"\(text)\" is not a price in \(storefront.currencyCode) (a decimal string with at most \(fractionDigits(storefront.currencyCode)) decimals)")
                        continue
                    }
                    prices[code] = price
                }
                var localizations: [String: (title: String, description: String)] = [:]
                for (locale, localization) in (product.localizations ?? [:]).sorted(by: { $0.key < $1.key }) {
                    guard isLocale(locale) else {
                        problem("\(path).localizations.\(locale)", "is not a locale identifier such as fr_FR")
                        continue
                    }
                    guard let title = localization.title, !title.isEmpty else {
                        problem("\(path).localizations.\(locale).title", "is required")
                        continue
                    }
                    localizations[locale] = (title, localization.description ?? "")
                }
                if localizations[defaultLocale] == nil {
                    problem("\(path).localizations", "needs the app's default locale \(defaultLocale), used when a storefront's locale is missing")
                }
                var subscription: Catalog.Subscription?
                if type == .autoRenewableSubscription {
                    subscription = validateSubscription(product.subscription, path: "\(path).subscription", storefronts: storefronts, problem: problem)
                } else if product.subscription != nil {
                    problem("\(path).subscription", "only auto-renewable subscriptions have subscription terms")
                }
                var hosted: Catalog.HostedContent?
                if let content = product.hostedContent {
                    if type != .nonConsumable {
                        problem("\(path).hostedContent", "only non-consumable products can have hosted content")
                    } else {
                        hosted = validateHostedContent(content, productID: identifier, path: "\(path).hostedContent", problem: problem)
                    }
                }
                var duration: Catalog.Period?
                if let text = product.duration {
                    if type != .nonRenewingSubscription {
                        problem("\(path).duration", "only non-renewing subscriptions have a duration")
                    } else if let period = Catalog.Period(iso8601: text) {
                        duration = period
                    } else {
                        problem("\(path).duration", "must be an ISO 8601 period such as P1M, P7D or P1Y, not \"\(text)\"")
                    }
                }
                let built = Catalog.Product(
                    identifier: identifier, type: type, clearedForSale: product.clearedForSale ?? true,
                    familyShareable: product.familyShareable ?? false, prices: prices,
                    formattedPrices: formatted(prices, storefronts: storefronts), localizations: localizations,
                    subscription: subscription, hostedContent: hosted, duration: duration
                )
                products[identifier] = built
                checkAnswerSizes(built, path: path, storefronts: orderedStorefronts, defaultLocale: defaultLocale, problem: problem)
            }
            apps[bundleID] = Catalog.App(bundleID: bundleID, defaultLocale: defaultLocale, defaultStorefront: defaultStorefront, products: products)
            appOrder.append(bundleID)
        }
        guard problems.isEmpty else { throw CatalogLoadError(problems: problems) }
        return Catalog(
            version: contentHash(file), loadedAt: now, storefronts: storefronts, storefrontOrder: storefrontOrder,
            apps: apps, appOrder: appOrder
        )
    }

    /// Refuses a product whose answers could pass the message limit: in any storefront, its
    /// FetchProducts product or LookupProducts record may take at most ``Catalog/maxProductAnswerBytes``
    /// of JSON (an answer holds up to a thousand), and its record with its hosted content's files at
    /// most ``Catalog/maxFilesAnswerBytes``. Measured by encoding them as the queries do.
    private static func checkAnswerSizes(
        _ product: Catalog.Product, path: String, storefronts: [Catalog.Storefront], defaultLocale: String, problem: (String, String) -> Void
    ) {
        let app = Catalog.App(bundleID: "", defaultLocale: defaultLocale, defaultStorefront: "", products: [:])
        var largest = (bytes: 0, storefront: "")
        for storefront in storefronts {
            var bytes = (try? product.record(in: storefront, includeFiles: false).jsonUTF8Data().count) ?? .max
            if let price = product.prices[storefront.countryCode] {
                bytes = max(bytes, (try? product.message(price: price, in: storefront, app: app).jsonUTF8Data().count) ?? .max)
            }
            if bytes > largest.bytes { largest = (bytes, storefront.countryCode) }
        }
        if largest.bytes > Catalog.maxProductAnswerBytes {
            problem(
                path,
                "takes \(largest.bytes) bytes of JSON in an answer for storefront \(largest.storefront), more than the \(Catalog.maxProductAnswerBytes) a product may (an answer holds up to \(Catalog.maxIdentifiersPerRequest) products and must stay under the 4 MiB message limit): shorten its title, description or identifiers"
            )
        }
        if product.hostedContent != nil, let storefront = storefronts.first {
            let bytes = (try? product.record(in: storefront, includeFiles: true).jsonUTF8Data().count) ?? .max
            if bytes > Catalog.maxFilesAnswerBytes {
                problem(
                    "\(path).hostedContent.files",
                    "take \(bytes) bytes of JSON in the product's record, more than the \(Catalog.maxFilesAnswerBytes) one answer may hold: split the package or shorten the paths")
            }
        }
    }

    private static func validateSubscription(
        _ subscription: CatalogFile.Subscription?, path: String, storefronts: [String: Catalog.Storefront],
        problem: (String, String) -> Void
    ) -> Catalog.Subscription? {
        guard let subscription else {
            problem(path, "auto-renewable subscriptions need subscription terms (groupId, period)")
            return nil
        }
        guard let group = subscription.groupId, !group.isEmpty else {
            problem("\(path).groupId", "is required")
            return nil
        }
        guard let periodText = subscription.period, let period = Catalog.Period(iso8601: periodText) else {
            problem("\(path).period", "must be an ISO 8601 period such as P1W, P1M or P1Y")
            return nil
        }
        var offer: Catalog.IntroductoryOffer?
        if let intro = subscription.introductoryOffer {
            let introPath = "\(path).introductoryOffer"
            let mode: Storebus_Catalog_V1_PaymentMode? =
                switch intro.paymentMode {
                case "freeTrial": .freeTrial
                case "payAsYouGo": .payAsYouGo
                case "payUpFront": .payUpFront
                default: nil
                }
            guard let mode else {
                problem("\(introPath).paymentMode", "must be freeTrial, payAsYouGo or payUpFront")
                return nil
            }
            guard let introPeriodText = intro.period, let introPeriod = Catalog.Period(iso8601: introPeriodText) else {
                problem("\(introPath).period", "must be an ISO 8601 period such as P1W")
                return nil
            }
            let periods = intro.periods ?? 1
            guard (1...99).contains(periods) else {
                problem("\(introPath).periods", "must be from 1 to 99")
                return nil
            }
            var prices: [String: String] = [:]
            if mode == .freeTrial {
                for code in storefronts.keys { prices[code] = "0" }
            }
            for (code, text) in (intro.prices ?? [:]).sorted(by: { $0.key < $1.key }) {
                guard let storefront = storefronts[code] else {
                    problem("\(introPath).prices.\(code)", "\(code) is not one of the storefronts")
                    continue
                }
                guard let price = normalizedPrice(text, currency: storefront.currencyCode) else {
                    problem("\(introPath).prices.\(code)", "\"\(text)\" is not a price in \(storefront.currencyCode)")
                    continue
                }
                if mode == .freeTrial && price != "0" {
                    problem("\(introPath).prices.\(code)", "a free trial costs 0")
                    continue
                }
                prices[code] = price
            }
            if mode != .freeTrial && prices.isEmpty && (intro.prices ?? [:]).isEmpty {
                problem("\(introPath).prices", "a paid offer needs a price in at least one storefront (it is shown only where it has one)")
            }
            offer = Catalog.IntroductoryOffer(
                paymentMode: mode, period: introPeriod, periods: Int32(periods), prices: prices,
                formattedPrices: formatted(prices, storefronts: storefronts)
            )
        }
        var level = 0
        if let given = subscription.level {
            if (1...1000).contains(given) { level = given } else { problem("\(path).level", "must be from 1 (the highest) to 1000") }
        }
        return Catalog.Subscription(groupID: group, period: period, introductoryOffer: offer, level: level)
    }

    /// Most bytes a product's hosted content may hold, one file or all together: 1 TiB. Far more than
    /// any real package, and small enough that the lengths add up without overflow (the catalog
    /// sums them for every FetchProducts answer) and stay exact for JSON clients that read numbers
    /// as doubles.
    static let maxHostedContentLength: Int64 = 1 << 40

    private static func validateHostedContent(
        _ content: CatalogFile.HostedContent, productID: String, path: String, problem: (String, String) -> Void
    ) -> Catalog.HostedContent? {
        guard let version = content.version, !version.isEmpty else {
            problem("\(path).version", "is required, such as 1.0")
            return nil
        }
        guard ContentPackage.isVersion(version) else {
            problem("\(path).version", "\(RPCError.echo(version)) is not dot-separated integers, such as 1.0.2")
            return nil
        }
        guard let root = content.root, !root.isEmpty else {
            problem("\(path).root", "is required: the folder holding the files, inside the download service's content root")
            return nil
        }
        guard !root.hasPrefix("/"), !root.split(separator: "/").contains("..") else {
            problem("\(path).root", "\(RPCError.echo(root)) must be a folder inside the download service's content root (relative, without ..)")
            return nil
        }
        let files = content.files ?? []
        if files.isEmpty { problem("\(path).files", "at least one file is required") }
        var checked: [(path: String, length: Int64, sha256: String)] = []
        var total: Int64 = 0
        for (index, file) in files.enumerated() {
            guard let filePath = file.path, !filePath.isEmpty, !filePath.hasPrefix("/"), !filePath.split(separator: "/").contains("..") else {
                problem("\(path).files[\(index)].path", "must be a relative path inside the content root")
                continue
            }
            guard let length = file.length, length >= 0 else {
                problem("\(path).files[\(index)].length", "must be the file's length in bytes")
                continue
            }
            guard length <= maxHostedContentLength else {
                problem("\(path).files[\(index)].length", "must be at most 1 TiB (\(maxHostedContentLength) bytes)")
                continue
            }
            // Adding stops once over the limit: every length is at most the limit, so no overflow.
            if total <= maxHostedContentLength { total += length }
            let hash = file.sha256 ?? ""
            // ASCII hex digits only (Character.isHexDigit also takes fullwidth ones).
            if !hash.isEmpty && (hash.utf8.count != 64 || !hash.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0 | 0x20) })) {
                problem("\(path).files[\(index)].sha256", "must be 64 hex digits")
                continue
            }
            checked.append((filePath, length, hash.lowercased()))
        }
        if total > maxHostedContentLength {
            problem("\(path).files", "the files add up to more than 1 TiB (\(maxHostedContentLength) bytes)")
        }
        return Catalog.HostedContent(contentID: content.contentId ?? productID, version: version, location: root, files: checked)
    }

    /// Each price formatted for its storefront.
    static func formatted(_ prices: [String: String], storefronts: [String: Catalog.Storefront]) -> [String: String] {
        prices.reduce(into: [:]) { result, entry in
            guard let storefront = storefronts[entry.key] else { return }
            result[entry.key] = PriceFormatting.format(entry.value, currency: storefront.currencyCode, locale: storefront.locale)
        }
    }

    static func productType(_ text: String?) -> Storebus_Catalog_V1_ProductType? {
        switch text {
        case "consumable": .consumable
        case "nonConsumable": .nonConsumable
        case "autoRenewableSubscription": .autoRenewableSubscription
        case "nonRenewingSubscription": .nonRenewingSubscription
        default: nil
        }
    }

    static func isAlpha3(_ text: String) -> Bool {
        text.utf8.count == 3 && text.utf8.allSatisfy { $0 >= 0x41 && $0 <= 0x5A }
    }

    /// `ll`, `lll`, `ll_CC`, optionally with a script (`zh_Hans_CN`).
    static func isLocale(_ text: String) -> Bool {
        let parts = text.split(separator: "_", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count), let language = parts.first, (2...3).contains(language.count),
            language.allSatisfy({ $0.isLowercase && $0.isLetter })
        else { return false }
        return parts.dropFirst().allSatisfy { !$0.isEmpty && $0.count <= 4 && $0.allSatisfy(\.isLetter) }
    }

    /// Decimal places of a currency's prices: its minor unit (ISO 4217), 2 unless listed, except
    /// where App Store prices have none although ISO 4217 gives two (HUF, TWD). Prices are formatted
    /// with the same number (``PriceFormatting``).
    static func fractionDigits(_ currency: String) -> Int {
        switch currency {
        case "JPY", "KRW", "VND", "CLP", "ISK", "HUF", "TWD", "UGX", "PYG", "XAF", "XOF": 0
        case "BHD", "KWD", "OMR", "JOD", "TND": 3
        default: 2
        }
    }

    /// "0.990" → "0.99", "120" → "120"; nil when not a non-negative decimal with at most the
    /// currency's decimals.
    static func normalizedPrice(_ text: String, currency: String) -> String? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let whole = parts.first, !whole.isEmpty, whole.count <= 12,
            whole.allSatisfy(\.isASCII), whole.allSatisfy(\.isNumber)
        else { return nil }
        var fraction = parts.count == 2 ? String(parts[1]) : ""
        guard fraction.allSatisfy({ $0.isASCII && $0.isNumber }), parts.count == 1 || !fraction.isEmpty else { return nil }
        while fraction.hasSuffix("0") { fraction.removeLast() }
        guard fraction.count <= fractionDigits(currency) else { return nil }
        let trimmedWhole = String(Int(whole)!)
        return fraction.isEmpty ? trimmedWhole : "\(trimmedWhole).\(fraction)"
    }

    /// FNV-1a over the file's canonical JSON (sorted keys).
    static func contentHash(_ file: CatalogFile) -> UInt64 {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes = (try? encoder.encode(file)) ?? Data()
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }

    static func decodingPath(_ error: any Error) -> String {
        let context: DecodingError.Context? =
            switch error {
            case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
                DecodingError.keyNotFound(_, let context), DecodingError.dataCorrupted(let context):
                context
            default: nil
            }
        guard let context else { return "" }
        var path = ""
        for key in context.codingPath {
            if let index = key.intValue { path += "[\(index)]" } else { path += path.isEmpty ? key.stringValue : ".\(key.stringValue)" }
        }
        return path
    }

    static func decodingReason(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(let type, _): return "has the wrong type (expected \(type))"
        case DecodingError.dataCorrupted(let context):
            return context.codingPath.isEmpty ? "is not valid JSON" : context.debugDescription
        default: return "cannot be decoded: \(error)"
        }
    }
}
