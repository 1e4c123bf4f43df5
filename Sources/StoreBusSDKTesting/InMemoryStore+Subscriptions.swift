import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

// The store in memory's auto-renewable subscriptions, on a virtual clock the test advances
// (``InMemoryStore/advance(by:)``): periods of their real length, renewals delivered to every queue
// of the account, auto-renew, expiry, billing retry and grace, renew now and expire now, with the
// payment queue's rules (docs/subscriptions.md). It sells one product per group at a time: buying
// another product of a group while a period runs, and introductory offers, are the services' alone.
extension InMemoryStore {
    /// An account's subscription in one group.
    struct SubscriptionState {
        var message: Storebus_PaymentQueue_V1_Subscription
        var account: String
        var queueKey: String
        /// The product's period, as bought.
        var period: SubscriptionPeriod
        /// In billing retry: the next retry and when retrying ends.
        var retryAt: Date?
        var retryUntil: Date?
    }

    /// The sandbox's billing controls (StoreKit Test's `shouldEnterBillingRetryOnRenewal` and
    /// `billingGracePeriodIsEnabled`): renewals fail while the first is on.
    public struct BillingControls: Sendable, Equatable {
        public var billingRetryOnRenewal: Bool
        public var gracePeriodEnabled: Bool

        public init(billingRetryOnRenewal: Bool = false, gracePeriodEnabled: Bool = false) {
            self.billingRetryOnRenewal = billingRetryOnRenewal
            self.gracePeriodEnabled = gracePeriodEnabled
        }
    }

    /// The store's clock: the real time plus all the test advanced.
    public var now: Date { state.withLock { $0.now } }

    /// Moves the store's clock `seconds` on (none of it waited for) and does what fell due on the
    /// way, in order: each period that ended renews (its own transaction from the last one's end),
    /// expires (auto-renew off) or enters billing retry; retries are made once a day.
    public func advance(by seconds: TimeInterval) {
        state.withLock { state in
            state.offset += max(seconds, 0)
            Self.renewDue(&state)
        }
        wake()
    }

    /// Sets the billing controls of the store.
    public func setBillingControls(_ controls: BillingControls) {
        state.withLock { $0.billing = controls }
    }

    /// Ends the period of `account`'s subscription in `group` now and renews it at once (billing
    /// retry while renewals fail). NOT_FOUND without one; FAILED_PRECONDITION when it is not in a
    /// period.
    public func renewNow(account: String, group: String) throws {
        try state.withLock { state in
            let key = try Self.runningSubscription(state, account: account, group: group)
            let now = state.now
            Self.moveEnd(&state, key, to: min(now, state.subscriptions[key]!.message.expiresDate.date))
            Self.renewDue(&state)
        }
        wake()
    }

    /// Ends the period of `account`'s subscription in `group` now, and the subscription with it
    /// (expiration intent 1).
    public func expireNow(account: String, group: String) throws {
        try state.withLock { state in
            guard let current = state.subscriptions[Self.subscriptionKey(account, group)] else {
                throw RPCError.resource(.notFound, type: "subscription", name: group, "account \(account) has no subscription in group \(group)")
            }
            guard [.active, .billingRetry, .gracePeriod].contains(current.message.status) else {
                throw RPCError(.failedPrecondition, "the subscription in group \(group) has ended")
            }
            let key = Self.subscriptionKey(account, group)
            Self.moveEnd(&state, key, to: min(state.now, current.message.expiresDate.date))
            Self.expire(&state, key, intent: 1)
        }
    }

    static func subscriptionKey(_ account: String, _ group: String) -> String { "\(account)\u{1F}\(group)" }

    private static func runningSubscription(_ state: State, account: String, group: String) throws -> String {
        let key = subscriptionKey(account, group)
        guard let current = state.subscriptions[key] else {
            throw RPCError.resource(.notFound, type: "subscription", name: group, "account \(account) has no subscription in group \(group)")
        }
        guard current.message.status == .active else {
            throw RPCError(.failedPrecondition, "the subscription in group \(group) is not in a period")
        }
        return key
    }

