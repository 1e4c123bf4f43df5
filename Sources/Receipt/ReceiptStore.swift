import Foundation
import GRDB
import ReceiptFormat
import StoreBus
import StoreBusStorage
import StoreSchema
import SwiftProtobuf

/// A purchased or restored transaction as the receipt service keeps it.
public struct StoredPurchase: Sendable, Equatable {
    public var id: String
    public var app: String
    public var account: String
    public var device: String
    public var productID: String
    public var productType: Storebus_Catalog_V1_ProductType
    public var quantity: Int
    public var state: Storebus_PaymentQueue_V1_TransactionState
    public var purchaseMS: Int64
    public var originalID: String
    public var originalPurchaseMS: Int64
    public var expiresMS: Int64?
    public var cancellationMS: Int64?
    public var cancellationReason: Storebus_PaymentQueue_V1_RevocationReason
    public var isTrialPeriod: Bool
    public var finished: Bool
    /// Whether the account's history was cleared since: it no longer counts.
    public var cleared: Bool
    public var storefront: String
    public var applicationUsername: String
    public var price: String
    public var currency: String
    /// The event position that last changed it.
    public var seq: UInt64
    /// A subscription period's billing line, as the payment queue gave it (nil before it did).
    public var webOrder: Int64?
    /// Whether the store made it, renewing a subscription.
    public var renewal: Bool
    /// An auto-renewable subscription's group (empty for other products).
    public var group: String
    /// Whether the period bought is an introductory offer paid as you go or up front.
    public var isInIntroOfferPeriod: Bool
    /// Whether an upgrade replaced the period before its end.
    public var isUpgraded: Bool

    /// Whether it stays in the app receipt: every purchase but a consumable once finished.
    public var inReceipt: Bool { productType != .consumable || !finished }

    /// Every column, in the order ``init(_:)`` reads them (by index: reading a row by column names
    /// took a fifth of a 100-purchase VerifyReceipt).
    static let columns = """
        id, app, account, device, product_id, product_type, quantity, state, purchase_ms, original_id, original_purchase_ms,
        expires_ms, cancellation_ms, cancellation_reason, trial, finished, storefront, application_username, price, currency, seq, cleared, web_order, renewal, sub_group, intro, upgraded
        """
}

extension StoredPurchase {
    /// The purchase a row holds, its columns read as ``columns`` lists them.
    init(_ row: SQLRow) {
        id = row[0]
        app = row[1]
        account = row[2]
        device = row[3]
        productID = row[4]
        productType = Storebus_Catalog_V1_ProductType(rawValue: row[5]) ?? .unspecified
        quantity = row[6]
        state = Storebus_PaymentQueue_V1_TransactionState(rawValue: row[7]) ?? .unspecified
        purchaseMS = row[8]
        originalID = row[9]
        originalPurchaseMS = row[10]
        expiresMS = row[11]
        cancellationMS = row[12]
        cancellationReason = Storebus_PaymentQueue_V1_RevocationReason(rawValue: row[13]) ?? .unspecified
        isTrialPeriod = row[14]
        finished = row[15]
        storefront = row[16]
        applicationUsername = row[17]
        price = row[18]
        currency = row[19]
        seq = UInt64(row[20] as Int64)
        cleared = row[21]
        webOrder = row[22]
        renewal = row[23]
        group = row[24]
        isInIntroOfferPeriod = row[25]
        isUpgraded = row[26]
    }
}

/// The receipt service's state: what the payment queue's log said of each purchase (applied by
/// ``ReceiptReducer``, its position committed with it by the follower kit, so that a restart at any
/// moment applies each event exactly once).
public final class ReceiptStore: Sendable {
    /// The log followed: the payment queue's.
    static let log = ServiceRegistry.paymentQueueLog

    let database: any SQLDatabase

    init(database: any SQLDatabase) {
        self.database = database
    }

