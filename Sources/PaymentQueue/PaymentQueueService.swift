import Foundation
import StoreBus
import StoreBusServer
import StoreSchema

/// The handlers of `storebus.payment_queue.v1.PaymentQueue` and `PaymentQueueAdmin`.
///
public struct PaymentQueueService: Sendable {
    let store: TransactionStore
    let catalog: CatalogLookup
    let authority: PaymentAuthority

    /// Longest applicationUsername of a payment or restore, in bytes (an app's opaque account id;
    /// Apple suggests a hash of it).
    public static let maxApplicationUsernameBytes = 1024

    /// Longest a policy may make the sandbox wait before it answers, in milliseconds.
    public static let maxPolicyDelayMs: UInt32 = 600_000

    /// Largest requestData of a payment, in bytes (StoreKit reserves the field; such payments fail
    /// with unauthorizedRequestData, and their transactions still carry it).
    public static let maxRequestDataBytes = 4096
    /// Longest product identifier of a payment, in bytes: no catalog holds a longer one (its
    /// validator's limit), and a payment for an unknown product still makes a FAILED transaction
    /// carrying the identifier.
    public static let maxProductIdentifierBytes = 255
    /// Longest idempotency key, in bytes (as the contract says).
    public static let maxIdempotencyKeyBytes = 128

    /// INVALID_ARGUMENT naming `policy.delayMs` when the policy waits longer than the sandbox allows.
    public static func checkDelay(_ policy: Storebus_PaymentQueue_V1_PaymentPolicy) throws(RPCError) {
        guard policy.delayMs <= maxPolicyDelayMs else {
            throw RPCError.invalidArgument(field: "policy.delayMs", "must be at most \(maxPolicyDelayMs)")
        }
    }

    /// The idempotency key of a request: its own field, else the call's metadata; INVALID_ARGUMENT
    /// when longer than ``maxIdempotencyKeyBytes``.
    /// Both given and different is INVALID_ARGUMENT: the caller meant one of them, and taking either
    /// silently could make a retry look new, or a new call look like a retry.
    static func idempotencyKey(_ field: String, metadata: String?) throws -> String {
        if let metadata, !metadata.isEmpty, !field.isEmpty, metadata != field {
            throw RPCError.invalidArgument(field: "idempotencyKey", "differs from the call's idempotency-key metadata; send one key, or the same in both")
        }
        let key = field.isEmpty ? (metadata ?? "") : field
        guard key.utf8.count <= maxIdempotencyKeyBytes else {
            throw RPCError.invalidArgument(field: field.isEmpty ? "idempotency-key" : "idempotencyKey", "must be at most \(maxIdempotencyKeyBytes) bytes")
        }
        return key
    }

    /// INVALID_ARGUMENT naming the first field of `updates` that no download could have.
    static func checkDownloadUpdates(_ updates: [Storebus_PaymentQueue_V1_DownloadUpdate]) throws(RPCError) {
        guard (1...100).contains(updates.count) else { throw RPCError.invalidArgument(field: "updates", "must hold 1 to 100 updates") }
        for (index, update) in updates.enumerated() {
            guard !update.transactionIdentifier.isEmpty, update.transactionIdentifier.utf8.count <= 64 else {
                throw RPCError.invalidArgument(field: "updates[\(index)].transactionIdentifier", "must be 1 to 64 bytes")
            }
            guard !update.contentIdentifier.isEmpty, update.contentIdentifier.utf8.count <= 255 else {
                throw RPCError.invalidArgument(field: "updates[\(index)].contentIdentifier", "must be 1 to 255 bytes")
            }
            guard Storebus_PaymentQueue_V1_DownloadAction.allCases.contains(update.action), update.action != .unspecified else {
                throw RPCError.invalidArgument(field: "updates[\(index)].action", "must be one of START, PAUSE, RESUME, CANCEL, COMPLETE, FAIL")
            }
            guard update.contentURL.utf8.count <= TransactionStore.maxContentURLBytes else {
                throw RPCError.invalidArgument(field: "updates[\(index)].contentUrl", "must be at most \(TransactionStore.maxContentURLBytes) bytes")
            }
            guard update.progress.isFinite else { throw RPCError.invalidArgument(field: "updates[\(index)].progress", "must be a number from 0 to 1") }
        }
    }

    /// Handlers over `store`, asking `catalog` about products and poking `authority` on new payments.
    public init(store: TransactionStore, catalog: CatalogLookup, authority: PaymentAuthority) {
        self.store = store
        self.catalog = catalog
        self.authority = authority
    }

