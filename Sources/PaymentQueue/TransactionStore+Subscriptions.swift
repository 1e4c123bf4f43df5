import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema

// Subscriptions (docs/subscriptions.md): the period a purchase starts, the renewals that follow it on
// the store's clock, and the clock's rate per app.
extension TransactionStore {
    /// First web order line item id; later ones count on from it, across restarts and resets.
    public static let webOrderBase: Int64 = 2_000_000_000_000_000
    /// Most renewals one round of the renewal engine commits together: a backlog is worked through
    /// in writes this size, between which purchases and other calls take their turn.
    public static let renewalsPerRound = 128

    // MARK: The store's clock

    static let renewalRateSQL: CachedSQL = """
        SELECT app, rate FROM pq_renewal_rate WHERE app = ?1
        UNION ALL SELECT app, rate FROM pq_renewal_rate WHERE app = '' LIMIT 1
        """

    /// The rate an app's subscriptions renew at: its own, else the deployment's (the row of app
    /// ''), else ``RenewalClock/defaultRate``.
    static func renewalRate(_ db: any SQLConnection, app: String) throws -> (rate: Storebus_PaymentQueue_V1_RenewalRate, setForApp: Bool) {
        let found = try db.fetchFirst(cached: renewalRateSQL, bind: { $0.text(app) }) { row in (row.text(0), row.int(1)) }
        guard let found, let rate = Storebus_PaymentQueue_V1_RenewalRate(rawValue: found.1), rate != .unspecified else {
            return (RenewalClock.defaultRate, false)
        }
        return (rate, !app.isEmpty && found.0 == app)
    }

    /// The rate an app's subscriptions renew at, and whether it is the app's own.
    public func renewalRate(app: String) async throws -> (rate: Storebus_PaymentQueue_V1_RenewalRate, setForApp: Bool) {
        try await database.read { db in try Self.renewalRate(db, app: app) }
    }

    /// Sets an app's rate (app '' for the deployment's default); unspecified removes the app's own.
    /// Periods already running keep their ends. Returns the rate now in effect.
    @discardableResult
    public func setRenewalRate(_ rate: Storebus_PaymentQueue_V1_RenewalRate, app: String) async throws -> Storebus_PaymentQueue_V1_RenewalRate {
        // No event: a rate changes no queue (policies are written the same way).
        try await database.write { db in
            if rate == .unspecified {
                try db.execute(cached: "DELETE FROM pq_renewal_rate WHERE app = ?", arguments: [app])
            } else {
                try db.execute(cached: "INSERT INTO pq_renewal_rate (app, rate) VALUES (?, ?) ON CONFLICT (app) DO UPDATE SET rate = excluded.rate", arguments: [app, rate.rawValue])
            }
            return try Self.renewalRate(db, app: app).rate
        }
    }

    // MARK: Purchases

    /// The next web order line item id in `shard`.
    static func nextWebOrder(_ db: any SQLConnection, shard: UInt32) throws -> Int64 {
        webOrderBase + (try nextNumber(db, sequence: "web_order", shard: shard))
    }

    static let periodFieldsSQL: CachedSQL = "UPDATE pq_transaction SET expires_ms = ?, web_order = ?, sub_original_id = ?, price = ?, trial = ?, in_intro = ? WHERE id = ?"

