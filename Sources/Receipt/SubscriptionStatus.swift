import Foundation
import ReceiptFormat
import StoreSchema
import SwiftProtobuf

/// What the payment queue told of an auto-renewable subscription that its transactions do not show
/// (its `subscription_changed` events): whether it renews, as what, and how it ended.
public struct RenewalState: Sendable, Equatable {
    public var group: String
    public var autoRenew: Bool
    public var autoRenewProductID: String
    public var status: Storebus_PaymentQueue_V1_SubscriptionStatus
    public var expirationIntent: Int
    /// In a grace period: when it ends (0 otherwise).
    public var graceUntilMS: Int64 = 0
}

/// An auto-renewable subscription as the receipt service knows it: its periods (the purchase, the
/// renewals, resubscriptions in its group) under one original transaction, and its renewal state.
/// The source of receipts' `pending_renewal_info`, signed renewal info and subscription statuses.
struct SubscriptionStatus: Sendable {
    let originalID: String
    /// Its periods, oldest first (restored copies aside).
    let periods: [StoredPurchase]
    let state: RenewalState?
    let nowMS: Int64

    /// The period running, or the last.
    var latest: StoredPurchase { periods[periods.count - 1] }

    /// The account's auto-renewable subscriptions among `purchases`, by original transaction id.
    static func all(_ purchases: [StoredPurchase], states: [String: RenewalState], now: Date) -> [SubscriptionStatus] {
        let nowMS = ReceiptStore.milliseconds(now)
        let periods = purchases.filter { $0.productType == .autoRenewableSubscription && $0.state == .purchased && !$0.cleared }
        return Dictionary(grouping: periods, by: \.originalID).sorted { $0.key < $1.key }.map { original, periods in
            SubscriptionStatus(
                originalID: original, periods: periods.sorted { ($0.purchaseMS, $0.id) < ($1.purchaseMS, $1.id) }, state: states[original], nowMS: nowMS)
        }
    }

    /// Whether it renews at the end of the period: as the payment queue last said, else yes (a
    /// subscription nobody changed renews).
    var autoRenews: Bool { state?.autoRenew ?? true }
    /// The product it renews as.
    var autoRenewProductID: String { state?.autoRenewProductID ?? latest.productID }

    /// The App Store Server API's status: 1 active, 2 expired, 3 billing retry, 4 grace period,
    /// 5 revoked.
    var status: Int {
        if latest.cancellationMS != nil { return 5 }
        switch state?.status {
        case .billingRetry: return 3
        case .gracePeriod: return 4
        case .expired: return 2
        default: return (latest.expiresMS ?? .max) > nowMS ? 1 : 2
        }
    }

    /// Why it expired (receipts' expiration_intent), once it has.
    var expirationIntent: Int? {
        guard status == 2, let intent = state?.expirationIntent, intent > 0 else { return nil }
        return intent
    }

    /// Receipts' `pending_renewal_info` entry, as verifyReceipt writes it.
    var appleJSON: JSONObjectWriter {
        var json = JSONObjectWriter()
        json.set("auto_renew_product_id", autoRenewProductID)
        json.set("product_id", latest.productID)
        json.set("original_transaction_id", originalID)
        json.set("auto_renew_status", autoRenews ? "1" : "0")
        if let intent = expirationIntent { json.set("expiration_intent", String(intent)) }
        if status == 3 || status == 4 { json.set("is_in_billing_retry_period", "1") } else if status == 2 { json.set("is_in_billing_retry_period", "0") }
        if let grace = graceUntilMS {
            let date = ReceiptBook.date(grace)
            json.set("grace_period_expires_date", AppleDates.format(date, zone: "Etc/GMT"))
            json.set("grace_period_expires_date_ms", String(grace))
            json.set("grace_period_expires_date_pst", AppleDates.format(date, zone: "America/Los_Angeles"))
        }
        return json
    }

    /// The same entry as the bus gives it.
    var message: Storebus_Receipt_V1_PendingRenewalInfo {
        .with {
            $0.autoRenewProductID = autoRenewProductID
            $0.productID = latest.productID
            $0.originalTransactionID = originalID
            $0.autoRenewStatus = autoRenews
            $0.expirationIntent = Int32(expirationIntent ?? 0)
            $0.isInBillingRetryPeriod = status == 3 || status == 4
            if let grace = graceUntilMS { $0.gracePeriodExpiresDate = Google_Protobuf_Timestamp(milliseconds: grace) }
        }
    }

    /// In a grace period: when it ends.
    var graceUntilMS: Int64? {
        guard status == 4, let grace = state?.graceUntilMS, grace > 0 else { return nil }
        return grace
    }

    /// Whether the customer is entitled now: a period running, or a grace period.
    var entitled: Bool { status == 1 || (status == 4 && (graceUntilMS ?? 0) > nowMS) }

    /// The JWSRenewalInfoDecodedPayload of the subscription, signed at `signedDate`.
    func renewalInfo(environment: ReceiptEnvironment, signedDate: Date) -> JWSRenewalInfoDecodedPayload {
        var payload = JWSRenewalInfoDecodedPayload()
        payload.originalTransactionId = originalID
        payload.productId = latest.productID
        payload.autoRenewProductId = autoRenewProductID
        payload.autoRenewStatus = autoRenews ? 1 : 0
        payload.expirationIntent = expirationIntent
        payload.isInBillingRetryPeriod = status == 3 || status == 4
        payload.gracePeriodExpiresDate = graceUntilMS
        payload.signedDate = ReceiptStore.milliseconds(signedDate)
        payload.environment = environment.rawValue
        payload.recentSubscriptionStartDate = recentStartMS
        if autoRenews, status == 1 || status == 3 || status == 4 { payload.renewalDate = latest.expiresMS }
        if let price = SignedTransaction.milliunits(latest.price), !latest.currency.isEmpty {
            payload.renewalPrice = price
            payload.currency = latest.currency
        }
        return payload
    }

    /// When the latest run of periods without a gap began (Apple's recentSubscriptionStartDate).
    var recentStartMS: Int64 {
        var start = latest.purchaseMS
        for (earlier, later) in zip(periods, periods.dropFirst()).reversed() {
            guard let end = earlier.expiresMS, end >= later.purchaseMS else { break }
            start = earlier.purchaseMS
        }
        return start
    }
}
