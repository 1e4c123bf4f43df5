import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema

/// One row of `pq_subscription`: an account's auto-renewable subscription in one group, which every
/// purchase and renewal in the group moves on.
struct SubscriptionRecord: Sendable, Equatable {
    var app: String
    var account: String
    var group: String
    /// The product of the period running (or of the last one).
    var productID: String
    /// The product it renews as.
    var autoRenewProductID: String
    var autoRenew: Bool
    /// The first purchase; it stays across renewals and resubscriptions in the group.
    var originalID: String
    var originalMS: Int64
    /// The transaction of the period running (or of the last one).
    var latestID: String
    var expiresMS: Int64
    var status: Storebus_PaymentQueue_V1_SubscriptionStatus
    var expirationIntent: Int
    var renewals: Int
    /// The device whose queue hears the renewals: the one of the latest purchase.
    var device: String
    /// The period it renews for (ISO 8601) and the price it renews at, as bought.
    var period: String
    var price: String
    var currency: String
    var storefront: String
    /// In billing retry: when the next retry is due, when retrying ends, and (in a grace period)
    /// when the grace period ends; 0 otherwise.
    var retryAtMS: Int64 = 0
    var retryUntilMS: Int64 = 0
    var graceUntilMS: Int64 = 0
    /// A pay-as-you-go introductory offer: its periods still to come, their length and price.
    var introLeft = 0
    var introPeriod = ""
    var introPrice = ""
    /// The levels in the group of the product it runs as and of the one it renews as.
    var level = 0
    var autoRenewLevel = 0
    /// The shard of its account (0 when the log is not sharded): the instance owning that shard
    /// renews it.
    var shard: UInt32 = 0

    static let columns = """
        app, account, grp, product_id, auto_renew_product_id, auto_renew, original_id, original_ms, latest_id,
        expires_ms, status, expiration_intent, renewals, device, period, price, currency, storefront,
        retry_at_ms, retry_until_ms, grace_until_ms, intro_left, intro_period, intro_price, level, auto_renew_level, shard
        """

    /// Writes every column of ``columns``, one `?` each (counted from the list, so that a column
    /// added there cannot leave the statement a parameter short).
    static let saveSQL: CachedSQL = {
        let names = columns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        let key: Set = ["app", "account", "grp"]
        let updates = names.filter { !key.contains($0) }.map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        return "INSERT INTO pq_subscription (\(columns)) VALUES (\(names.map { _ in "?" }.joined(separator: ", "))) ON CONFLICT (app, account, grp) DO UPDATE SET \(updates)"
    }()

    init(_ row: SQLRow) {
        app = row[0]
        account = row[1]
        group = row[2]
        productID = row[3]
        autoRenewProductID = row[4]
        autoRenew = row[5]
        originalID = row[6]
        originalMS = row[7]
        latestID = row[8]
        expiresMS = row[9]
        status = Storebus_PaymentQueue_V1_SubscriptionStatus(rawValue: row[10]) ?? .unspecified
        expirationIntent = row[11]
        renewals = row[12]
        device = row[13]
        period = row[14]
        price = row[15]
        currency = row[16]
        storefront = row[17]
        retryAtMS = row[18]
        retryUntilMS = row[19]
        graceUntilMS = row[20]
        introLeft = row[21]
        introPeriod = row[22]
        introPrice = row[23]
        level = row[24]
        autoRenewLevel = row[25]
        shard = UInt32(row[26] as Int64)
    }

    /// A subscription starting with `purchase`, a PURCHASED transaction of its first period ending at
    /// `expiresMS`.
    init(starting purchase: TransactionRecord, at ms: Int64, expiresMS: Int64) {
        app = purchase.app
        account = purchase.account
        group = purchase.group
        productID = purchase.productID
        autoRenewProductID = purchase.productID
        autoRenew = true
        originalID = purchase.id
        originalMS = ms
        latestID = purchase.id
        self.expiresMS = expiresMS
        status = .active
        expirationIntent = 0
        renewals = 0
        device = purchase.device
        period = purchase.period
        price = purchase.price
        currency = purchase.currency
        storefront = purchase.storefront
        level = purchase.level
        autoRenewLevel = purchase.level
        shard = purchase.shard
    }

    /// The account's subscription in `group`, if it ever subscribed there.
    static func fetch(_ db: any SQLConnection, app: String, account: String, group: String) throws -> SubscriptionRecord? {
        try db.row(cached: fetchSQL, arguments: [app, account, group]).map(SubscriptionRecord.init)
    }

    static let fetchSQL: CachedSQL = "SELECT \(columns) FROM pq_subscription WHERE app = ? AND account = ? AND grp = ?"

    /// Writes the record, replacing the row of its account and group.
    func save(_ db: any SQLConnection) throws {
        try db.execute(
            cached: Self.saveSQL,
            arguments: [
                app, account, group, productID, autoRenewProductID, autoRenew, originalID, originalMS, latestID,
                expiresMS, status.rawValue, expirationIntent, renewals, device, period, price, currency, storefront,
                retryAtMS, retryUntilMS, graceUntilMS, introLeft, introPeriod, introPrice, level, autoRenewLevel, Int64(shard)
            ])
    }

    /// The queue its renewals go to.
    var queue: Storebus_PaymentQueue_V1_QueueRef {
        .with {
            $0.appBundleID = app
            $0.accountID = account
            $0.deviceID = device
        }
    }

    /// The subscription as the contract shows it.
    var message: Storebus_PaymentQueue_V1_Subscription {
        .with {
            $0.subscriptionGroupIdentifier = group
            $0.productIdentifier = productID
            $0.originalTransactionIdentifier = originalID
            $0.latestTransactionIdentifier = latestID
            $0.originalPurchaseDate = TransactionStore.timestamp(milliseconds: originalMS)
            $0.expiresDate = TransactionStore.timestamp(milliseconds: expiresMS)
            $0.autoRenewStatus = autoRenew
            $0.autoRenewProductIdentifier = autoRenewProductID
            $0.status = status
            $0.expirationIntent = Int32(expirationIntent)
            $0.renewalCount = UInt32(clamping: renewals)
            $0.queue = queue
            if status == .billingRetry || status == .gracePeriod {
                $0.billingRetryEndsDate = TransactionStore.timestamp(milliseconds: retryUntilMS)
            }
            if status == .gracePeriod { $0.gracePeriodExpiresDate = TransactionStore.timestamp(milliseconds: graceUntilMS) }
        }
    }
}
