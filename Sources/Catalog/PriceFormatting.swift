import Foundation

/// Formats prices the way the storefront shows them, whatever the caller's own locale: the French
/// storefront writes "0,99 €" (with a no-break space, as CLDR says), the Japanese one "¥120".
enum PriceFormatting {
    /// `price` (a normalized decimal string) in `currency`, formatted for `locale`.
    static func format(_ price: String, currency: String, locale: String) -> String {
        guard let value = Decimal(string: price, locale: Locale(identifier: "en_US_POSIX")) else { return price }
        return value.formatted(.currency(code: currency).locale(Locale(identifier: locale)))
    }
}
