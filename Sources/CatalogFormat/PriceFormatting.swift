import Foundation

/// Formats prices the way the storefront shows them, whatever the caller's own locale: the French
/// storefront writes "0,99 €" (with a no-break space, as CLDR says), the Japanese one "¥120".
enum PriceFormatting {
    /// `price` (a normalized decimal string) in `currency`, formatted for `locale`.
    ///
    /// With the catalog's number of decimals for the currency (``CatalogValidator/fractionDigits(_:)``),
    /// not ICU's: ICU follows ISO 4217 and writes forints and New Taiwan dollars with two decimals
    /// ("1000,00 Ft", "$1,200.00"), where the App Store, and the prices a catalog may hold, have none.
    static func format(_ price: String, currency: String, locale: String) -> String {
        guard let value = Decimal(string: price, locale: Locale(identifier: "en_US_POSIX")) else { return price }
        let style = Decimal.FormatStyle.Currency(code: currency, locale: Locale(identifier: locale))
            .precision(.fractionLength(CatalogValidator.fractionDigits(currency)))
        return value.formatted(style)
    }
}
