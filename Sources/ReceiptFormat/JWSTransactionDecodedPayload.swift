/// A signed transaction's payload: Apple's JWSTransactionDecodedPayload (App Store Server API), field
/// for field, under Apple's names; dates are milliseconds since 1970, a price is in thousandths of
/// the currency unit. A field left nil is left out of the JSON.
public struct JWSTransactionDecodedPayload: Codable, Sendable, Equatable {
    public var transactionId: String?
    public var originalTransactionId: String?
    /// The subscription purchase's id across devices (auto-renewable subscriptions only).
    public var webOrderLineItemId: String?
    public var bundleId: String?
    public var productId: String?
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Int64?
    public var originalPurchaseDate: Int64?
    public var expiresDate: Int64?
    public var quantity: Int?
    /// "Consumable", "Non-Consumable", "Auto-Renewable Subscription", "Non-Renewing Subscription".
    public var type: String?
    public var appAccountToken: String?
    /// "PURCHASED" or "FAMILY_SHARED".
    public var inAppOwnershipType: String?
    public var signedDate: Int64?
    /// 1: an issue in the app; 0: anything else.
    public var revocationReason: Int?
    public var revocationDate: Int64?
    public var isUpgraded: Bool?
    public var offerType: Int?
    public var offerIdentifier: String?
    /// "Sandbox" or "Production".
    public var environment: String?
    /// ISO 3166-1 alpha-3.
    public var storefront: String?
    public var storefrontId: String?
    /// "PURCHASE" or "RENEWAL".
    public var transactionReason: String?
    public var price: Int64?
    public var currency: String?
    public var offerDiscountType: String?

    /// A payload with every field left out; set those that apply.
    public init() {}
}