    static func apply(_ db: any SQLConnection, _ event: Storebus_PaymentQueue_V1_QueueEvent, seq: UInt64, fast: Bool = FastPaths.enabled) throws {
        switch event.event {
        case .updatedTransactions(let updated):
            for transaction in updated.transactions { try keep(db, transaction, seq: seq, fast: fast) }
        case .refundedTransactions(let refunded):
            for transaction in refunded.transactions { try keep(db, transaction, seq: seq, fast: fast) }
        case .removedTransactions(let removed):
            for transaction in removed.transactions {
                try db.execute(cached: "UPDATE rc_transaction SET finished = 1, seq = ? WHERE id = ?", arguments: [Int64(seq), transaction.transactionIdentifier])
            }
        case .historyCleared(let cleared):
            try db.execute(
                cached: "UPDATE rc_transaction SET cleared = 1, seq = ? WHERE app = ? AND account = ? AND cleared = 0 AND seq < ?",
                arguments: [Int64(seq), cleared.appBundleID, cleared.accountID, Int64(seq)])
        case .subscriptionChanged(let changed):
            // The renewal state purchases and renewals do not show (auto-renew, expiry), for
            // pending_renewal_info: one row per account and group, the latest.
            let subscription = changed.subscription
            try db.execute(
                cached: """
                    INSERT INTO rc_subscription (app, account, grp, original_id, auto_renew, auto_renew_product_id, status,
                        expiration_intent, seq, grace_until_ms)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (app, account, grp) DO UPDATE SET original_id = excluded.original_id, auto_renew = excluded.auto_renew,
                        auto_renew_product_id = excluded.auto_renew_product_id, status = excluded.status,
                        expiration_intent = excluded.expiration_intent, seq = excluded.seq, grace_until_ms = excluded.grace_until_ms
                    """,
                arguments: [
                    subscription.queue.appBundleID, subscription.queue.accountID, subscription.subscriptionGroupIdentifier,
                    subscription.originalTransactionIdentifier, subscription.autoRenewStatus, subscription.autoRenewProductIdentifier,
                    subscription.status.rawValue, Int(subscription.expirationIntent), Int64(seq),
                    subscription.hasGracePeriodExpiresDate ? milliseconds(subscription.gracePeriodExpiresDate) : 0
                ])
            // A control that moved the end of the period running (renew now, expire now, extend).
            if subscription.hasExpiresDate && !subscription.latestTransactionIdentifier.isEmpty {
                try db.execute(
                    cached: "UPDATE rc_transaction SET expires_ms = ?, seq = ? WHERE id = ? AND expires_ms IS DISTINCT FROM ?",
                    arguments: [
                        milliseconds(subscription.expiresDate), Int64(seq), subscription.latestTransactionIdentifier, milliseconds(subscription.expiresDate)
                    ])
                if db.changesCount > 0 { try encodeEntry(db, id: subscription.latestTransactionIdentifier) }
            }
        case .revokedEntitlements, .restoreCompletedTransactionsFinished, .restoreCompletedTransactionsFailed, .updatedDownloads, nil:
            // Refunds arrive as refundedTransactions, with every transaction they cancel; the rest
            // changes no receipt.
            break
        }
    }

    /// The columns a purchase's row is written with (``keep(_:_:seq:fast:)``), in order.
    static let keptColumns = """
        id, app, account, device, product_id, product_type, quantity, state, purchase_ms,
        original_id, original_purchase_ms, expires_ms, cancellation_ms, cancellation_reason, trial, finished,
        storefront, application_username, price, currency, seq, web_order, renewal, sub_group, intro, upgraded
        """
    static let keepSQL: CachedSQL = """
        INSERT INTO rc_transaction (\(keptColumns))
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET state = excluded.state, purchase_ms = excluded.purchase_ms,
            expires_ms = excluded.expires_ms, cancellation_ms = excluded.cancellation_ms,
            cancellation_reason = excluded.cancellation_reason, trial = excluded.trial,
            finished = CASE WHEN excluded.finished > rc_transaction.finished THEN excluded.finished ELSE rc_transaction.finished END, seq = excluded.seq, upgraded = excluded.upgraded
        """
    /// A purchase's first row, its receipt entry with it; nothing when the row exists.
    static let keepNewSQL: CachedSQL = """
        INSERT INTO rc_transaction (\(keptColumns), entry)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO NOTHING
        """
    static let keepAccountSQL: CachedSQL = """
        INSERT INTO rc_account (app, account, first_ms) VALUES (?, ?, ?)
        ON CONFLICT (app, account) DO UPDATE SET first_ms = CASE WHEN excluded.first_ms < rc_account.first_ms THEN excluded.first_ms ELSE rc_account.first_ms END
        """

