import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema
import SwiftProtobuf

/// One row of `pq_transaction` as Swift values.
///
/// Rows are read through an explicit column list, by position, in place from the statement, and
/// written with their values bound by position (see StoreBusStorage's `Database.fetchFirst(cached:bind:read:)`):
/// a transaction being created or decided is built here in memory and written once, rather than
/// written, read back with `RETURNING *` and written again.
struct TransactionRecord: Sendable, Equatable {
    var id: String
    var app: String
    var account: String
    var device: String
    var queueKey: String
    var state: Storebus_PaymentQueue_V1_TransactionState
    var productID: String
    var productType: Storebus_Catalog_V1_ProductType
    var quantity: Int
    var applicationUsername: String
    var requestData: Data
    var askToBuy: Bool
    var storefront: String
    var price: String
    var currency: String
    var errorCode: Int?
    var errorMessage: String?
    var originalID: String?
    /// The policy copied onto the transaction when it was created, applied when it is decided.
    var policyMode: Storebus_PaymentQueue_V1_PolicyMode
    var policyError: Storebus_PaymentQueue_V1_SKError
    var decideAtMS: Int64
    var interrupted: Bool
    var resolvedBy: String?
    var createdMS: Int64
    var dateMS: Int64
    var finished: Bool
    var revokedMS: Int64?
    /// Why it was refunded (RevocationReason), with revokedMS.
    var revokedReason: Storebus_PaymentQueue_V1_RevocationReason
    var cleared: Bool
    /// The product's hosted content, as a JSON array of storebus.payment_queue.v1.Download.
    var downloads: String
    /// What the transaction weighs against its queue's launch-replay budget while unfinished.
    var replayBytes: Int
    /// Subscriptions: the product's period when it was bought (ISO 8601, "P1M"); empty otherwise.
    var period: String
    /// Auto-renewable subscriptions: the product's subscription group; empty otherwise.
    var group: String
    /// Subscriptions, once PURCHASED: the end of the period it pays for.
    var expiresMS: Int64?
    /// Subscriptions, once PURCHASED: the period's billing line (web_order_line_item_id).
    var webOrder: Int64?
    /// Subscriptions, once PURCHASED: the subscription's first purchase (itself for that one).
    var subscriptionOriginalID: String?
    /// Whether the store made it, renewing a subscription (transactionReason RENEWAL).
    var renewal: Bool
    /// Auto-renewable subscriptions: the product's introductory offer when bought
    /// (Storebus_Catalog_V1_IntroductoryPrice as JSON), empty when it had none.
    var offer: String
    /// Whether the period bought is a free trial, or another introductory period.
    var trial: Bool
    var inIntro: Bool
    /// Auto-renewable subscriptions: the product's level in its group (1 the highest, 0 none).
    var level: Int
    /// Whether an upgrade replaced the period it bought before its end.
    var upgraded: Bool
    /// The shard of its queue's account (0 when the log is not sharded): the instance owning that
    /// shard decides it.
    var shard: UInt32

    /// Every column, in the order ``init(_:)`` reads them.
    static let columns = """
        id, app, account, device, queue_key, state, product_id, product_type, quantity, application_username,
        request_data, ask_to_buy, storefront, price, currency, error_code, error_message, original_id, policy_mode,
        policy_error, decide_at_ms, interrupted, resolved_by, created_ms, date_ms, finished, revoked_ms, cleared,
        downloads, replay_bytes, revoked_reason, period, sub_group, expires_ms, web_order, sub_original_id, renewal,
        offer, trial, in_intro, sub_level, upgraded, shard
        """
    static let selectByID = CachedSQL("SELECT \(columns) FROM pq_transaction WHERE id = ?")
    static let insertSQL = CachedSQL("INSERT INTO pq_transaction (\(columns)) VALUES (\(columns.split(separator: ",").map { _ in "?" }.joined(separator: ", ")))")

