import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema

// The sandbox's controls over one subscription (docs/subscriptions.md): renew now, expire now,
// extend the renewal date. Each moves the end of the period running, on the subscription and on
// the purchase of that period, and tells followers with a subscription_changed event.
extension TransactionStore {
    /// What a control does to a subscription.
    public enum SubscriptionControl: Sendable, Equatable {
        /// The period ends now and the subscription renews at once (billing retry when charges fail).
        case renewNow
        /// The period ends now, and the subscription with it (intent 1).
        case expireNow
        /// The period ends `days` later on the store's clock (1 to 90); with a request id, once for it.
        case extend(days: Int, requestID: String = "")
    }

    /// Applies `control` to the account's subscription in `group` at `now`; returns it as it is then.
    /// NOT_FOUND without one; FAILED_PRECONDITION when it has ended (or, to renew or extend, is not
    /// in a period: billing retry).
    public func control(
        _ control: SubscriptionControl, app: String, account: String, group: String, now: Date = Date()
    ) async throws
        -> Storebus_PaymentQueue_V1_Subscription
    {
        let nowMS = Self.milliseconds(now)
        let maxUnfinished = self.maxUnfinished
        return try await writer.write { db, batch in
            guard var subscription = try SubscriptionRecord.fetch(db, app: app, account: account, group: group) else {
                throw RPCError.resource(.notFound, type: "subscription", name: group, "account \(RPCError.echo(account)) has no subscription in group \(RPCError.echo(group))")
            }
            try batch.requireOwner(shard: subscription.shard)
            if case .extend(let days, let requestID) = control, !requestID.isEmpty {
                // Made once: the same request again answers the subscription as it is, whatever
                // happened to it since.
                let made = try db.value(
                    Int.self, cached: "SELECT days FROM pq_extension WHERE app = ? AND account = ? AND grp = ? AND request_id = ?",
                    arguments: [app, account, group, requestID])
                if let made {
                    guard made == days else {
                        throw RPCError(.failedPrecondition, "request \(RPCError.echo(requestID)) extended this subscription by \(made) days, not \(days)")
                    }
                    return subscription.message
                }
            }
            guard subscription.status != .expired && subscription.status != .revoked else {
                throw RPCError(.failedPrecondition, "the subscription in group \(RPCError.echo(group)) has ended")
            }
            guard subscription.status == .active || control == .expireNow else {
                throw RPCError(.failedPrecondition, "the subscription in group \(RPCError.echo(group)) is in billing retry, not in a period")
            }
            switch control {
            case .expireNow:
                try Self.moveEnd(db, &subscription, to: min(nowMS, subscription.expiresMS))
                subscription.autoRenew = false
                subscription.retryAtMS = 0
                subscription.graceUntilMS = 0
                try Self.expire(db, &batch, &subscription, intent: 1)
            case .renewNow:
                try Self.moveEnd(db, &subscription, to: min(nowMS, subscription.expiresMS))
                try Self.announce(&batch, subscription)
                let billing = try Self.billingControls(db, app: app)
                if billing.billingRetryOnRenewal {
                    try Self.enterBillingRetry(db, &batch, &subscription, grace: billing.gracePeriodEnabled)
                } else {
                    guard try Self.renew(db, &batch, &subscription, now: nowMS, maxUnfinished: maxUnfinished) else {
                        throw RPCError(.resourceExhausted, "the queue of the subscription's latest purchase has no room for the renewal: finish some of its transactions first")
                    }
                }
            case .extend(let days, let requestID):
                guard (1...90).contains(days) else { throw RPCError.invalidArgument(field: "extendByDays", "must be from 1 to 90") }
                if !requestID.isEmpty {
                    try db.execute(
                        cached: "INSERT INTO pq_extension (app, account, grp, request_id, days, created_ms) VALUES (?, ?, ?, ?, ?, ?)", arguments: [app, account, group, requestID, days, nowMS])
                }
                let period = RenewalClock.Period(iso8601: subscription.period) ?? RenewalClock.Period(unit: .month, count: 1)
                // A day on the store's clock: a thirtieth of its month.
                let day = RenewalClock.billing(of: period, rate: try Self.renewalRate(db, app: app).rate).retry / 60
                try Self.moveEnd(db, &subscription, to: subscription.expiresMS + Int64(days) * day)
                try Self.announce(&batch, subscription)
            }
            return subscription.message
        }
    }

    /// Moves the end of the period running to `endMS`, on the subscription (saved) and on the
    /// purchase of that period.
    static func moveEnd(_ db: any SQLConnection, _ subscription: inout SubscriptionRecord, to endMS: Int64) throws {
        subscription.expiresMS = endMS
        try subscription.save(db)
        try db.execute(cached: "UPDATE pq_transaction SET expires_ms = ? WHERE id = ?", arguments: [endMS, subscription.latestID])
    }

    /// A refund of `refunded`, an auto-renewable purchase or renewal: when it is the subscription's
    /// running (or last) period, the subscription is revoked (status 5: no more renewals, no billing
    /// retry, expired or not) and followers told; returns whether the entitlement goes with it. An earlier period's refund
    /// revokes nothing: the period running still holds the subscription.
    static func revokeSubscription(_ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, of refunded: TransactionRecord) throws -> Bool {
        guard let original = refunded.subscriptionOriginalID ?? (refunded.group.isEmpty ? nil : refunded.id),
            var subscription = try SubscriptionRecord.fetch(db, app: refunded.app, account: refunded.account, group: refunded.group),
            subscription.originalID == original, subscription.latestID == refunded.id
        else { return false }
        if subscription.status != .revoked {
            subscription.status = .revoked
            subscription.autoRenew = false
            subscription.retryAtMS = 0
            subscription.graceUntilMS = 0
            try subscription.save(db)
            try announce(&batch, subscription)
        }
        return true
    }
}