    /// Records a purchased or restored transaction (anything else never reaches a receipt), and its
    /// receipt entry as its row then says.
    ///
    /// `fast` (the fast path, `FastPaths.enabled`): a purchase not recorded before, as nearly every
    /// one is, is written once with its entry, encoded from the row it is given (``StoredPurchase``
    /// as it reads back); only one already recorded is updated and read back to encode it. Plain:
    /// every row written, read back and written again with its entry.
    static func keep(_ db: any SQLConnection, _ transaction: Storebus_PaymentQueue_V1_PaymentTransaction, seq: UInt64, fast: Bool = FastPaths.enabled) throws {
        guard transaction.transactionState == .purchased || transaction.transactionState == .restored else { return }
        let purchaseMS = milliseconds(transaction.transactionDate)
        let restored = transaction.transactionState == .restored && transaction.hasOriginalTransaction
        var originalID = restored ? transaction.originalTransaction.transactionIdentifier : transaction.transactionIdentifier
        var originalMS = restored ? milliseconds(transaction.originalTransaction.transactionDate) : purchaseMS
        let subscriptionOriginal = restored ? transaction.originalTransaction.originalTransactionID : transaction.originalTransactionID
        if !subscriptionOriginal.isEmpty && subscriptionOriginal != originalID {
            // A renewal, or a resubscription: the subscription's first purchase, recorded before it.
            originalID = subscriptionOriginal
            originalMS =
                try db.value(Int64.self, cached: "SELECT purchase_ms FROM rc_transaction WHERE id = ?", arguments: [subscriptionOriginal]) ?? originalMS
        }
        let webOrder = restored ? transaction.originalTransaction.webOrderLineItemID : transaction.webOrderLineItemID
        let queue = transaction.queue
        let purchase = StoredPurchase(
            id: transaction.transactionIdentifier, app: queue.appBundleID, account: queue.accountID, device: queue.deviceID,
            productID: transaction.payment.productIdentifier, productType: transaction.productType, quantity: max(1, Int(transaction.payment.quantity)),
            state: transaction.transactionState, purchaseMS: purchaseMS, originalID: originalID, originalPurchaseMS: originalMS,
            expiresMS: transaction.hasExpiresDate ? milliseconds(transaction.expiresDate) : nil,
            cancellationMS: transaction.hasCancellationDate ? milliseconds(transaction.cancellationDate) : nil,
            cancellationReason: transaction.cancellationReason, isTrialPeriod: transaction.isTrialPeriod, finished: transaction.finished, cleared: false,
            storefront: transaction.storefront, applicationUsername: transaction.payment.applicationUsername, price: transaction.price,
            currency: transaction.currencyCode, seq: seq, webOrder: webOrder == 0 ? nil : webOrder, renewal: transaction.transactionReason == .renewal,
            group: restored ? transaction.originalTransaction.subscriptionGroupIdentifier : transaction.subscriptionGroupIdentifier,
            isInIntroOfferPeriod: transaction.isInIntroOfferPeriod, isUpgraded: transaction.isUpgraded)
        let row: [any SQLArgument] = [
            purchase.id, purchase.app, purchase.account, purchase.device, purchase.productID, purchase.productType.rawValue, purchase.quantity,
            purchase.state.rawValue, purchase.purchaseMS, purchase.originalID, purchase.originalPurchaseMS, purchase.expiresMS, purchase.cancellationMS,
            purchase.cancellationReason.rawValue, purchase.isTrialPeriod, purchase.finished, purchase.storefront, purchase.applicationUsername,
            purchase.price, purchase.currency, Int64(seq), purchase.webOrder, purchase.renewal, purchase.group, purchase.isInIntroOfferPeriod,
            purchase.isUpgraded
        ]
        try db.execute(cached: keepAccountSQL, arguments: [queue.appBundleID, queue.accountID, originalMS])
        if fast {
            try db.execute(cached: keepNewSQL, arguments: row + [Data(try ReceiptBook.entry(purchase).attributeDER())])
            if db.changesCount > 0 { return }
        }
        try db.execute(cached: keepSQL, arguments: row)
        try encodeEntry(db, id: transaction.transactionIdentifier)
    }

