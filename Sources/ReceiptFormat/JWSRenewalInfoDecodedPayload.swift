/// A signed renewal info's payload: Apple's JWSRenewalInfoDecodedPayload (App Store Server API),
/// field for field, under Apple's names; dates are milliseconds since 1970, a price is in thousandths
/// of the currency unit. A field left nil is left out of the JSON.
public struct JWSRenewalInfoDecodedPayload: Codable, Sendable, Equatable {
    /// 1 cancelled by the customer, 2 billing error, 3 price increase not agreed, 4 product not
    /// available, 5 other.
    public var expirationIntent: Int?
    public var originalTransactionId: String?
    public var autoRenewProductId: String?
    public var productId: String?
    /// 1 renews, 0 does not.
    public var autoRenewStatus: Int?
    public var isInBillingRetryPeriod: Bool?
    public var priceIncreaseStatus: Int?
    public var gracePeriodExpiresDate: Int64?
    public var offerType: Int?
    public var offerIdentifier: String?
    public var signedDate: Int64?
    /// "Sandbox" or "Production".
    public var environment: String?
    public var recentSubscriptionStartDate: Int64?
    public var renewalDate: Int64?
    public var currency: String?
    public var renewalPrice: Int64?
    public var offerDiscountType: String?

    /// A payload with every field left out; set those that apply.
    public init() {}
}