    /// A PURCHASED transaction, at `ms`: a non-consumable the account holds already gets its first
    /// purchase as original and no charge. When it buys a subscription, sets the period it pays for
    /// (its end, its web order line item, the subscription's first purchase) on `record` and on its
    /// row if it has one, and moves the account's subscription in the group on. Returns whether the
    /// purchase is charged: not when the account already holds the auto-renewable subscription
    /// bought ("already subscribed": a purchased transaction in the period running, no charge).
    ///
    /// Another product of the group while a period runs takes over at once, with a period of its
    /// own from now; the group's subscription keeps its first purchase. An account that never
    /// subscribed in the group gets the product's introductory offer: a free trial (not charged), a
    /// period paid up front, or pay-as-you-go periods at the offer's price, renewals included.
    static func startPeriod(_ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, _ record: inout TransactionRecord, at ms: Int64) throws -> Bool {
        if record.productType == .nonConsumable {
            // Bought again while held: a purchase with no charge whose original is the first, so
            // that receipts and restores count the product once.
            guard
                let first = try db.fetchFirst(
                    cached: firstHolderSQL,
                    bind: {
                        $0.text(record.app); $0.text(record.account); $0.text(record.productID)
                    }, read: { $0.text(0) })
            else { return true }
            record.subscriptionOriginalID = first
            try savePeriod(db, record)
            return false
        }
        guard record.productType == .autoRenewableSubscription || record.productType == .nonRenewingSubscription,
            let period = RenewalClock.Period(iso8601: record.period)
        else { return true }
        let rate = try renewalRate(db, app: record.app).rate
        guard record.productType == .autoRenewableSubscription, !record.group.isEmpty else {
            record.expiresMS = RenewalClock.end(of: period, startingAt: ms, rate: rate)
            record.webOrder = try nextWebOrder(db, shard: record.shard)
            record.subscriptionOriginalID = record.id
            try savePeriod(db, record)
            return true
        }
        let existing = try SubscriptionRecord.fetch(db, app: record.app, account: record.account, group: record.group)
        if var current = existing, current.status == .active, current.expiresMS > ms {
            let running = try TransactionRecord.fetch(db, id: current.latestID)
            if current.productID != record.productID {
                // Another product of the group: an upgrade (a higher level) or a crossgrade to a
                // product of the same length takes over at once; a downgrade, or a crossgrade to
                // another length, at the next renewal.
                let atOnce =
                    record.level > 0 && current.level > 0 && record.level != current.level
                    ? record.level < current.level : running?.period == record.period
                if atOnce {
                    if let running { try cancelForUpgrade(db, &batch, running, at: ms) }
                    return try startNewPeriod(db, &record, existing: current, at: ms, period: period, rate: rate)
                }
                current.autoRenewProductID = record.productID
                current.autoRenewLevel = record.level
            } else {
                // Already subscribed; a change planned for the next renewal is undone.
                current.autoRenewProductID = record.productID
                current.autoRenewLevel = record.level
            }
            if current.autoRenewProductID != existing?.autoRenewProductID || !current.autoRenew {
                current.autoRenew = true
                current.period = record.period
                current.price = record.price
                current.currency = record.currency
                current.storefront = record.storefront
                try current.save(db)
            }
            // A purchase in the period running, not charged.
            record.expiresMS = current.expiresMS
            record.subscriptionOriginalID = current.originalID
            record.webOrder = running?.webOrder
            try savePeriod(db, record)
            return false
        }
        return try startNewPeriod(db, &record, existing: existing, at: ms, period: period, rate: rate)
    }

