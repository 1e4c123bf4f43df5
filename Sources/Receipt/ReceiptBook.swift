import Foundation
import Metrics
import ReceiptFormat
import StoreBus
import StoreBusStorage
import StoreSchema
import SwiftProtobuf

/// Issues receipts, signed transactions and entitlements from the receipt store, and verifies
/// receipts: the receipt service's work, apart from the bus.
public struct ReceiptBook: Sendable {
    let store: ReceiptStore
    let authority: SigningAuthority
    let configuration: ReceiptConfiguration
    /// How far the payment queue's log (``ReceiptStore/log``) is applied, and the calls waiting for it.
    let applied: PositionWaiter<String>

    /// The payment queue's log's shards, as the follower found them.
    let shards: LogShards

    /// The position applied so far of the payment queue's log, of the shard of `app`'s `account`
    /// (positions are a shard's, when the log is sharded).
    func appliedSeq(app: String, account: String) -> UInt64 {
        applied.position(shards.positionKey(app: app, account: account))
    }
    /// Where the payment queue's log stands (for waits as of a device's queue position).
    let head: LogHead

    /// A new receipt for the device: every purchase of the account the receipt holds, signed now.
    /// `held`: the account's purchases in the receipt when the caller has read them already.
    func refresh(
        app: String, account: String, device: String, applicationVersion: String,
        properties: Storebus_Receipt_V1_ReceiptProperties?, held: [StoredPurchase]? = nil, now: Date = Date()
    ) async throws -> (receipt: [UInt8], asOf: UInt64) {
        let asOf = appliedSeq(app: app, account: account)
        let (opaque, firstMS) = try await store.device(app: app, account: account, device: device, revoked: properties?.isRevoked == true, now: now)
        // Each purchase's attribute as kept since it last changed (the fast path; with fast paths
        // off, every purchase read and encoded again, the plain twin), unless the caller holds them.
        let entries: [[UInt8]]
        if let held {
            entries = try held.map { try Self.entry($0).attributeDER() }
        } else if FastPaths.enabled {
            entries = try await store.receiptEntries(app: app, account: account)
        } else {
            entries = try await store.purchases(app: app, account: account).filter(\.inReceipt).map { try Self.entry($0).attributeDER() }
        }
        var expiration: Date?
        if properties?.isExpired == true { expiration = now.addingTimeInterval(-86_400) } else if properties?.isVolumePurchase == true { expiration = now.addingTimeInterval(365 * 86_400) }
        let receipt = AppReceipt(
            receiptType: AppReceipt.receiptType(configuration.environment), bundleID: app,
            applicationVersion: applicationVersion.isEmpty ? "1.0" : applicationVersion,
            opaqueValue: opaque, sha1Hash: try AppReceipt.hash(deviceID: device, opaque: opaque, bundleID: app),
            creationDate: Self.seconds(now), originalPurchaseDate: Self.date(firstMS),
            originalApplicationVersion: configuration.app(app).originalApplicationVersion,
            expirationDate: expiration.map(Self.seconds), inApp: []
        )
        let signed = try ReceiptSignature.sign(
            payload: try receipt.der(inAppAttributes: entries), with: try authority.current(now: now), at: now, spliced: FastPaths.enabled)
        ReceiptMetrics.signed.increment()
        return (signed, asOf)
    }

    /// The receipt entry of a purchase.
    static func entry(_ purchase: StoredPurchase) -> InAppPurchaseEntry {
        InAppPurchaseEntry(
            quantity: purchase.quantity, productID: purchase.productID, transactionID: purchase.id,
            originalTransactionID: purchase.originalID, purchaseDate: date(purchase.purchaseMS),
            originalPurchaseDate: date(purchase.originalPurchaseMS), productType: purchase.productType.rawValue - 1,
            expiresDate: purchase.expiresMS.map(date),
            webOrderLineItemID: purchase.productType == .autoRenewableSubscription ? SignedTransaction.webOrderLineItemID(purchase) : nil,
            cancellationDate: purchase.cancellationMS.map(date), isTrialPeriod: purchase.isTrialPeriod, isInIntroOfferPeriod: purchase.isInIntroOfferPeriod
        )
    }

