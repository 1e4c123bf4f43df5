import Crypto
import Foundation
import StoreBus
import StoreSchema

/// A notification the payment queue's log calls for, before it is signed: what happened, to whom,
/// and which transaction and subscription it carries.
public struct NotificationIntent: Sendable, Equatable {
    /// notificationUUID: made from the event's position, so that the same event always gives the same.
    public var uuid: String
    /// Apple's notificationType and subtype (empty for none).
    public var type: String
    public var subtype: String
    public var app: String
    public var account: String
    /// The transaction signed into the notification (empty for TEST).
    public var transactionID: String
    /// The subscription's first purchase (auto-renewable), else the transaction's original.
    public var originalTransactionID: String
    /// Whether it is about an auto-renewable subscription: its renewal info and status go with it.
    public var subscription = false
}

/// Which App Store Server Notifications V2 an event of the payment queue's log calls for
/// (docs/notifications.md), given what the notification service knows from the events before it:
/// each subscription's last state, and the transactions already notified. Pure: the follower loads
/// that knowledge, runs the rules over a page of events, and writes back what they changed.
public struct NotificationRules: Sendable {
    /// Each subscription's last state, by ``subscriptionKey(_:)``.
    public var subscriptions: [String: Storebus_PaymentQueue_V1_Subscription] = [:]
    /// Transactions whose charge (ONE_TIME_CHARGE) or refund (REFUND) was notified, by
    /// ``noted(_:_:)``.
    public var noted: Set<String> = []

    public init() {}

    /// The key of a subscription: its app, account and group.
    public static func subscriptionKey(_ subscription: Storebus_PaymentQueue_V1_Subscription) -> String {
        "\(subscription.queue.appBundleID)|\(subscription.queue.accountID)|\(subscription.subscriptionGroupIdentifier)"
    }

    /// The key of a transaction notified for `what` ("charge", "refund").
    public static func noted(_ what: String, _ transactionID: String) -> String { "\(what):\(transactionID)" }

    /// The notifications of `event`, at log position `seq` (of `shard`, when the log is sharded), in
    /// order; moves the knowledge on.
    public mutating func intents(for event: Storebus_PaymentQueue_V1_QueueEvent, seq: UInt64, shard: UInt32 = 0) -> [NotificationIntent] {
        var intents: [NotificationIntent] = []
        func add(_ type: String, _ subtype: String = "", app: String, account: String, transaction: String, original: String, subscription: Bool = false) {
            intents.append(
                NotificationIntent(
                    uuid: Self.uuid(app: app, seq: seq, shard: shard, index: intents.count), type: type, subtype: subtype, app: app, account: account,
                    transactionID: transaction, originalTransactionID: original, subscription: subscription))
        }
        switch event.event {
        case .updatedTransactions(let updated):
            for transaction in updated.transactions where Self.isOneTimeCharge(transaction) {
                guard noted.insert(Self.noted("charge", transaction.transactionIdentifier)).inserted else { continue }
                add(
                    "ONE_TIME_CHARGE", app: transaction.queue.appBundleID, account: transaction.queue.accountID, transaction: transaction.transactionIdentifier,
                    original: transaction.originalTransactionID.isEmpty ? transaction.transactionIdentifier : transaction.originalTransactionID)
            }
        case .refundedTransactions(let refunded):
            for transaction in refunded.transactions where Self.isRefundable(transaction) {
                guard noted.insert(Self.noted("refund", transaction.transactionIdentifier)).inserted else { continue }
                add(
                    "REFUND", app: transaction.queue.appBundleID, account: transaction.queue.accountID, transaction: transaction.transactionIdentifier,
                    original: transaction.originalTransactionID.isEmpty ? transaction.transactionIdentifier : transaction.originalTransactionID,
                    subscription: transaction.productType == .autoRenewableSubscription)
            }
        case .subscriptionChanged(let changed):
            let new = changed.subscription
            let key = Self.subscriptionKey(new)
            let old = subscriptions[key]
            subscriptions[key] = new
            for (type, subtype) in Self.changes(from: old, to: new) {
                add(
                    type, subtype, app: new.queue.appBundleID, account: new.queue.accountID, transaction: new.latestTransactionIdentifier,
                    original: new.originalTransactionIdentifier, subscription: true)
            }
        default:
            break
        }
        return intents
    }