    /// A subscription's new period from `ms`, bought by `record`: the group's first purchase (with
    /// the product's introductory offer), a resubscription, or an upgrade taking over. Returns
    /// whether it is charged (not a free trial).
    private static func startNewPeriod(
        _ db: any SQLConnection, _ record: inout TransactionRecord, existing: SubscriptionRecord?, at ms: Int64, period: RenewalClock.Period,
        rate: Storebus_PaymentQueue_V1_RenewalRate
    ) throws -> Bool {
        record.expiresMS = RenewalClock.end(of: period, startingAt: ms, rate: rate)
        record.webOrder = try nextWebOrder(db, shard: record.shard)
        var subscription = SubscriptionRecord(starting: record, at: ms, expiresMS: record.expiresMS!)
        var charged = true
        // An introductory offer, for an account that never subscribed in the group.
        if existing == nil, !record.offer.isEmpty, let offer = try? Storebus_Catalog_V1_IntroductoryPrice(jsonString: record.offer),
            let offerPeriod = RenewalClock.Period(iso8601: offer.subscriptionPeriod.iso8601), offer.numberOfPeriods > 0
        {
            let whole = RenewalClock.Period(unit: offerPeriod.unit, count: offerPeriod.count * Int(offer.numberOfPeriods))
            switch offer.paymentMode {
            case .freeTrial:
                record.trial = true
                record.price = "0"
                record.expiresMS = RenewalClock.end(of: whole, startingAt: ms, rate: rate)
                charged = false
            case .payUpFront:
                record.inIntro = true
                record.price = offer.price
                record.expiresMS = RenewalClock.end(of: whole, startingAt: ms, rate: rate)
            case .payAsYouGo:
                record.inIntro = true
                record.price = offer.price
                record.expiresMS = RenewalClock.end(of: offerPeriod, startingAt: ms, rate: rate)
                subscription.introLeft = Int(offer.numberOfPeriods) - 1
                subscription.introPeriod = offerPeriod.iso8601
                subscription.introPrice = offer.price
            default:
                break
            }
            subscription.expiresMS = record.expiresMS!
        }
        if let existing {
            // A resubscription (or a change of product) in the group keeps the group's first purchase.
            subscription.originalID = existing.originalID
            subscription.originalMS = existing.originalMS
            subscription.renewals = existing.renewals
        }
        record.subscriptionOriginalID = subscription.originalID
        try subscription.save(db)
        try savePeriod(db, record)
        return charged
    }

    /// The paid purchase that holds a product for an account (`?`, `?`, `?`): its first charged,
    /// unrefunded and not cleared purchase (see ``holds(_:app:account:product:)``).
    static let firstHolderSQL: CachedSQL = """
        SELECT t.id FROM pq_transaction t INDEXED BY pq_transaction_account JOIN pq_charge c ON c.transaction_id = t.id
        WHERE t.app = ? AND t.account = ? AND t.product_id = ? AND t.cleared = 0 AND c.refunded = 0 ORDER BY t.created_ms, t.id LIMIT 1
        """

    /// An upgrade at `ms` replaces `running`, the purchase of the period running: it is cancelled
    /// then (its cancellation date, marked upgraded), the unused part of its charge refunded pro
    /// rata, and followers (receipts) told with a refundedTransactions event.
    static func cancelForUpgrade(_ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, _ running: TransactionRecord, at ms: Int64) throws {
        guard running.revokedMS == nil else { return }
        try db.execute(cached: "UPDATE pq_transaction SET upgraded = 1, revoked_ms = ? WHERE id = ?", arguments: [ms, running.id])
        if let expires = running.expiresMS, expires > ms, expires > running.dateMS {
            let unused = Decimal(expires - ms) / Decimal(expires - running.dateMS)
            if let amount = try db.value(String.self, cached: "SELECT amount FROM pq_charge WHERE transaction_id = ?", arguments: [running.id]) {
                try db.execute(cached: "UPDATE pq_charge SET refunded_amount = ? WHERE transaction_id = ?", arguments: [proRata(amount, unused), running.id])
            }
        }
        guard let cancelled = try TransactionRecord.fetch(db, id: running.id) else { return }
        let transaction = try cancelled.transaction(db)
        try batch.appendQueueEvent(
            key: cancelled.queueKey,
            Storebus_PaymentQueue_V1_QueueEvent.with {
                $0.queue = transaction.queue
                $0.refundedTransactions.transactions = [transaction]
            })
    }

    /// `fraction` of a decimal `amount`, to as many decimals as the amount has (the currency's).
    static func proRata(_ amount: String, _ fraction: Decimal) -> String {
        let posix = Locale(identifier: "en_US_POSIX")
        guard let value = Decimal(string: amount, locale: posix) else { return "0" }
        let places = amount.split(separator: ".").dropFirst().first?.count ?? 0
        var exact = value * fraction
        var rounded = Decimal()
        NSDecimalRound(&rounded, &exact, places, .plain)
        // Written with the amount's own number of decimals: "2.50", not "2.5".
        let text = NSDecimalNumber(decimal: rounded).description(withLocale: posix)
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard places > 0 else { return String(parts[0]) }
        let fraction = parts.count > 1 ? String(parts[1]) : ""
        return "\(parts[0]).\(fraction.padding(toLength: places, withPad: "0", startingAt: 0))"
    }