    /// Encodes the receipt attribute of the purchase `id` as its row now says, and keeps it.
    static func encodeEntry(_ db: any SQLConnection, id: String) throws {
        guard let row = try db.row(cached: "SELECT \(StoredPurchase.columns) FROM rc_transaction WHERE id = ?", arguments: [id]) else {
            return
        }
        let entry = try ReceiptBook.entry(StoredPurchase(row)).attributeDER()
        try db.execute(cached: "UPDATE rc_transaction SET entry = ? WHERE id = ?", arguments: [Data(entry), id])
    }

    /// The receipt attributes of the account's purchases that its receipts hold (its history not
    /// cleared; consumables until finished), in no order (a receipt's set sorts them): those kept,
    /// and those of rows from before they were kept encoded now.
    public func receiptEntries(app: String, account: String) async throws -> [[UInt8]] {
        try await database.read { db in
            // Each kept attribute read by SQLite's C API straight into an array (fast path; GRDB's
            // rows and `Data` with the switch off): for 1,000 purchases the rows were about half a
            // receipt's cost.
            var entries: [[UInt8]] = []
            try db.forEachRow(
                cached: Self.keptEntriesSQL,
                bind: {
                    $0.text(app); $0.text(account)
                }
            ) { entries.append($0.bytes(0)) }
            for row in try db.rows(cached: "SELECT \(StoredPurchase.columns) FROM rc_transaction WHERE \(Self.held) AND entry IS NULL", arguments: [app, account]) {
                entries.append(try ReceiptBook.entry(StoredPurchase(row)).attributeDER())
            }
            return entries
        }
    }

    /// The purchases of an account (`app`, `account` bound) that its receipts hold.
    static let held = "app = ? AND account = ? AND \(heldCondition)"
    /// What makes a purchase one its account's receipts hold. A query must name it exactly so (as
    /// ``held`` does) for SQLite and PostgreSQL to read the index of held purchases.
    static let heldCondition = "cleared = 0 AND (product_type != \(Storebus_Catalog_V1_ProductType.consumable.rawValue) OR finished = 0)"
    /// The index of the purchases receipts hold, by account, in their order.
    static let heldIndexSQL = "CREATE INDEX rc_transaction_held ON rc_transaction (app, account, purchase_ms, id) WHERE \(heldCondition)"
    static let keptEntriesSQL = CachedSQL("SELECT entry FROM rc_transaction WHERE \(held) AND entry IS NOT NULL")

    /// The account's purchases in the app that its history still holds, oldest first.
    public func purchases(app: String, account: String, includingCleared: Bool = false) async throws -> [StoredPurchase] {
        try await database.read { db in
            let sql: CachedSQL = "SELECT \(StoredPurchase.columns) FROM rc_transaction WHERE app = ? AND account = ?\(includingCleared ? "" : " AND cleared = 0") ORDER BY purchase_ms, id"
            return try db.rows(cached: sql, arguments: [app, account]).map(StoredPurchase.init)
        }
    }

