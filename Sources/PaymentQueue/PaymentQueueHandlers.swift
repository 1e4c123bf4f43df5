import Foundation
import StoreBus
import StoreBusServer
import StoreSchema

/// The handlers of `storebus.payment_queue.v1.PaymentQueue`: a device's queue (payments, finish,
/// restore, the queue's unfinished transactions) and the download states the download service
/// changes. Requests arrive with their queue filled and checked and their fields within the
/// contract's rules (the router's interceptors).
public struct PaymentQueueHandlers: Storebus_PaymentQueue_V1_PaymentQueue.Handlers {
    let store: TransactionStore
    let catalog: CatalogLookup
    let authority: PaymentAuthority

    /// Longest applicationUsername of a payment or restore, in bytes (an app's opaque account id;
    /// Apple suggests a hash of it), as payment_queue.proto's rules say.
    public static let maxApplicationUsernameBytes = 1024
    /// Largest requestData of a payment, in bytes (StoreKit reserves the field; such payments fail
    /// with unauthorizedRequestData, and their transactions still carry it), as payment_queue.proto's
    /// rules say.
    public static let maxRequestDataBytes = 4096
    /// Longest product identifier of a payment, in bytes: no catalog holds a longer one (its
    /// validator's limit), and a payment for an unknown product still makes a FAILED transaction
    /// carrying the identifier. As payment_queue.proto's rules say.
    public static let maxProductIdentifierBytes = 255

    /// Handlers over `store`, asking `catalog` about products and poking `authority` on new payments.
    public init(store: TransactionStore, catalog: CatalogLookup, authority: PaymentAuthority) {
        self.store = store
        self.catalog = catalog
        self.authority = authority
    }

    public var codecs: MessageCodecs {
        var codecs = MessageCodecs()
        codecs.use(.addPayment, for: Storebus_PaymentQueue_V1_PaymentQueue.addPayment)
        codecs.use(.finishTransaction, for: Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction)
        return codecs
    }

    /// Every method awaits the store's threads for its reads and writes: on the loop, a purchase's
    /// calls cost no thread hop of their own.
    public var loopSafe: LoopSafeMethods { .all(of: Storebus_PaymentQueue_V1_PaymentQueue.self) }