    /// A router answering the client and admin methods.
    public var router: RPCRouter {
        var router = RPCRouter()
        let service = self
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments) { request, context in
            var request = request
            request.appBundleID = context.ownWhenLeftOut(app: request.appBundleID)
            request.accountID = context.ownWhenLeftOut(account: request.accountID)
            try context.authorize(app: request.appBundleID, account: request.accountID)
            return try await service.canMakePayments(request)
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.addPayment, codec: .addPayment) { request, context in
            var request = request
            try context.authorize(&request.queue)
            return try await service.addPayment(request, metadataKey: context.metadata[WireProtocol.idempotencyKeyMetadata])
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction, codec: .finishTransaction) { request, context in
            var request = request
            try context.authorize(&request.queue)
            try request.queue.validate()
            let already = try await service.store.finish(request.transactionIdentifier, queue: request.queue)
            return .with { $0.alreadyFinished = already }
        }
        // The same answer under two names: ListTransactions for clients, SnapshotQueue for the
        // gateway's launch replay (an internal method, which the gateway never forwards).
        let listTransactions: @Sendable (Storebus_PaymentQueue_V1_ListTransactionsRequest, ServerContext) async throws -> Storebus_PaymentQueue_V1_ListTransactionsResponse = { request, context in
            var request = request
            try context.authorize(&request.queue)
            try request.queue.validate()
            let (transactions, keySeq) = try await service.store.unfinished(request.queue)
            return .with {
                $0.transactions = transactions
                $0.keySeq = keySeq
                $0.queueKey = request.queue.key
            }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, listTransactions)
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.snapshotQueue, listTransactions)
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.updateDownloads) { request, context in
            var request = request
            try context.authorize(&request.queue)
            try request.queue.validate()
            try Self.checkDownloadUpdates(request.updates)
            let update = try await service.store.updateDownloads(request.updates, queue: request.queue, checkOnly: request.checkOnly)
            return .with {
                $0.downloads = update.downloads
                $0.productIdentifiers = update.productIdentifiers
                $0.keySeq = update.keySeq
                $0.logSeq = update.logSeq
            }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions) { request, context in
            var request = request
            try context.authorize(&request.queue)
            try request.queue.validate()
            guard request.applicationUsername.utf8.count <= PaymentQueueService.maxApplicationUsernameBytes else {
                throw RPCError.invalidArgument(field: "applicationUsername", "must be at most \(PaymentQueueService.maxApplicationUsernameBytes) bytes")
            }
            let key = try PaymentQueueService.idempotencyKey(request.idempotencyKey, metadata: context.metadata[WireProtocol.idempotencyKeyMetadata])
            var idempotency: (key: String, digest: String)?
            if !key.isEmpty {
                var canonical = request
                canonical.idempotencyKey = ""
                idempotency = (key, try canonical.jsonString())
            }
            do {
                try await service.catalog.checkApp(request.queue.appBundleID)
            } catch {
                // As for payments: a retry of a restore already made gets its answer even when the
                // catalog cannot answer now.
                if let idempotency, let (restoreID, count) = try await service.store.restore(
                    forKey: idempotency.key, app: request.queue.appBundleID, account: request.queue.accountID, digest: idempotency.digest
                ) {
                    return .with { $0.restoreID = restoreID; $0.restoredCount = UInt32(count) }
                }
                throw error
            }
            // The policy (the sandbox fails restores as it fails payments, and the observer hears the
            // reason) is read in the restore's own database transaction, after its key.
            let (restoreID, count) = try await service.store.restore(
                queue: request.queue, applicationUsername: request.hasApplicationUsername ? request.applicationUsername : nil, idempotency: idempotency
            )
            return .with {
                $0.restoreID = restoreID
                $0.restoredCount = UInt32(count)
            }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction) { request, _ in
            let (transaction, charge, revoked) = try await service.store.refund(request.transactionIdentifier, reason: request.revocationReason)
            return .with {
                $0.transaction = transaction
                if let charge { $0.charge = charge }
                $0.revokedProductIdentifiers = revoked
            }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueueAdmin.clearAccountTransactions) { request, _ in
            try await service.catalog.checkApp(request.appBundleID)
            guard !request.accountID.isEmpty else { throw RPCError.invalidArgument(field: "accountId", "is required") }
            let count = try await service.store.clear(app: request.appBundleID, account: request.accountID)
            return .with { $0.clearedCount = UInt32(count) }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueueAdmin.reset) { _, _ in
            try await service.store.reset()
            return .init()
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueueAdmin.setPaymentPolicy) { request, _ in
            try await service.catalog.checkApp(request.appBundleID)
            guard request.policy.mode != .unspecified else {
                throw RPCError.invalidArgument(field: "policy.mode", "must be APPROVE, FAIL, ASK_TO_BUY or INTERRUPT")
            }
            try PaymentQueueService.checkDelay(request.policy)
            try await service.store.setPolicy(request.policy, app: request.appBundleID, account: request.accountID)
            service.authority.poke()
            return .init()
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueueAdmin.getPaymentPolicy) { request, _ in
            try await service.catalog.checkApp(request.appBundleID)
            let (policy, isDefault) = try await service.store.policy(app: request.appBundleID, account: request.accountID)
            return .with {
                $0.policy = policy
                $0.isDefault = isDefault
            }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueueAdmin.approveAskToBuy) { request, _ in
            let transaction = try await service.store.answerAskToBuy(request.transactionIdentifier, approve: true)
            return .with { $0.transaction = transaction }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueueAdmin.declineAskToBuy) { request, _ in
            let transaction = try await service.store.answerAskToBuy(request.transactionIdentifier, approve: false)
            return .with { $0.transaction = transaction }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueueAdmin.resolveInterruptedPurchase) { request, _ in
            let transaction = try await service.store.resolveInterrupted(request.transactionIdentifier)
            return .with { $0.transaction = transaction }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions) { request, _ in
            try await service.catalog.checkApp(request.appBundleID)
            let (transactions, next) = try await service.store.accountTransactions(
                app: request.appBundleID, account: request.accountID, includeFinished: request.includeFinished,
                pageToken: request.pageToken, limit: Paging.size(request.pageSize)
            )
            return .with {
                $0.transactions = transactions
                $0.nextPageToken = next
            }
        }
        router.register(Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges) { request, _ in
            try await service.catalog.checkApp(request.appBundleID)
            let (charges, next) = try await service.store.charges(
                app: request.appBundleID, account: request.accountID, pageToken: request.pageToken, limit: Paging.size(request.pageSize)
            )
            return .with {
                $0.charges = charges
                $0.nextPageToken = next
            }
        }
        return router
    }

    func canMakePayments(_ request: Storebus_PaymentQueue_V1_CanMakePaymentsRequest) async throws -> Storebus_PaymentQueue_V1_CanMakePaymentsResponse {
        guard !request.accountID.isEmpty else { throw RPCError.invalidArgument(field: "accountId", "is required") }
        try await catalog.checkApp(request.appBundleID)
        let (policy, _) = try await store.policy(app: request.appBundleID, account: request.accountID)
        return .with { $0.canMakePayments = !policy.purchasesRestricted }
    }

    /// SKPaymentQueue.add: validates, applies the idempotency key, asks the catalog, and creates the
    /// transaction PURCHASING (decided by the authority) or FAILED at once.
    func addPayment(_ request: Storebus_PaymentQueue_V1_AddPaymentRequest, metadataKey: String?) async throws -> Storebus_PaymentQueue_V1_AddPaymentResponse {
        try request.queue.validate()
        var payment = request.payment
        guard !payment.productIdentifier.isEmpty else {
            throw RPCError.invalidArgument(field: "payment.productIdentifier", "is required")
        }
        guard payment.productIdentifier.utf8.count <= Self.maxProductIdentifierBytes else {
            throw RPCError.invalidArgument(field: "payment.productIdentifier", "must be at most \(Self.maxProductIdentifierBytes) bytes")
        }
        if payment.quantity == 0 { payment.quantity = 1 }
        guard (1...10).contains(payment.quantity) else {
            throw RPCError.invalidArgument(field: "payment.quantity", "must be from 1 to 10")
        }
        // Both travel in every event and replay of the transaction: bounded, so that no payment can
        // make an answer exceed the message size limit.
        guard payment.applicationUsername.utf8.count <= Self.maxApplicationUsernameBytes else {
            throw RPCError.invalidArgument(field: "payment.applicationUsername", "must be at most \(Self.maxApplicationUsernameBytes) bytes")
        }
        guard payment.requestData.count <= Self.maxRequestDataBytes else {
            throw RPCError.invalidArgument(field: "payment.requestData", "must be at most \(Self.maxRequestDataBytes) bytes")
        }
        let key = try Self.idempotencyKey(request.idempotencyKey, metadata: metadataKey)
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
            if let idempotency, let existing = try await store.transaction(
                forKey: idempotency.key, app: request.queue.appBundleID, account: request.queue.accountID, digest: idempotency.digest
            ) {
                return .with { $0.transaction = existing }
            }
            throw error
        }
        let type = record?.productType ?? .unspecified
        var new = TransactionStore.NewTransaction(
            queue: request.queue, payment: payment, productType: type, storefront: storefront,
            price: record?.price ?? "", currency: record?.currencyCode ?? "", start: start, idempotency: idempotency
        )
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