    /// What a verification answers beside each of the account's purchases (cleared ones too), by
    /// transaction id: its four columns read in place (fast path). With the switch off, every column
    /// of every purchase through GRDB's rows, then the three kept: for a 100-purchase receipt those
    /// rows were a tenth of the receipt service's CPU per verification.
    public func knownPurchases(app: String, account: String, direct: Bool = FastPaths.enabled) async throws -> [String: KnownPurchase] {
        guard direct else { return KnownPurchase.byID(try await purchases(app: app, account: account, includingCleared: true)) }
        return try await database.read { db in
            var known: [String: KnownPurchase] = [:]
            try db.forEachRow(
                cached: Self.knownSQL,
                bind: {
                    $0.text(app); $0.text(account)
                }
            ) { row in
                known[row.text(0)] = KnownPurchase(
                    cancellationReason: Storebus_PaymentQueue_V1_RevocationReason(rawValue: row.int(1)) ?? .unspecified, device: row.text(2), isUpgraded: row.bool(3))
            }
            return known
        }
    }

    static let knownSQL = CachedSQL("SELECT id, cancellation_reason, device, upgraded FROM rc_transaction WHERE app = ? AND account = ?")

    /// The renewal state of the account's auto-renewable subscriptions that the payment queue told
    /// (auto-renew changes, expiry), by original transaction id.
    public func renewalStates(app: String, account: String) async throws -> [String: RenewalState] {
        try await database.read { db in
            let rows = try db.rows(
                cached: """
                    SELECT original_id, grp, auto_renew, auto_renew_product_id, status, expiration_intent, grace_until_ms
                    FROM rc_subscription WHERE app = ? AND account = ?
                    """
                , arguments: [app, account])
            return Dictionary(
                rows.map { row in
                    (
                        row[0] as String,
                        RenewalState(
                            group: row[1], autoRenew: row[2], autoRenewProductID: row[3],
                            status: Storebus_PaymentQueue_V1_SubscriptionStatus(rawValue: row[4]) ?? .unspecified, expirationIntent: row[5],
                            graceUntilMS: row[6])
                    )
                }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// The periods of the account's auto-renewable subscription whose first purchase is `original`
    /// (its restored copies included), cleared ones too.
    public func subscriptionPurchases(app: String, account: String, original: String) async throws -> [StoredPurchase] {
        try await database.read { db in
            let sql: CachedSQL = "SELECT \(StoredPurchase.columns) FROM rc_transaction WHERE app = ? AND account = ? AND original_id = ? AND product_type = ? ORDER BY purchase_ms, id"
            return try db.rows(
                cached: sql, arguments: [app, account, original, Storebus_Catalog_V1_ProductType.autoRenewableSubscription.rawValue]
            ).map(StoredPurchase.init)
        }
    }

    /// The account whose history holds the app's transaction `id` (nil: none does, or its history
    /// was cleared since): how the App Store Server API finds a customer from any of its transactions.
    public func account(app: String, transaction id: String) async throws -> String? {
        try await database.read { db in
            try db.value(String.self, cached: "SELECT account FROM rc_transaction WHERE id = ? AND app = ? AND cleared = 0", arguments: [id, app])
        }
    }

    /// The app's transaction `id`, if the history of the account holding it still does.
    public func purchase(app: String, id: String) async throws -> StoredPurchase? {
        try await database.read { db in
            let sql: CachedSQL = "SELECT \(StoredPurchase.columns) FROM rc_transaction WHERE id = ? AND app = ? AND cleared = 0"
            return try db.row(cached: sql, arguments: [id, app]).map(StoredPurchase.init)
        }
    }

    /// One purchase of the account, if its history still holds it (or, `includingCleared`, if it
    /// ever held it).
    public func purchase(app: String, account: String, id: String, includingCleared: Bool = false) async throws -> StoredPurchase? {
        try await database.read { db in try Self.purchase(db, app: app, account: account, id: id, includingCleared: includingCleared) }
    }

    /// ``purchase(app:account:id:includingCleared:)`` in an open transaction.
    static func purchase(_ db: any SQLConnection, app: String, account: String, id: String, includingCleared: Bool) throws -> StoredPurchase? {
        let sql: CachedSQL = "SELECT \(StoredPurchase.columns) FROM rc_transaction WHERE id = ? AND app = ? AND account = ?\(includingCleared ? "" : " AND cleared = 0")"
        return try db.row(cached: sql, arguments: [id, app, account]).map(StoredPurchase.init)
    }

    /// A purchase's name: its app, account and transaction id.
    struct PurchaseKey: Hashable {
        var app: String
        var account: String
        var id: String
    }

    /// The purchases named that the accounts' histories hold or once held, in one read.
    func purchases(_ keys: [(app: String, account: String, id: String)]) async throws -> [PurchaseKey: StoredPurchase] {
        guard !keys.isEmpty else { return [:] }
        return try await database.read { db in
            var found: [PurchaseKey: StoredPurchase] = [:]
            for key in keys {
                found[PurchaseKey(app: key.app, account: key.account, id: key.id)] = try Self.purchase(
                    db, app: key.app, account: key.account, id: key.id, includingCleared: true)
            }
            return found
        }
    }

    /// The opaque value of the device's receipts and when the account first had the app, made on
    /// first use. With `revoked`, a new opaque value marked revoked (a sandbox receipt issued revoked).
    func device(app: String, account: String, device: String, revoked: Bool = false, now: Date) async throws -> (opaque: [UInt8], firstMS: Int64) {
        // Known devices (every refresh but a device's first) are read, not written: a write
        // waits for its sync.
        if !revoked, let known = try await database.read({ db in try Self.knownDevice(db, app: app, account: account, device: device) }) {
            return known
        }
        return try await database.write { db in
            let nowMS = Self.milliseconds(now)
            try db.execute(cached: "INSERT INTO rc_account (app, account, first_ms) VALUES (?, ?, ?) ON CONFLICT (app, account) DO NOTHING", arguments: [app, account, nowMS])
            if !revoked, let known = try Self.knownDevice(db, app: app, account: account, device: device) { return known }
            let firstMS = try db.value(Int64.self, cached: "SELECT first_ms FROM rc_account WHERE app = ? AND account = ?", arguments: [app, account]) ?? nowMS
            var generator = SystemRandomNumberGenerator()
            let opaque = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            try db.execute(
                cached: "INSERT INTO rc_device (opaque, app, account, device, revoked) VALUES (?, ?, ?, ?, ?)",
                arguments: [Data(opaque), app, account, device, revoked])
            return (opaque, firstMS)
        }
    }

    /// The opaque value of a device seen before and its account's first date, when both are known.
    static func knownDevice(_ db: any SQLConnection, app: String, account: String, device: String) throws -> (opaque: [UInt8], firstMS: Int64)? {
        try db.row(
            cached: """
                SELECT d.opaque, a.first_ms FROM rc_device d JOIN rc_account a ON a.app = d.app AND a.account = d.account
                WHERE d.app = ? AND d.account = ? AND d.device = ? AND d.revoked = 0
                """, arguments: [app, account, device]
        ).map { row in (Array(row[0] as Data), row[1]) }
    }

    /// Whose receipts carry `opaque`.
    func owner(opaque: [UInt8]) async throws -> (app: String, account: String, device: String, revoked: Bool)? {
        try await database.read { db in
            try db.row(cached: "SELECT app, account, device, revoked FROM rc_device WHERE opaque = ?", arguments: [Data(opaque)]).map {
                ($0[0], $0[1], $0[2], $0[3])
            }
        }
    }

    static func milliseconds(_ timestamp: Google_Protobuf_Timestamp) -> Int64 {
        timestamp.seconds * 1000 + Int64(timestamp.nanos / 1_000_000)
    }

    static func milliseconds(_ date: Date) -> Int64 {
        EpochMilliseconds.of(date)
    }
}
