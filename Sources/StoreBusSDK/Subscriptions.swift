import Foundation
import StoreBus
import StoreSchema

/// What kind of purchase a product is (SKProduct's kinds; StoreKit 2's Product.ProductType).
public enum ProductType: String, Sendable, Equatable, CaseIterable {
    /// Used up once bought; may be bought again.
    case consumable
    /// Bought once, owned for good, restorable.
    case nonConsumable
    /// Renews every period until turned off; restorable.
    case autoRenewable
    /// Lasts a fixed time and does not renew; the app restores it itself.
    case nonRenewable

    init?(_ type: Storebus_Catalog_V1_ProductType) {
        switch type {
        case .consumable: self = .consumable
        case .nonConsumable: self = .nonConsumable
        case .autoRenewableSubscription: self = .autoRenewable
        case .nonRenewingSubscription: self = .nonRenewable
        default: return nil
        }
    }
}

/// A length of time such as one month (SKProductSubscriptionPeriod).
public struct SubscriptionPeriod: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// SKProduct.PeriodUnit.
    public enum Unit: String, Sendable, Equatable, Hashable, CaseIterable {
        case day, week, month, year
    }

    /// The unit counted.
    public var unit: Unit
    /// How many units, at least 1.
    public var numberOfUnits: Int

    /// A period of `numberOfUnits` `unit`s.
    public init(unit: Unit, numberOfUnits: Int) {
        self.unit = unit
        self.numberOfUnits = numberOfUnits
    }

    init?(_ period: Storebus_Catalog_V1_SubscriptionPeriod) {
        let unit: Unit
        switch period.unit {
        case .day: unit = .day
        case .week: unit = .week
        case .month: unit = .month
        case .year: unit = .year
        default: return nil
        }
        self.init(unit: unit, numberOfUnits: Int(max(period.numberOfUnits, 1)))
    }

    /// `1 month`, `3 days`.
    public var description: String { "\(numberOfUnits) \(unit.rawValue)\(numberOfUnits == 1 ? "" : "s")" }
}

/// An auto-renewable subscription's introductory offer (SKProductDiscount): a new subscriber of the
/// group gets it once.
public struct IntroductoryOffer: Sendable, Equatable {
    /// SKProductDiscount.PaymentMode.
    public enum PaymentMode: String, Sendable, Equatable, CaseIterable {
        /// The offer price every offer period, for ``IntroductoryOffer/numberOfPeriods`` periods.
        case payAsYouGo
        /// The offer price once, for the whole offer.
        case payUpFront
        /// Nothing during the offer.
        case freeTrial
    }

    /// The offer's price, per period or for the whole offer (``paymentMode``).
    public var price: Decimal
    /// The price as the storefront shows it.
    public var formattedPrice: String
    /// How the offer is paid.
    public var paymentMode: PaymentMode
    /// Length of one offer period.
    public var period: SubscriptionPeriod
    /// How many offer periods the offer lasts.
    public var numberOfPeriods: Int

    init?(_ offer: Storebus_Catalog_V1_IntroductoryPrice) {
        guard let period = SubscriptionPeriod(offer.subscriptionPeriod) else { return nil }
        switch offer.paymentMode {
        case .payAsYouGo: paymentMode = .payAsYouGo
        case .payUpFront: paymentMode = .payUpFront
        case .freeTrial: paymentMode = .freeTrial
        default: return nil
        }
        price = Decimal(string: offer.price, locale: Locale(identifier: "en_US_POSIX")) ?? 0
        formattedPrice = offer.formattedPrice
        self.period = period
        numberOfPeriods = Int(max(offer.numberOfPeriods, 1))
    }
}

/// An account's auto-renewable subscription in one group, as the payment queue keeps it: what
/// Settings → Subscriptions shows ("renews on …", "expires on …").
public struct Subscription: Sendable, Equatable, Identifiable {
    /// Where it stands (the App Store Server API's status numbers as raw values).
    public enum Status: Int, Sendable, Equatable, CaseIterable {
        /// A period runs: the customer is entitled.
        case subscribed = 1
        /// The last period ended and it did not renew.
        case expired = 2
        /// A renewal charge failed and the store retries it; the customer is not entitled.
        case inBillingRetryPeriod = 3
        /// A renewal charge failed; the customer stays entitled until the grace period ends.
        case inGracePeriod = 4
        /// Refunded or revoked.
        case revoked = 5
    }

    /// The subscription group.
    public var groupIdentifier: String
    /// The product of the period running (or of the last one).
    public var productIdentifier: String
    /// The product it renews as (a downgrade waiting for the next renewal shows here).
    public var autoRenewProductIdentifier: String
    /// Whether it renews at the end of the period.
    public var willAutoRenew: Bool
    /// Where it stands.
    public var status: Status
    /// The subscription's first purchase: every renewal names it.
    public var originalTransactionIdentifier: String
    /// The transaction of the period running (or of the last one).
    public var latestTransactionIdentifier: String
    /// When the period running ends (or the last one ended).
    public var expirationDate: Date?
    /// In billing retry: when the store gives up.
    public var billingRetryEndDate: Date?
    /// In a grace period: when it ends.
    public var gracePeriodExpirationDate: Date?
    /// Why it expired (receipts' expiration_intent: 1 turned off, 2 billing error, 4 product not for
    /// sale, ...); nil while it has not.
    public var expirationIntent: Int?
    /// How many times it renewed.
    public var renewalCount: Int
    /// Escape hatch: the subscription as the contract's generated message has it.
    public var rawRecord: Storebus_PaymentQueue_V1_Subscription