    /// A purchase as the receipt service's answers give it, with its JWS.
    func inAppPurchase(_ purchase: StoredPurchase, now: Date = Date()) throws -> Storebus_Receipt_V1_InAppPurchase {
        var message = Self.inAppPurchase(Self.entry(purchase))
        message.cancellationReason = purchase.cancellationReason
        message.deviceID = purchase.device
        message.signedTransactionInfo = try SignedTransaction.sign(purchase, environment: configuration.environment, with: try authority.current(now: now), at: now)
        ReceiptMetrics.signedTransactions.increment()
        return message
    }

    /// A receipt entry as a message.
    static func inAppPurchase(_ entry: InAppPurchaseEntry) -> Storebus_Receipt_V1_InAppPurchase {
        .with {
            $0.quantity = Int32(clamping: entry.quantity)
            $0.productID = entry.productID
            $0.transactionID = entry.transactionID
            $0.originalTransactionID = entry.originalTransactionID
            $0.purchaseDate = Google_Protobuf_Timestamp(millisecondsOf: entry.purchaseDate)
            $0.originalPurchaseDate = Google_Protobuf_Timestamp(millisecondsOf: entry.originalPurchaseDate)
            if let expires = entry.expiresDate { $0.expiresDate = Google_Protobuf_Timestamp(millisecondsOf: expires) }
            if let cancelled = entry.cancellationDate { $0.cancellationDate = Google_Protobuf_Timestamp(millisecondsOf: cancelled) }
            $0.isTrialPeriod = entry.isTrialPeriod
            $0.isInIntroOfferPeriod = entry.isInIntroOfferPeriod
            if let id = entry.webOrderLineItemID { $0.webOrderLineItemID = String(id) }
            $0.productType = Storebus_Catalog_V1_ProductType(rawValue: entry.productType + 1) ?? .unspecified
        }
    }

    /// What the account has unlocked now, product by product (consumables aside): the purchase that
    /// holds each product, or, when none does, the last that did and why it no longer does.
    func entitlements(app: String, account: String, now: Date = Date()) async throws -> [Storebus_Receipt_V1_Entitlement] {
        let nowMS = ReceiptStore.milliseconds(now)
        let purchases = try await store.purchases(app: app, account: account).filter { $0.productType != .consumable }
        let states = purchases.contains { $0.productType == .autoRenewableSubscription } ? try await store.renewalStates(app: app, account: account) : [:]
        let byProduct = Dictionary(grouping: purchases, by: \.productID)
        return byProduct.keys.sorted().compactMap { product in
            let candidates = byProduct[product] ?? []
            func active(_ purchase: StoredPurchase) -> Bool {
                purchase.cancellationMS == nil && (purchase.expiresMS.map { $0 > nowMS } ?? true)
            }
            // The holding purchase: an active original before an active restored copy, the latest
            // period first; else the latest purchase that once held the product.
            let chosen =
                candidates.filter(active).max { a, b in
                    (a.expiresMS ?? .max, a.state == .purchased ? 1 : 0, a.purchaseMS) < (b.expiresMS ?? .max, b.state == .purchased ? 1 : 0, b.purchaseMS)
                } ?? candidates.max { $0.purchaseMS < $1.purchaseMS }
            guard let chosen else { return nil }
            // In a grace period, a subscription whose period ended still entitles its customer.
            if chosen.productType == .autoRenewableSubscription, !active(chosen), let state = states[chosen.originalID],
                state.status == .gracePeriod, state.graceUntilMS > nowMS, chosen.cancellationMS == nil
            {
                return .with {
                    $0.productIdentifier = product
                    $0.productType = chosen.productType
                    $0.originalTransactionIdentifier = chosen.originalID
                    $0.purchaseDate = Google_Protobuf_Timestamp(milliseconds: chosen.originalPurchaseMS)
                    if let expires = chosen.expiresMS { $0.expiresDate = Google_Protobuf_Timestamp(milliseconds: expires) }
                    $0.active = true
                    $0.reason = "in the billing grace period until \(UTCDate.rfc3339(Self.date(state.graceUntilMS)))"
                }
            }
            return .with {
                $0.productIdentifier = product
                $0.productType = chosen.productType
                $0.originalTransactionIdentifier = chosen.originalID
                $0.purchaseDate = Google_Protobuf_Timestamp(milliseconds: chosen.originalPurchaseMS)
                if let expires = chosen.expiresMS { $0.expiresDate = Google_Protobuf_Timestamp(milliseconds: expires) }
                $0.revoked = chosen.cancellationMS != nil
                $0.active = active(chosen)
                $0.reason = Self.reason(chosen, nowMS: nowMS, expirationIntent: states[chosen.originalID]?.expirationIntent ?? 0)
            }
        }
    }

