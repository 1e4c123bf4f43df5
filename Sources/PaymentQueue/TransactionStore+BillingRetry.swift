import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema

// Billing problems (docs/subscriptions.md): the sandbox's billing controls per app, a renewal charge
// that fails and puts the subscription in billing retry (after a grace period, when on), and the
// retries that recover it or, after 60 days on the store's clock, expire it.
extension TransactionStore {
    /// An app's billing controls: its own, else none (renewal charges succeed).
    static func billingControls(_ db: any SQLConnection, app: String) throws -> Storebus_PaymentQueue_V1_BillingControls {
        let row = try db.row(cached: "SELECT billing_retry, grace FROM pq_billing WHERE app = ?", arguments: [app])
        return .with {
            $0.billingRetryOnRenewal = row?[0] ?? false
            $0.gracePeriodEnabled = row?[1] ?? false
        }
    }

    /// Sets an app's billing controls; returns them. Subscriptions already in billing retry recover
    /// at their next retry once renewal charges succeed again.
    @discardableResult
    public func setBillingControls(_ controls: Storebus_PaymentQueue_V1_BillingControls, app: String) async throws -> Storebus_PaymentQueue_V1_BillingControls {
        // No event: the controls change no queue (a renewal they cause or prevent tells).
        try await database.write { db in
            try db.execute(
                cached: "INSERT INTO pq_billing (app, billing_retry, grace) VALUES (?, ?, ?) ON CONFLICT (app) DO UPDATE SET billing_retry = excluded.billing_retry, grace = excluded.grace",
                arguments: [app, controls.billingRetryOnRenewal, controls.gracePeriodEnabled])
            return try Self.billingControls(db, app: app)
        }
    }

    /// The period of `subscription` ended and its renewal charge failed: billing retry from the
    /// period's end (a grace period first, with `grace`), told to followers.
    static func enterBillingRetry(_ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, _ subscription: inout SubscriptionRecord, grace: Bool) throws {
        let period = RenewalClock.Period(iso8601: subscription.period) ?? RenewalClock.Period(unit: .month, count: 1)
        let billing = RenewalClock.billing(of: period, rate: try renewalRate(db, app: subscription.app).rate)
        let failedAt = subscription.expiresMS
        subscription.retryUntilMS = failedAt + billing.retry
        subscription.retryAtMS = failedAt + billing.interval
        if grace {
            subscription.status = .gracePeriod
            subscription.graceUntilMS = failedAt + billing.grace
            subscription.retryAtMS = min(subscription.retryAtMS, subscription.graceUntilMS)
        } else {
            subscription.status = .billingRetry
            subscription.graceUntilMS = 0
        }
        try subscription.save(db)
        try announce(&batch, subscription)
    }

    /// Subscriptions of a shard (`?`) in billing retry whose next retry is due by a time (`?`),
    /// earliest first, at most `?`.
    static let retriesDueSQL: CachedSQL = """
        SELECT app, account, grp FROM pq_subscription
        WHERE status IN (\(Storebus_PaymentQueue_V1_SubscriptionStatus.billingRetry.rawValue), \(Storebus_PaymentQueue_V1_SubscriptionStatus.gracePeriod.rawValue))
          AND shard = ? AND retry_at_ms <= ? ORDER BY retry_at_ms LIMIT ?
        """
    /// The earliest retry due in a shard (`?`).
    static let nextRetrySQL: CachedSQL = """
        SELECT MIN(retry_at_ms) FROM pq_subscription
        WHERE status IN (\(Storebus_PaymentQueue_V1_SubscriptionStatus.billingRetry.rawValue), \(Storebus_PaymentQueue_V1_SubscriptionStatus.gracePeriod.rawValue))
          AND shard = ?
        """

    /// One retry of a subscription in billing retry, at `nowMS`: with auto-renew turned off it
    /// expires (intent 1); with renewal charges succeeding again it recovers, renewed with a period
    /// from now; past the end of retrying it expires (intent 2, a billing error); past the grace
    /// period it leaves it. Returns whether it renewed, or nil when the renewal waits on its queue.
    static func retry(
        _ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, _ subscription: inout SubscriptionRecord, now nowMS: Int64, maxUnfinished: Int
    ) throws -> Bool? {
        guard subscription.autoRenew else {
            subscription.retryAtMS = 0
            try expire(db, &batch, &subscription, intent: 1)
            return false
        }
        if !(try billingControls(db, app: subscription.app).billingRetryOnRenewal) {
            var recovering = subscription
            recovering.expiresMS = nowMS
            recovering.status = .active
            recovering.retryAtMS = 0
            recovering.retryUntilMS = 0
            recovering.graceUntilMS = 0
            // The renewal announces the subscription recovered.
            guard try renew(db, &batch, &recovering, now: nowMS, maxUnfinished: maxUnfinished) else { return nil }
            subscription = recovering
            return true
        }
        guard nowMS < subscription.retryUntilMS else {
            subscription.retryAtMS = 0
            subscription.graceUntilMS = 0
            try expire(db, &batch, &subscription, intent: 2)
            return false
        }
        let period = RenewalClock.Period(iso8601: subscription.period) ?? RenewalClock.Period(unit: .month, count: 1)
        let interval = RenewalClock.billing(of: period, rate: try renewalRate(db, app: subscription.app).rate).interval
        if subscription.status == .gracePeriod && nowMS >= subscription.graceUntilMS {
            subscription.status = .billingRetry
            subscription.graceUntilMS = 0
            try announce(&batch, subscription)
        }
        var next = min(nowMS + interval, subscription.retryUntilMS)
        if subscription.status == .gracePeriod { next = min(next, subscription.graceUntilMS) }
        subscription.retryAtMS = max(next, nowMS + 1)
        try subscription.save(db)
        return false
    }
}