    /// The record of a row selected with ``columns``.
    init(_ row: StatementColumns) {
        id = row.text(0)
        app = row.text(1)
        account = row.text(2)
        device = row.text(3)
        queueKey = row.text(4)
        state = Storebus_PaymentQueue_V1_TransactionState(rawValue: row.int(5)) ?? .purchasing
        productID = row.text(6)
        productType = Storebus_Catalog_V1_ProductType(rawValue: row.int(7)) ?? .unspecified
        quantity = row.int(8)
        applicationUsername = row.text(9)
        requestData = row.data(10)
        askToBuy = row.bool(11)
        storefront = row.text(12)
        price = row.text(13)
        currency = row.text(14)
        errorCode = row.optionalInt64(15).map { Int($0) }
        errorMessage = row.optionalText(16)
        originalID = row.optionalText(17)
        policyMode = Storebus_PaymentQueue_V1_PolicyMode(rawValue: row.int(18)) ?? .approve
        policyError = Storebus_PaymentQueue_V1_SKError(rawValue: row.int(19)) ?? .unknown
        decideAtMS = row.int64(20)
        interrupted = row.bool(21)
        resolvedBy = row.optionalText(22)
        createdMS = row.int64(23)
        dateMS = row.int64(24)
        finished = row.bool(25)
        revokedMS = row.optionalInt64(26)
        cleared = row.bool(27)
        downloads = row.text(28)
        replayBytes = row.int(29)
        revokedReason = Storebus_PaymentQueue_V1_RevocationReason(rawValue: row.int(30)) ?? .unspecified
        period = row.text(31)
        group = row.text(32)
        expiresMS = row.optionalInt64(33)
        webOrder = row.optionalInt64(34)
        subscriptionOriginalID = row.optionalText(35)
        renewal = row.bool(36)
        offer = row.text(37)
        trial = row.bool(38)
        inIntro = row.bool(39)
        level = row.int(40)
        upgraded = row.bool(41)
        shard = UInt32(row.int64(42))
    }

    /// A new unfinished transaction of `queue`, in `shard` (the fields not given start empty).
    init(
        id: String, shard: UInt32, queue: Storebus_PaymentQueue_V1_QueueRef, state: Storebus_PaymentQueue_V1_TransactionState,
        payment: Storebus_PaymentQueue_V1_Payment, productType: Storebus_Catalog_V1_ProductType,
        storefront: String, price: String, currency: String, error: Storebus_PaymentQueue_V1_StoreKitError?,
        policy: Storebus_PaymentQueue_V1_PaymentPolicy, decideAtMS: Int64, nowMS: Int64, downloads: String
    ) {
        self.id = id
        app = queue.appBundleID
        account = queue.accountID
        device = queue.deviceID
        queueKey = queue.key
        self.state = state
        productID = payment.productIdentifier
        self.productType = productType
        quantity = max(1, Int(payment.quantity))
        applicationUsername = payment.applicationUsername
        requestData = payment.requestData
        askToBuy = payment.simulatesAskToBuyInSandbox
        self.storefront = storefront
        self.price = price
        self.currency = currency
        errorCode = error.map { $0.code.rawValue }
        errorMessage = error?.localizedDescription
        originalID = nil
        policyMode = policy.mode
        policyError = policy.failError
        self.decideAtMS = decideAtMS
        interrupted = false
        resolvedBy = nil
        createdMS = nowMS
        dateMS = nowMS
        finished = false
        revokedMS = nil
        revokedReason = .unspecified
        cleared = false
        self.downloads = downloads
        replayBytes = 0
        period = ""
        group = ""
        expiresMS = nil
        webOrder = nil
        subscriptionOriginalID = nil
        renewal = false
        offer = ""
        trial = false
        inIntro = false
        level = 0
        upgraded = false
        self.shard = shard
    }

    /// The transaction with identifier `id`, if any.
    static func fetch(_ db: any SQLConnection, id: String) throws -> TransactionRecord? {
        try db.fetchFirst(cached: selectByID, bind: { $0.text(id) }, read: TransactionRecord.init)
    }

    /// Writes the record as a new row.
    func insert(_ db: any SQLConnection) throws {
        try db.execute(cached: Self.insertSQL) {
            $0.text(id)
            $0.text(app)
            $0.text(account)
            $0.text(device)
            $0.text(queueKey)
            $0.int(state.rawValue)
            $0.text(productID)
            $0.int(productType.rawValue)
            $0.int(quantity)
            $0.text(applicationUsername)
            $0.blob(requestData)
            $0.bool(askToBuy)
            $0.text(storefront)
            $0.text(price)
            $0.text(currency)
            $0.int(errorCode)
            $0.text(errorMessage)
            $0.text(originalID)
            $0.int(policyMode.rawValue)
            $0.int(policyError.rawValue)
            $0.int(decideAtMS)
            $0.bool(interrupted)
            $0.text(resolvedBy)
            $0.int(createdMS)
            $0.int(dateMS)
            $0.bool(finished)
            $0.int(revokedMS)
            $0.bool(cleared)
            $0.text(downloads)
            $0.int(replayBytes)
            $0.int(revokedReason.rawValue)
            $0.text(period)
            $0.text(group)
            $0.int(expiresMS)
            $0.int(webOrder)
            $0.text(subscriptionOriginalID)
            $0.bool(renewal)
            $0.text(offer)
            $0.bool(trial)
            $0.bool(inIntro)
            $0.int(level)
            $0.bool(upgraded)
            $0.int(Int64(shard))
        }
    }