    public func finishTransaction(_ request: Storebus_PaymentQueue_V1_FinishTransactionRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_FinishTransactionResponse {
        let already = try await store.finish(request.transactionIdentifier, queue: request.queue)
        return .with { $0.alreadyFinished = already }
    }

    public func listTransactions(_ request: Storebus_PaymentQueue_V1_ListTransactionsRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_ListTransactionsResponse {
        // A device asking for its queue (its launch replay, through the gateway) makes the queue one
        // of its account's, which hears revocations even while empty.
        try await store.noteQueue(request.queue)
        let (transactions, keySeq) = try await store.unfinished(request.queue)
        return .with {
            $0.transactions = transactions
            $0.keySeq = keySeq
            $0.queueKey = request.queue.key
        }
    }

    /// The same answer as ListTransactions, for the gateway's launch replay (an internal method,
    /// which the gateway never forwards).
    public func snapshotQueue(_ request: Storebus_PaymentQueue_V1_ListTransactionsRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_ListTransactionsResponse {
        try await listTransactions(request, context: context)
    }

    public func updateDownloads(_ request: Storebus_PaymentQueue_V1_UpdateDownloadsRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_UpdateDownloadsResponse {
        for (index, update) in request.updates.enumerated() where !update.progress.isFinite {
            throw RPCError.invalidArgument(field: "updates[\(index)].progress", "must be a number from 0 to 1")
        }
        let update = try await store.updateDownloads(request.updates, queue: request.queue, checkOnly: request.checkOnly)
        return .with {
            $0.downloads = update.downloads
            $0.productIdentifiers = update.productIdentifiers
            $0.keySeq = update.keySeq
            $0.logSeq = update.logSeq
        }
    }

    public func restoreCompletedTransactions(
        _ request: Storebus_PaymentQueue_V1_RestoreCompletedTransactionsRequest, context: ServerContext
    ) async throws -> Storebus_PaymentQueue_V1_RestoreCompletedTransactionsResponse {
        var idempotency: (key: String, digest: String)?
        if !request.idempotencyKey.isEmpty {
            var canonical = request
            canonical.idempotencyKey = ""
            idempotency = (request.idempotencyKey, try canonical.jsonString())
        }
        do {
            try await catalog.checkApp(request.queue.appBundleID)
        } catch {
            // As for payments: a retry of a restore already made gets its answer even when the
            // catalog cannot answer now.
            if let idempotency,
                let (restoreID, count) = try await store.restore(
                    forKey: idempotency.key, app: request.queue.appBundleID, account: request.queue.accountID, digest: idempotency.digest
                )
            {
                return .with {
                    $0.restoreID = restoreID; $0.restoredCount = UInt32(count)
                }
            }
            throw error
        }
        // The policy (the sandbox fails restores as it fails payments, and the observer hears the
        // reason) is read in the restore's own database transaction, after its key.
        let (restoreID, count) = try await store.restore(
            queue: request.queue, applicationUsername: request.hasApplicationUsername ? request.applicationUsername : nil, idempotency: idempotency
        )
        return .with {
            $0.restoreID = restoreID
            $0.restoredCount = UInt32(count)
        }
    }

    public func canMakePayments(_ request: Storebus_PaymentQueue_V1_CanMakePaymentsRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_CanMakePaymentsResponse {
        try await catalog.checkApp(request.appBundleID)
        let (policy, _) = try await store.policy(app: request.appBundleID, account: request.accountID)
        return .with { $0.canMakePayments = !policy.purchasesRestricted }
    }

    /// SKPaymentQueue.add: validates, applies the idempotency key, asks the catalog, and creates the
    /// transaction PURCHASING (decided by the authority) or FAILED at once.
    public func addPayment(_ request: Storebus_PaymentQueue_V1_AddPaymentRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_AddPaymentResponse {
        // The contract's rules bound the payment's fields (its applicationUsername and requestData
        // travel in every event and replay of the transaction, so no payment can make an answer
        // exceed the message size limit); quantity 0 means 1.
        var payment = request.payment
        if payment.quantity == 0 { payment.quantity = 1 }
        guard (1...10).contains(payment.quantity) else {
            throw RPCError.invalidArgument(field: "payment.quantity", "must be from 1 to 10")
        }
        let key = request.idempotencyKey
        var idempotency: (key: String, digest: String)?
        if !key.isEmpty {
            var canonical = request
            canonical.idempotencyKey = ""
            canonical.payment = payment
            // A retry under the same key finds its transaction inside the write below (or is refused
            // there when the key was used for another payment).
            idempotency = (key, try TransactionJSON.string(canonical))
        }
        let record: Storebus_Catalog_V1_ProductRecord?
        let storefront: String
        let start: TransactionStore.NewTransaction.Start
        do {
            (record, storefront) = try await catalog.product(app: request.queue.appBundleID, identifier: payment.productIdentifier, storefront: request.storefront)
            if let record, record.clearedForSale, !record.price.isEmpty {
                guard payment.quantity == 1 || record.productType == .consumable else {
                    throw RPCError.invalidArgument(field: "payment.quantity", "can be more than 1 for consumable products only")
                }
                // The policy is read in the same database transaction that writes the payment.
                start = .byPolicy(requestDataPresent: !payment.requestData.isEmpty)
            } else {
                start = .failed(.make(.storeProductNotAvailable))
            }
        } catch {
            // A retry of a payment already made gets its transaction even when the catalog cannot
            // answer now (unreachable, the app or product since removed): the key is what it is for.
            if let idempotency,
                let existing = try await store.transaction(
                    forKey: idempotency.key, app: request.queue.appBundleID, account: request.queue.accountID, digest: idempotency.digest
                )
            {
                return .with { $0.transaction = existing }
            }
            throw error
        }
        let type = record?.productType ?? .unspecified
        var new = TransactionStore.NewTransaction(
            queue: request.queue, payment: payment, productType: type, storefront: storefront,
            price: record?.price ?? "", currency: record?.currencyCode ?? "", start: start, idempotency: idempotency
        )
        if let record, record.productType == .autoRenewableSubscription || record.productType == .nonRenewingSubscription {
            new.subscription = (record.subscriptionPeriod.iso8601, record.productType == .autoRenewableSubscription ? record.subscriptionGroupIdentifier : "")
            if record.productType == .autoRenewableSubscription, record.hasIntroductoryPrice { new.introductoryOffer = record.introductoryPrice }
            new.subscriptionLevel = Int(record.subscriptionGroupLevel)
        }
        new.downloads = (record?.hostedContent ?? []).map { content in
            .with {
                $0.contentIdentifier = content.contentIdentifier
                $0.contentVersion = content.version
                $0.contentLength = content.contentLength
                $0.state = .waiting
            }
        }
        // A policy without delay is decided in the same commit; the authority handles the rest.
        let (transaction, decided) = try await store.create(new, decideWhenDue: true)
        if !decided { authority.poke() }
        return .with { $0.transaction = transaction }
    }
}

extension MessageCodec where Request == Storebus_PaymentQueue_V1_AddPaymentRequest, Response == Storebus_PaymentQueue_V1_AddPaymentResponse {
    /// AddPayment's codec: a request of the plain shape read directly (``RequestJSON``), any other by
    /// swift-protobuf, which also names what it refuses; the answer's transaction written directly
    /// (``TransactionJSON``). Both take swift-protobuf's way with the fast paths off.
    static let addPayment = MessageCodec(
        decode: { body in try RequestJSON.addPayment(body) ?? JSONCodec.decode(Request.self, from: body) },
        encode: { response in try TransactionJSON.addPaymentResponse(response.transaction) }
    )
}

extension MessageCodec where Request == Storebus_PaymentQueue_V1_FinishTransactionRequest, Response == Storebus_PaymentQueue_V1_FinishTransactionResponse {
    /// FinishTransaction's codec: the request as AddPayment's is read, the answer one of two
    /// constants (``RequestJSON/finishAnswer(alreadyFinished:)``).
    static let finishTransaction = MessageCodec(
        decode: { body in try RequestJSON.finishTransaction(body) ?? JSONCodec.decode(Request.self, from: body) },
        encode: { response in try RequestJSON.finishAnswer(alreadyFinished: response.alreadyFinished) }
    )
}
