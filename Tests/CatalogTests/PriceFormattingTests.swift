import Testing

@testable import CatalogFormat

@Suite("Price formatting")
struct PriceFormattingTests {
    @Test(
        "a price shows the decimals the catalog allows for its currency, no more",
        arguments: [
            // The App Store shows forints and New Taiwan dollars without decimals, although ISO 4217
            // gives both two minor units (and ICU formats them with two).
            ("1000", "HUF", "hu_HU", "1000\u{00A0}Ft"),
            ("1200", "TWD", "zh_TW", "$1,200"),
            ("120", "JPY", "ja_JP", "¥120"),
            ("1", "EUR", "fr_FR", "1,00\u{00A0}€"),
            ("1.2", "KWD", "en_KW", "KWD\u{00A0}1.200")
        ])
    func decimalsFollowTheCatalog(price: String, currency: String, locale: String, expected: String) {
        #expect(PriceFormatting.format(price, currency: currency, locale: locale) == expected)
    }
}
