import Crypto
import Foundation
import ReceiptFormat
import StoreBus
import StoreSchema
import SwiftASN1
import X509

/// Transactions as the App Store Server API signs them: a JWS (compact serialization), ES256, whose
/// header carries the `x5c` chain (leaf, intermediate, root) and whose payload is a
/// JWSTransactionDecodedPayload. Apple's server libraries, given StoreBus's root in place of
/// Apple's, accept them unchanged.
public enum SignedTransaction {
    /// The JWSTransactionDecodedPayload of `purchase`, signed at `signedDate`.
    public static func payload(_ purchase: StoredPurchase, environment: ReceiptEnvironment, signedDate: Date) -> JWSTransactionDecodedPayload {
        var payload = JWSTransactionDecodedPayload()
        payload.transactionId = purchase.id
        payload.originalTransactionId = purchase.originalID
        payload.bundleId = purchase.app
        payload.productId = purchase.productID
        payload.purchaseDate = purchase.purchaseMS
        payload.originalPurchaseDate = purchase.originalPurchaseMS
        payload.quantity = purchase.quantity
        payload.type = type(purchase.productType)
        payload.inAppOwnershipType = "PURCHASED"
        payload.signedDate = ReceiptStore.milliseconds(signedDate)
        payload.environment = environment.rawValue
        payload.transactionReason = purchase.renewal ? "RENEWAL" : "PURCHASE"
        if !purchase.group.isEmpty { payload.subscriptionGroupIdentifier = purchase.group }
        if purchase.isUpgraded { payload.isUpgraded = true }
        if purchase.isTrialPeriod || purchase.isInIntroOfferPeriod {
            // An introductory offer (offerType 1).
            payload.offerType = 1
            if purchase.isTrialPeriod { payload.offerDiscountType = "FREE_TRIAL" }
        }
        payload.storefront = purchase.storefront
        payload.storefrontId = storefrontIDs[purchase.storefront]
        if let price = milliunits(purchase.price), !purchase.currency.isEmpty {
            payload.price = price
            payload.currency = purchase.currency
        }
        payload.expiresDate = purchase.expiresMS
        if purchase.productType == .autoRenewableSubscription { payload.webOrderLineItemId = String(webOrderLineItemID(purchase)) }
        if let cancellationMS = purchase.cancellationMS {
            payload.revocationDate = cancellationMS
            payload.revocationReason = appleReason(purchase.cancellationReason)
        }
        if let token = UUID(uuidString: purchase.applicationUsername) { payload.appAccountToken = token.uuidString.lowercased() }
        return payload
    }

    /// The JWS of `purchase`, signed with `key` at `signedDate`.
    public static func sign(_ purchase: StoredPurchase, environment: ReceiptEnvironment, with key: SigningKey, at signedDate: Date) throws -> String {
        try JWS.sign(payload(purchase, environment: environment, signedDate: signedDate), with: key, written: FastPaths.enabled)
    }

    /// App Store Server API names of product types.
    static func type(_ type: Storebus_Catalog_V1_ProductType) -> String {
        switch type {
        case .consumable: "Consumable"
        case .nonConsumable: "Non-Consumable"
        case .autoRenewableSubscription: "Auto-Renewable Subscription"
        case .nonRenewingSubscription: "Non-Renewing Subscription"
        default: "Non-Consumable"
        }
    }

    /// Apple's revocation and cancellation reasons: 1, an issue in the app; 0, anything else.
    static func appleReason(_ reason: Storebus_PaymentQueue_V1_RevocationReason) -> Int {
        reason == .appIssue ? 1 : 0
    }

    /// A decimal price in thousandths of the currency unit (the App Store Server API's price).
    static func milliunits(_ price: String) -> Int64? {
        guard !price.isEmpty, let value = Decimal(string: price, locale: Locale(identifier: "en_US_POSIX")) else { return nil }
        var scaled = value * 1000
        var rounded = Decimal()
        NSDecimalRound(&rounded, &scaled, 0, .plain)
        return NSDecimalNumber(decimal: rounded).int64Value
    }

    /// The billing line of a subscription period: the payment queue's, else (purchases recorded
    /// before the payment queue gave one) derived from the original transaction id.
    static func webOrderLineItemID(_ purchase: StoredPurchase) -> Int64 {
        purchase.webOrder ?? (Int64(purchase.originalID) ?? 0) + 1_000_000_000_000
    }

    /// Apple's numeric storefront ids of some ISO 3166-1 alpha-3 storefronts.
    static let storefrontIDs: [String: String] = [
        "USA": "143441", "FRA": "143442", "DEU": "143443", "GBR": "143444", "ITA": "143450", "NLD": "143452",
        "ESP": "143454", "CAN": "143455", "SWE": "143456", "CHE": "143459", "AUS": "143460", "JPN": "143462",
        "KOR": "143466", "IND": "143467", "MEX": "143468", "BRA": "143503"
    ]
}