    static let saveDecisionSQL: CachedSQL = "UPDATE pq_transaction SET state = ?, date_ms = ?, error_code = ?, error_message = ?, interrupted = ? WHERE id = ?"

    /// Writes the fields a decision changes (``setState(_:at:)``, ``setFailed(_:at:interrupted:)``)
    /// to the record's existing row.
    func saveDecision(_ db: any SQLConnection) throws {
        try db.execute(cached: Self.saveDecisionSQL) {
            $0.int(state.rawValue)
            $0.int(dateMS)
            $0.int(errorCode)
            $0.text(errorMessage)
            $0.bool(interrupted)
            $0.text(id)
        }
    }

    /// Moves to `state` at `ms` (in memory; see ``saveDecision(_:)``).
    mutating func setState(_ state: Storebus_PaymentQueue_V1_TransactionState, at ms: Int64) {
        self.state = state
        dateMS = ms
    }

    /// FAILED with `error` at `ms`, and marked interrupted when it was (in memory; see
    /// ``saveDecision(_:)``).
    mutating func setFailed(_ error: Storebus_PaymentQueue_V1_StoreKitError, at ms: Int64, interrupted: Bool = false) {
        setState(.failed, at: ms)
        errorCode = error.code.rawValue
        errorMessage = error.localizedDescription
        self.interrupted = self.interrupted || interrupted
    }

    /// Applies the policy copied onto a PURCHASING transaction at `ms` (in memory; see
    /// ``saveDecision(_:)``), as ``TransactionStateMachine`` says: DEFERRED when Ask to Buy was asked
    /// for by the payment or the policy, FAILED under a FAIL policy, FAILED and interrupted under
    /// INTERRUPT, PURCHASED otherwise.
    mutating func decide(at ms: Int64) {
        apply(TransactionStateMachine.step(state, .decide, machineFacts), at: ms)
    }

    /// The payment as the transaction records it.
    var payment: Storebus_PaymentQueue_V1_Payment {
        .with {
            $0.productIdentifier = productID
            $0.quantity = Int32(clamping: quantity)
            $0.applicationUsername = applicationUsername
            $0.requestData = requestData
            $0.simulatesAskToBuyInSandbox = askToBuy
        }
    }

    /// The queue the transaction is in.
    var queue: Storebus_PaymentQueue_V1_QueueRef {
        .with {
            $0.appBundleID = app
            $0.accountID = account
            $0.deviceID = device
        }
    }

    /// The transaction as observers see it. A restored transaction carries its original (read from
    /// `db`) unless `depth` says this is that original already.
    func transaction(_ db: any SQLConnection, depth: Int = 0) throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        var transaction = Storebus_PaymentQueue_V1_PaymentTransaction()
        transaction.transactionIdentifier = id
        transaction.transactionState = state
        transaction.transactionDate = TransactionStore.timestamp(milliseconds: dateMS)
        transaction.payment = payment
        transaction.queue = queue
        transaction.storefront = storefront
        transaction.productType = productType
        transaction.finished = finished
        transaction.price = price
        transaction.currencyCode = currency
        if state == .purchased || state == .restored {
            transaction.downloads = try offeredDownloads()
        }
        if let expiresMS { transaction.expiresDate = TransactionStore.timestamp(milliseconds: expiresMS) }
        if let subscriptionOriginalID { transaction.originalTransactionID = subscriptionOriginalID }
        if let webOrder { transaction.webOrderLineItemID = webOrder }
        if state == .purchased { transaction.transactionReason = renewal ? .renewal : .purchase }
        transaction.subscriptionGroupIdentifier = group
        transaction.isTrialPeriod = trial
        transaction.isInIntroOfferPeriod = inIntro
        transaction.isUpgraded = upgraded
        if let revokedMS {
            transaction.cancellationDate = TransactionStore.timestamp(milliseconds: revokedMS)
            transaction.cancellationReason = revokedReason
        }
        if let errorCode {
            transaction.error = .with {
                $0.code = Storebus_PaymentQueue_V1_SKError(rawValue: errorCode) ?? .unknown
                $0.localizedDescription = errorMessage ?? ""
            }
        }
        if let originalID, depth == 0, let original = try Self.fetch(db, id: originalID) {
            transaction.originalTransaction = try original.transaction(db, depth: 1)
        }
        return transaction
    }

    /// The downloads a PURCHASED or RESTORED transaction offers: the product's hosted content, each
    /// naming this transaction.
    func offeredDownloads() throws -> [Storebus_PaymentQueue_V1_Download] {
        guard downloads != "[]" else { return [] }
        return try Storebus_PaymentQueue_V1_Download.array(fromJSONString: downloads).map { download in
            var download = download
            download.transactionIdentifier = id
            return download
        }
    }
}