    /// The account's auto-renewable subscriptions by group, each with its status and its latest
    /// transaction and renewal info signed at `now` (the App Store Server API's statuses).
    func subscriptionStatuses(app: String, account: String, now: Date = Date()) async throws -> [Storebus_Receipt_V1_SubscriptionGroupStatus] {
        let purchases = try await store.purchases(app: app, account: account)
        let states = try await store.renewalStates(app: app, account: account)
        let key = try authority.current(now: now)
        let statuses = SubscriptionStatus.all(purchases, states: states, now: now)
        let byGroup = Dictionary(grouping: statuses) { $0.latest.group }
        return try byGroup.keys.sorted().map { group in
            try .with {
                $0.subscriptionGroupIdentifier = group
                $0.lastTransactions = try (byGroup[group] ?? []).map { status in
                    try .with {
                        $0.originalTransactionID = status.originalID
                        $0.status = Int32(status.status)
                        $0.signedTransactionInfo = try SignedTransaction.sign(status.latest, environment: configuration.environment, with: key, at: now)
                        $0.signedRenewalInfo = try JWS.sign(status.renewalInfo(environment: configuration.environment, signedDate: now), with: key, written: FastPaths.enabled)
                    }
                }
            }
        }
    }

    /// Why a purchase holds its product, or no longer does.
    static func reason(_ purchase: StoredPurchase, nowMS: Int64, expirationIntent: Int = 0) -> String {
        if let cancelled = purchase.cancellationMS {
            let why = purchase.cancellationReason == .appIssue ? " (an issue in the app)" : ""
            return "refunded on \(UTCDate.rfc3339(date(cancelled)))\(why)"
        }
        if let expires = purchase.expiresMS {
            guard expires <= nowMS else { return "subscribed until \(UTCDate.rfc3339(date(expires)))" }
            return "expired on \(UTCDate.rfc3339(date(expires)))\(Self.expirationReasons[expirationIntent].map { ": \($0)" } ?? "")"
        }
        let how = purchase.state == .restored ? "restored" : "purchased"
        return "\(how) on \(UTCDate.rfc3339(date(purchase.state == .restored ? purchase.purchaseMS : purchase.originalPurchaseMS)))"
    }

    /// Why a subscription expired, by receipts' expiration_intent.
    static let expirationReasons = [
        1: "auto-renew turned off", 2: "billing error", 3: "price increase not agreed", 4: "product no longer for sale", 5: "other reason"
    ]

    static func date(_ ms: Int64) -> Date { EpochMilliseconds.date(ms) }

    /// `date` to the second below, as a receipt's dates are written.
    static func seconds(_ date: Date) -> Date { Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)) }
}

/// The receipt service's own metrics (made at first use, after the process set up swift-metrics).
enum ReceiptMetrics {
    /// `storebus_receipts_signed_total`: app receipts signed (CMS).
    static let signed = Counter(label: "storebus_receipts_signed_total")
    /// `storebus_signed_transactions_total`: transactions signed as JWS.
    static let signedTransactions = Counter(label: "storebus_signed_transactions_total")
}