    /// A purchase the customer paid for once: a consumable, a non-consumable (not bought again while
    /// held: that one is not charged) or a non-renewing subscription.
    static func isOneTimeCharge(_ transaction: Storebus_PaymentQueue_V1_PaymentTransaction) -> Bool {
        guard transaction.transactionState == .purchased, transaction.transactionReason != .renewal else { return false }
        switch transaction.productType {
        case .consumable, .nonRenewingSubscription: return true
        case .nonConsumable: return transaction.originalTransactionID.isEmpty || transaction.originalTransactionID == transaction.transactionIdentifier
        default: return false
        }
    }

    /// A refunded transaction the customer was charged for: a one-time charge, or a subscription's
    /// period (not a restored copy, not a purchase made again while held, not a period an upgrade
    /// replaced: the upgrade's own notification says that).
    static func isRefundable(_ transaction: Storebus_PaymentQueue_V1_PaymentTransaction) -> Bool {
        guard transaction.transactionState == .purchased, !transaction.isUpgraded else { return false }
        return transaction.productType == .autoRenewableSubscription || isOneTimeCharge(transaction)
    }

    /// What a subscription's change from `old` (nil: never seen) to `new` tells a backend: Apple's
    /// types and subtypes, in order.
    static func changes(from old: Storebus_PaymentQueue_V1_Subscription?, to new: Storebus_PaymentQueue_V1_Subscription) -> [(String, String)] {
        guard let old else { return new.status == .active ? [("SUBSCRIBED", "INITIAL_BUY")] : [] }
        let retrying: Set<Storebus_PaymentQueue_V1_SubscriptionStatus> = [.billingRetry, .gracePeriod]
        if new.latestTransactionIdentifier != old.latestTransactionIdentifier {
            // A new period: bought again after it ended, renewed, or taken over by an upgrade.
            if old.status == .expired || old.status == .revoked { return [("SUBSCRIBED", "RESUBSCRIBE")] }
            if new.renewalCount > old.renewalCount { return [("DID_RENEW", retrying.contains(old.status) ? "BILLING_RECOVERY" : "")] }
            if new.productIdentifier != old.productIdentifier { return [("DID_CHANGE_RENEWAL_PREF", "UPGRADE")] }
            return []
        }
        if new.status != old.status {
            switch new.status {
            case .billingRetry: return [old.status == .gracePeriod ? ("GRACE_PERIOD_EXPIRED", "") : ("DID_FAIL_TO_RENEW", "")]
            case .gracePeriod: return [("DID_FAIL_TO_RENEW", "GRACE_PERIOD")]
            case .expired: return [("EXPIRED", Self.expirySubtype(new.expirationIntent))]
            default: return [] // Revoked: the refund's own REFUND says it.
            }
        }
        var changes: [(String, String)] = []
        if new.autoRenewStatus != old.autoRenewStatus {
            changes.append(("DID_CHANGE_RENEWAL_STATUS", new.autoRenewStatus ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED"))
        }
        if new.autoRenewProductIdentifier != old.autoRenewProductIdentifier {
            // Back to the product running: no subtype, as Apple's.
            changes.append(("DID_CHANGE_RENEWAL_PREF", new.autoRenewProductIdentifier == new.productIdentifier ? "" : "DOWNGRADE"))
        }
        if changes.isEmpty, new.expiresDate.milliseconds > old.expiresDate.milliseconds {
            changes.append(("RENEWAL_EXTENDED", ""))
        }
        return changes
    }

    /// EXPIRED's subtype for receipts' expiration_intent.
    static func expirySubtype(_ intent: Int32) -> String {
        switch intent {
        case 1: return "VOLUNTARY"
        case 2: return "BILLING_RETRY"
        case 3: return "PRICE_INCREASE"
        case 4: return "PRODUCT_NOT_FOR_SALE"
        default: return ""
        }
    }

    /// A notification's UUID, the same whenever it is made again from the same event: the first 16
    /// bytes of a SHA-256 of the app, the event's position (with its shard, past shard 0) and the
    /// notification's index, as a version 8 (custom) RFC 9562 UUID.
    static func uuid(app: String, seq: UInt64, shard: UInt32 = 0, index: Int) -> String {
        let position = shard == 0 ? "\(seq)" : "\(shard)#\(seq)"
        var bytes = Array(SHA256.hash(data: Data("storebus-notification|\(app)|\(position)|\(index)".utf8)).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x80
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        // 8-4-4-4-12 lowercase hex digits, written at once (String(format:) for each byte was a
        // twelfth of the notification service's CPU).
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 36) { text in
            var at = 0
            for (index, byte) in bytes.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    text[at] = UInt8(ascii: "-")
                    at += 1
                }
                text[at] = digits[Int(byte >> 4)]
                text[at + 1] = digits[Int(byte & 0x0F)]
                at += 2
            }
            return at
        }
    }
}