    /// The end of a period of `period` from `start`, on the calendar in UTC.
    static func end(of period: SubscriptionPeriod, from start: Date) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var components = DateComponents()
        switch period.unit {
        case .day: components.day = period.numberOfUnits
        case .week: components.day = 7 * period.numberOfUnits
        case .month: components.month = period.numberOfUnits
        case .year: components.year = period.numberOfUnits
        }
        return calendar.date(byAdding: components, to: start) ?? start
    }

    /// Apple's grace period: 3 days for a weekly subscription, 16 for longer ones.
    static func grace(of period: SubscriptionPeriod) -> TimeInterval {
        (period.unit == .day || (period.unit == .week && period.numberOfUnits == 1) ? 3 : 16) * 86_400
    }

    /// A purchase of a subscription product, just PURCHASED in `queueKey`: its period (from now, or
    /// the one running when the account holds the product already: "already subscribed"), and the
    /// account's subscription in the group moved on.
    static func startPeriod(_ state: inout State, _ transaction: inout Storebus_PaymentQueue_V1_PaymentTransaction, queueKey: String, account: String) {
        guard let product = state.products[transaction.payment.productIdentifier], let period = product.period else { return }
        let now = state.now
        transaction.originalTransactionID = transaction.transactionIdentifier
        transaction.transactionReason = .purchase
        guard product.kind == .autoRenewable, let group = product.group else {
            transaction.expiresDate = .init(date: end(of: period, from: now))
            return
        }
        transaction.subscriptionGroupIdentifier = group
        let key = subscriptionKey(account, group)
        if var current = state.subscriptions[key], current.message.status == .active, current.message.productIdentifier == product.id {
            transaction.expiresDate = current.message.expiresDate
            transaction.originalTransactionID = current.message.originalTransactionIdentifier
            if !current.message.autoRenewStatus {
                current.message.autoRenewStatus = true
                state.subscriptions[key] = current
            }
            return
        }
        let expires = end(of: period, from: now)
        transaction.expiresDate = .init(date: expires)
        var message =
            state.subscriptions[key]?.message
            ?? .with {
                $0.subscriptionGroupIdentifier = group
                $0.originalTransactionIdentifier = transaction.transactionIdentifier
                $0.originalPurchaseDate = .init(date: now)
            }
        transaction.originalTransactionID = message.originalTransactionIdentifier
        message.productIdentifier = product.id
        message.autoRenewProductIdentifier = product.id
        message.latestTransactionIdentifier = transaction.transactionIdentifier
        message.expiresDate = .init(date: expires)
        message.autoRenewStatus = true
        message.status = .active
        message.expirationIntent = 0
        message.clearBillingRetryEndsDate()
        message.clearGracePeriodExpiresDate()
        message.queue = transaction.queue
        state.subscriptions[key] = SubscriptionState(message: message, account: account, queueKey: queueKey, period: period)
    }

    /// Renews, expires or retries every subscription with something due by the store's clock, in
    /// the order it fell due.
    static func renewDue(_ state: inout State) {
        let now = state.now
        while true {
            let due = state.subscriptions.compactMap { key, subscription -> (Date, String)? in
                switch subscription.message.status {
                case .active where subscription.message.expiresDate.date <= now: return (subscription.message.expiresDate.date, key)
                case .billingRetry, .gracePeriod: return subscription.retryAt.flatMap { $0 <= now ? ($0, key) : nil }
                default: return nil
                }
            }.min { $0.0 < $1.0 || ($0.0 == $1.0 && $0.1 < $1.1) }
            guard let (at, key) = due else { return }
            let subscription = state.subscriptions[key]!
            if subscription.message.status == .active {
                if !subscription.message.autoRenewStatus {
                    expire(&state, key, intent: 1)
                } else if state.billing.billingRetryOnRenewal {
                    state.subscriptions[key]!.message.status = state.billing.gracePeriodEnabled ? .gracePeriod : .billingRetry
                    if state.billing.gracePeriodEnabled {
                        state.subscriptions[key]!.message.gracePeriodExpiresDate = .init(date: at.addingTimeInterval(grace(of: subscription.period)))
                    }
                    let until = at.addingTimeInterval(60 * 86_400)
                    state.subscriptions[key]!.message.billingRetryEndsDate = .init(date: until)
                    state.subscriptions[key]!.retryAt = at.addingTimeInterval(86_400)
                    state.subscriptions[key]!.retryUntil = until
                } else {
                    renew(&state, key, from: at)
                }
            } else if !subscription.message.autoRenewStatus || at >= (subscription.retryUntil ?? at) {
                expire(&state, key, intent: subscription.message.autoRenewStatus ? 2 : 1)
            } else if state.billing.billingRetryOnRenewal {
                state.subscriptions[key]!.retryAt = at.addingTimeInterval(86_400)
                if subscription.message.status == .gracePeriod, subscription.message.gracePeriodExpiresDate.date <= at {
                    state.subscriptions[key]!.message.status = .billingRetry
                }
            } else {
                // Recovered: a new period from the retry that succeeded.
                renew(&state, key, from: at)
            }
        }
    }

    /// One renewal: a PURCHASED transaction (reason RENEWAL) from `start`, kept in the queue of the
    /// subscription's latest purchase and delivered to every other queue of the account.
    private static func renew(_ state: inout State, _ key: String, from start: Date) {
        var subscription = state.subscriptions[key]!
        let expires = end(of: subscription.period, from: start)
        let product = state.products[subscription.message.autoRenewProductIdentifier]
        let renewal = Storebus_PaymentQueue_V1_PaymentTransaction.with {
            $0.transactionIdentifier = String(state.nextID)
            $0.transactionState = .purchased
            $0.transactionDate = .init(date: start)
            $0.payment = .with {
                $0.productIdentifier = subscription.message.autoRenewProductIdentifier
                $0.quantity = 1
            }
            $0.queue = subscription.message.queue
            $0.storefront = "USA"
            $0.productType = .autoRenewableSubscription
            $0.price = product?.price ?? ""
            $0.currencyCode = "USD"
            $0.expiresDate = .init(date: expires)
            $0.originalTransactionID = subscription.message.originalTransactionIdentifier
            $0.transactionReason = .renewal
            $0.subscriptionGroupIdentifier = subscription.message.subscriptionGroupIdentifier
        }
        state.nextID += 1
        var stored = Stored(transaction: renewal, queueKey: subscription.queueKey, account: subscription.account, facts: .init())
        for (queueKey, queue) in state.queues.sorted(by: { $0.key < $1.key }) where queue.accountID == subscription.account && queueKey != subscription.queueKey {
            stored.deliveries[queueKey] = false
            var copy = renewal
            copy.queue = queue
            append(&state, queueKey) { $0.updatedTransactions.transactions = [copy] }
        }
        state.transactions[renewal.transactionIdentifier] = stored
        state.order.append(renewal.transactionIdentifier)
        append(&state, subscription.queueKey) { $0.updatedTransactions.transactions = [renewal] }
        subscription.message.status = .active
        subscription.message.productIdentifier = renewal.payment.productIdentifier
        subscription.message.latestTransactionIdentifier = renewal.transactionIdentifier
        subscription.message.expiresDate = renewal.expiresDate
        subscription.message.renewalCount += 1
        subscription.message.clearBillingRetryEndsDate()
        subscription.message.clearGracePeriodExpiresDate()
        subscription.retryAt = nil
        subscription.retryUntil = nil
        state.subscriptions[key] = subscription
    }

    private static func expire(_ state: inout State, _ key: String, intent: Int32) {
        state.subscriptions[key]!.message.status = .expired
        state.subscriptions[key]!.message.expirationIntent = intent
        state.subscriptions[key]!.retryAt = nil
    }

    /// Moves the end of the period running to `end`, on the subscription and its latest transaction.
    private static func moveEnd(_ state: inout State, _ key: String, to end: Date) {
        state.subscriptions[key]!.message.expiresDate = .init(date: end)
        let latest = state.subscriptions[key]!.message.latestTransactionIdentifier
        state.transactions[latest]?.transaction.expiresDate = .init(date: end)
    }

    /// Refunding a subscription's latest period revokes the subscription; returns whether it did
    /// (an earlier period's refund revokes nothing).
    static func revokeSubscription(_ state: inout State, refunded: Storebus_PaymentQueue_V1_PaymentTransaction, account: String) -> Bool {
        let key = subscriptionKey(account, refunded.subscriptionGroupIdentifier)
        guard refunded.productType == .autoRenewableSubscription, let subscription = state.subscriptions[key],
            subscription.message.latestTransactionIdentifier == refunded.transactionIdentifier
        else { return refunded.productType != .autoRenewableSubscription }
        state.subscriptions[key]!.message.status = .revoked
        state.subscriptions[key]!.message.autoRenewStatus = false
        state.subscriptions[key]!.retryAt = nil
        return true
    }

    /// The Subscriptions calls a device makes (ListSubscriptions, SetAutoRenew); nil for any other.
    func answerSubscriptions(path: String, body: [UInt8], queue: () throws -> Storebus_PaymentQueue_V1_QueueRef) throws -> [UInt8]? {
        switch path {
        case Storebus_PaymentQueue_V1_Subscriptions.listSubscriptions.path:
            let request = try JSONCodec.decode(Storebus_PaymentQueue_V1_ListSubscriptionsRequest.self, from: body)
            try Self.sameAccount(request.appBundleID, request.accountID, try queue())
            let subscriptions = state.withLock { state in
                state.subscriptions.values.filter { $0.account == request.accountID }.map(\.message).sorted { $0.subscriptionGroupIdentifier < $1.subscriptionGroupIdentifier }
            }
            return try JSONCodec.encode(Storebus_PaymentQueue_V1_ListSubscriptionsResponse.with { $0.subscriptions = subscriptions })
        case Storebus_PaymentQueue_V1_Subscriptions.setAutoRenew.path:
            let request = try JSONCodec.decode(Storebus_PaymentQueue_V1_SetAutoRenewRequest.self, from: body)
            try Self.sameAccount(request.appBundleID, request.accountID, try queue())
            let subscription = try state.withLock { state in
                let key = Self.subscriptionKey(request.accountID, request.subscriptionGroupIdentifier)
                guard let current = state.subscriptions[key] else {
                    throw RPCError.resource(
                        .notFound, type: "subscription", name: request.subscriptionGroupIdentifier,
                        "account \(request.accountID) has no subscription in group \(request.subscriptionGroupIdentifier)")
                }
                guard current.message.status != .expired && current.message.status != .revoked else {
                    throw RPCError(.failedPrecondition, "the subscription in group \(request.subscriptionGroupIdentifier) has ended; buy it again to resubscribe")
                }
                state.subscriptions[key]!.message.autoRenewStatus = request.autoRenewStatus
                return state.subscriptions[key]!.message
            }
            return try JSONCodec.encode(Storebus_PaymentQueue_V1_SetAutoRenewResponse.with { $0.subscription = subscription })
        default:
            return nil
        }
    }

    /// PERMISSION_DENIED unless a call names the caller's own app and account, as the gateway checks.
    private static func sameAccount(_ app: String, _ account: String, _ queue: Storebus_PaymentQueue_V1_QueueRef) throws {
        guard app == queue.appBundleID, account == queue.accountID else {
            throw RPCError(.permissionDenied, "a session may act on its own app and account only").withReason("OTHER_ACCOUNT", domain: "storebus.gateway")
        }
    }
}