    /// Writes a subscription purchase's period fields to its row (none yet: the insert writes them).
    private static func savePeriod(_ db: any SQLConnection, _ record: TransactionRecord) throws {
        try db.execute(cached: periodFieldsSQL) {
            $0.int(record.expiresMS)
            $0.int(record.webOrder)
            $0.text(record.subscriptionOriginalID)
            $0.text(record.price)
            $0.bool(record.trial)
            $0.bool(record.inIntro)
            $0.text(record.id)
        }
    }

    // MARK: Renewals

    /// Active subscriptions of a shard (`?`) whose period has ended by a time (`?`), earliest first,
    /// at most `?`.
    static let renewalsDueSQL: CachedSQL = """
        SELECT app, account, grp FROM pq_subscription
        WHERE status = \(Storebus_PaymentQueue_V1_SubscriptionStatus.active.rawValue) AND shard = ? AND expires_ms <= ? ORDER BY expires_ms LIMIT ?
        """
    /// The earliest end of an active subscription's period in a shard (`?`).
    static let nextRenewalSQL: CachedSQL =
        "SELECT MIN(expires_ms) FROM pq_subscription WHERE status = \(Storebus_PaymentQueue_V1_SubscriptionStatus.active.rawValue) AND shard = ?"

    /// Renews (or, with auto-renew off, expires) the subscriptions whose period has ended by `now`,
    /// each period its own transaction, at most `limit` of them a shard, in one write a shard of
    /// those this instance owns: whatever stops the process, a period is renewed once or not yet.
    /// Returns how many it renewed, whether more are due, when the next period ends, and whether any
    /// due one waits on its queue (no room).
    public func renewDue(
        now: Date = Date(), limit: Int = TransactionStore.renewalsPerRound
    ) async throws -> (
        renewed: Int, moreDue: Bool, next: Date?, blocked: Int
    ) {
        var total = (renewed: 0, moreDue: false, next: Date?.none, blocked: 0)
        for shard in ownedShards {
            guard let round = try await Self.unlessLost({ try await self.renewDue(shard: shard, now: now, limit: limit) }) else { continue }
            total.renewed += round.renewed
            total.moreDue = total.moreDue || round.moreDue
            total.next = [total.next, round.next].compactMap { $0 }.min()
            total.blocked += round.blocked
        }
        return total
    }

    /// ``renewDue(now:limit:)`` in one shard.
    func renewDue(shard: UInt32, now: Date, limit: Int) async throws -> (renewed: Int, moreDue: Bool, next: Date?, blocked: Int) {
        let nowMS = Self.milliseconds(now)
        let maxUnfinished = self.maxUnfinished
        return try await writer.write { db, batch in
            try batch.requireOwner(shard: shard)
            let due = try db.rows(cached: Self.renewalsDueSQL, arguments: [Int64(shard), nowMS, limit])
            var renewed = 0, blocked = 0
            for row in due {
                guard var subscription = try SubscriptionRecord.fetch(db, app: row[0], account: row[1], group: row[2]) else { continue }
                while subscription.status == .active && subscription.expiresMS <= nowMS && renewed < limit {
                    guard subscription.autoRenew else {
                        // The customer turned auto-renew off: the period ran out (intent 1, voluntary).
                        try Self.expire(db, &batch, &subscription, intent: 1)
                        break
                    }
                    let billing = try Self.billingControls(db, app: subscription.app)
                    if billing.billingRetryOnRenewal {
                        try Self.enterBillingRetry(db, &batch, &subscription, grace: billing.gracePeriodEnabled)
                        break
                    }
                    guard try Self.renew(db, &batch, &subscription, now: nowMS, maxUnfinished: maxUnfinished) else {
                        blocked += 1
                        break
                    }
                    renewed += 1
                }
            }
            let retries = try db.rows(cached: Self.retriesDueSQL, arguments: [Int64(shard), nowMS, limit])
            for row in retries {
                guard var subscription = try SubscriptionRecord.fetch(db, app: row[0], account: row[1], group: row[2]) else { continue }
                switch try Self.retry(db, &batch, &subscription, now: nowMS, maxUnfinished: maxUnfinished) {
                case true?: renewed += 1
                case nil: blocked += 1
                default: break
                }
            }
            let nextPeriod = try db.value(Int64.self, cached: Self.nextRenewalSQL, arguments: [Int64(shard)])
            let nextRetry = try db.value(Int64.self, cached: Self.nextRetrySQL, arguments: [Int64(shard)])
            let next = [nextPeriod, nextRetry].compactMap { $0 }.min()
            let moreDue = (next.map { $0 <= nowMS } ?? false) && blocked < due.count + retries.count
            return (renewed, moreDue, next.map(EpochMilliseconds.date), blocked)
        }
    }