    /// The group, as `Identifiable` asks: an account has one subscription per group.
    public var id: String { groupIdentifier }

    /// Whether it unlocks content now.
    public var isEntitled: Bool { status == .subscribed || status == .inGracePeriod }

    init(_ subscription: Storebus_PaymentQueue_V1_Subscription) {
        groupIdentifier = subscription.subscriptionGroupIdentifier
        productIdentifier = subscription.productIdentifier
        autoRenewProductIdentifier = subscription.autoRenewProductIdentifier
        willAutoRenew = subscription.autoRenewStatus
        status = Status(rawValue: subscription.status.rawValue) ?? .expired
        originalTransactionIdentifier = subscription.originalTransactionIdentifier
        latestTransactionIdentifier = subscription.latestTransactionIdentifier
        expirationDate = subscription.hasExpiresDate ? subscription.expiresDate.date : nil
        billingRetryEndDate = subscription.hasBillingRetryEndsDate ? subscription.billingRetryEndsDate.date : nil
        gracePeriodExpirationDate = subscription.hasGracePeriodExpiresDate ? subscription.gracePeriodExpiresDate.date : nil
        expirationIntent = subscription.expirationIntent > 0 ? Int(subscription.expirationIntent) : nil
        renewalCount = Int(subscription.renewalCount)
        rawRecord = subscription
    }
}

/// One subscription of a group with its latest transaction and renewal info, both checked against
/// the root certificate given (StoreKit 2's Product.SubscriptionInfo.Status).
public struct SubscriptionStatus: Sendable, Equatable {
    /// Where it stands.
    public var state: Subscription.Status
    /// The subscription's first purchase.
    public var originalTransactionIdentifier: String
    /// The latest period's transaction, verified.
    public var transaction: JWSTransactionDecodedPayload
    /// Its renewal info (auto-renew, the product it renews as, expiration intent, billing retry),
    /// verified.
    public var renewalInfo: JWSRenewalInfoDecodedPayload
}

extension StoreConnection {
    /// The account's subscriptions in the app, one per group it ever subscribed in.
    public func subscriptions() async throws -> [Subscription] {
        try await call(
            Storebus_PaymentQueue_V1_Subscriptions.listSubscriptions,
            .with {
                $0.appBundleID = configuration.appBundleID
                $0.accountID = configuration.accountID
            }
        ).subscriptions.map(Subscription.init)
    }

    /// Turns auto-renew of the account's subscription in `group` off or on, as Settings →
    /// Subscriptions does: off, it expires at the end of the period running. NOT_FOUND when the
    /// account never subscribed in the group; FAILED_PRECONDITION once it ended.
    @discardableResult
    public func setAutoRenew(_ on: Bool, group: String) async throws -> Subscription {
        Subscription(
            try await call(
                Storebus_PaymentQueue_V1_Subscriptions.setAutoRenew,
                .with {
                    $0.appBundleID = configuration.appBundleID
                    $0.accountID = configuration.accountID
                    $0.subscriptionGroupIdentifier = group
                    $0.autoRenewStatus = on
                }
            ).subscription)
    }

    /// The statuses of the account's subscriptions in `group` (usually one), each with its latest
    /// transaction and renewal info checked against StoreBus's root (fetched once per call; pass
    /// `root` to check against one you pinned): a JWS that does not verify throws
    /// ``ReceiptVerifier/Failure``. With `queuePosition` (``PaymentQueue/acknowledgedPosition``), the
    /// answer reflects the queue up to there at least.
    public func subscriptionStatus(for group: String, root: String? = nil, asOfQueuePosition queuePosition: UInt64 = 0) async throws -> [SubscriptionStatus] {
        let verifier = try ReceiptVerifier(rootCertificatePEM: try await resolvedRoot(root))
        let response = try await call(
            Storebus_Receipt_V1_Receipt.getSubscriptionStatuses,
            .with {
                $0.appBundleID = configuration.appBundleID
                $0.accountID = configuration.accountID
                // A position of this device's queue: the receipt service waits for it as one (it is
                // not a position of the whole log).
                $0.deviceID = configuration.deviceID
                $0.minQueueSeq = queuePosition
            })
        var statuses: [SubscriptionStatus] = []
        for item in response.data.first(where: { $0.subscriptionGroupIdentifier == group })?.lastTransactions ?? [] {
            statuses.append(
                SubscriptionStatus(
                    state: Subscription.Status(rawValue: Int(item.status)) ?? .expired,
                    originalTransactionIdentifier: item.originalTransactionID,
                    transaction: try await verifier.verifyTransaction(item.signedTransactionInfo),
                    renewalInfo: try await verifier.verifyRenewalInfo(item.signedRenewalInfo)))
        }
        return statuses
    }
}

extension PaymentQueue {
    /// The statuses of the account's subscriptions in `group`, verified, as of every callback this
    /// queue has handed over: right after a renewal's `purchased`, the status shows it.
    public func subscriptionStatus(for group: String, root: String? = nil) async throws -> [SubscriptionStatus] {
        try await connection.subscriptionStatus(for: group, root: root, asOfQueuePosition: acknowledgedPosition)
    }
}