    /// One renewal of `subscription`: a PURCHASED transaction (reason RENEWAL) in the queue of its
    /// latest purchase and delivered to the account's other queues in the app, for the period that starts where the last ended, charged, announced, and the
    /// subscription moved on to it. False, with nothing written, when that queue has no room for
    /// another unfinished transaction: the renewal waits until the app finishes some.
    static func renew(
        _ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, _ subscription: inout SubscriptionRecord, now nowMS: Int64, maxUnfinished: Int
    ) throws -> Bool {
        guard let period = RenewalClock.Period(iso8601: subscription.period) else {
            // Not a period this store can renew (a row written by hand): it ends here.
            try expire(db, &batch, &subscription, intent: 5)
            return true
        }
        let queue = subscription.queue
        let load = try unfinishedLoad(db, queueKey: queue.key)
        guard load.count < maxUnfinished else { return false }
        let start = subscription.expiresMS
        var record = TransactionRecord(
            id: try nextIdentifier(db, shard: subscription.shard), shard: subscription.shard, queue: queue, state: .purchased,
            payment: .with {
                $0.productIdentifier = subscription.autoRenewProductID
                $0.quantity = 1
            },
            productType: .autoRenewableSubscription, storefront: subscription.storefront, price: subscription.price,
            currency: subscription.currency, error: nil, policy: .with { $0.mode = .approve }, decideAtMS: start, nowMS: nowMS,
            downloads: "[]"
        )
        record.dateMS = start
        record.period = subscription.period
        record.group = subscription.group
        record.renewal = true
        var length = period
        if subscription.introLeft > 0, let introPeriod = RenewalClock.Period(iso8601: subscription.introPeriod) {
            // A pay-as-you-go introductory offer's next period: its length, its price.
            length = introPeriod
            record.price = subscription.introPrice
            record.inIntro = true
        }
        record.expiresMS = RenewalClock.end(of: length, startingAt: start, rate: try renewalRate(db, app: subscription.app).rate)
        record.webOrder = try nextWebOrder(db, shard: subscription.shard)
        record.subscriptionOriginalID = subscription.originalID
        let transaction = try record.transaction(db)
        record.replayBytes = try replayWeight(transaction)
        guard load.bytes + record.replayBytes <= maxUnfinishedReplayBytes else { return false }
        try announce(&batch, key: queue.key, [transaction], queue: queue)
        try record.insert(db)
        try deliver(db, &batch, transaction, weight: record.replayBytes, owner: queue.key, at: nowMS, maxUnfinished: maxUnfinished)
        try charge(db, record, at: start)
        if record.inIntro { subscription.introLeft -= 1 }
        subscription.productID = subscription.autoRenewProductID
        subscription.level = subscription.autoRenewLevel
        subscription.latestID = record.id
        subscription.expiresMS = record.expiresMS!
        subscription.renewals += 1
        try subscription.save(db)
        try announce(&batch, subscription)
        return true
    }

    /// When the earliest active subscription's period ends, or the earliest retry of one in billing
    /// retry is due, if any.
    public func nextRenewal() async throws -> Date? {
        let shards = ownedShards
        return try await database.read { db in
            try shards.flatMap { shard in
                [
                    try db.value(Int64.self, cached: Self.nextRenewalSQL, arguments: [Int64(shard)]),
                    try db.value(Int64.self, cached: Self.nextRetrySQL, arguments: [Int64(shard)])
                ]
            }.compactMap { $0 }.min().map(EpochMilliseconds.date)
        }
    }

    /// Ends `subscription` at the end of its period, for `intent` (receipts' expiration_intent), and
    /// tells followers.
    static func expire(_ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, _ subscription: inout SubscriptionRecord, intent: Int) throws {
        subscription.status = .expired
        subscription.expirationIntent = intent
        try subscription.save(db)
        try announce(&batch, subscription)
    }

    /// After a PURCHASED auto-renewable transaction's event: its subscription's state, as that
    /// purchase left it (a new period, a resubscription, an upgrade, a planned downgrade, "already
    /// subscribed"), so that followers see every change of a subscription as a `subscription_changed`
    /// event after the transaction that made it.
    static func announceSubscription(_ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, of record: TransactionRecord) throws {
        guard record.state == .purchased, record.productType == .autoRenewableSubscription, !record.group.isEmpty,
            let subscription = try SubscriptionRecord.fetch(db, app: record.app, account: record.account, group: record.group)
        else { return }
        try announce(&batch, subscription)
    }

    /// Tells followers (the receipt service) the subscription's state: a `subscription_changed` event
    /// in the log of its queue.
    static func announce(_ batch: inout EventLogWriter.Batch, _ subscription: SubscriptionRecord) throws {
        let queue = subscription.queue
        try batch.appendQueueEvent(
            key: queue.key,
            Storebus_PaymentQueue_V1_QueueEvent.with {
                $0.queue = queue
                $0.subscriptionChanged.subscription = subscription.message
            })
    }

    // MARK: Auto-renew

    /// Turns auto-renew off or on for the account's subscription in `group`; returns the subscription.
    /// NOT_FOUND when the account never subscribed in the group; FAILED_PRECONDITION once it expired.
    /// Setting what is already set changes nothing and announces nothing.
    public func setAutoRenew(_ on: Bool, app: String, account: String, group: String) async throws -> Storebus_PaymentQueue_V1_Subscription {
        try await writer.write { db, batch in
            guard var subscription = try SubscriptionRecord.fetch(db, app: app, account: account, group: group) else {
                throw RPCError.resource(.notFound, type: "subscription", name: group, "account \(RPCError.echo(account)) has no subscription in group \(RPCError.echo(group))")
            }
            try batch.requireOwner(shard: subscription.shard)
            guard subscription.status != .expired && subscription.status != .revoked else {
                throw RPCError(.failedPrecondition, "the subscription in group \(RPCError.echo(group)) has ended; buy it again to resubscribe")
            }
            guard subscription.autoRenew != on else { return subscription.message }
            subscription.autoRenew = on
            try subscription.save(db)
            try Self.announce(&batch, subscription)
            return subscription.message
        }
    }

    // MARK: Reading

    /// An account's subscriptions in an app, one per group it ever subscribed in, by group.
    public func subscriptions(app: String, account: String) async throws -> [Storebus_PaymentQueue_V1_Subscription] {
        try await database.read { db in
            try db.rows(
                cached: "SELECT \(SubscriptionRecord.columns) FROM pq_subscription WHERE app = ? AND account = ? ORDER BY grp",
                arguments: [app, account]
            ).map { SubscriptionRecord($0).message }
        }
    }
}
