import StoreBus
import StoreBusServer
import StoreBusStorage
import StoreSchema

/// The handlers of `storebus.payment_queue.v1.PaymentQueueAdmin`: the sandbox's controls (payment
/// policies, Ask to Buy, interrupted purchases, refunds) and an account's history.
public struct PaymentQueueAdminHandlers: Storebus_PaymentQueue_V1_PaymentQueueAdmin.Handlers {
    let store: TransactionStore
    let catalog: CatalogLookup
    let authority: PaymentAuthority
    let shards: QueueShards
    /// The payment queue's event log, as ReadActivity reads it.
    let eventLog: EventLogHandlers

    /// Handlers over `store`, asking `catalog` whether apps exist and poking `authority` when a
    /// policy changes; `shards` answers the shard map.
    public init(store: TransactionStore, catalog: CatalogLookup, authority: PaymentAuthority, shards: QueueShards, eventLog: EventLogHandlers) {
        self.eventLog = eventLog
        self.store = store
        self.catalog = catalog
        self.authority = authority
        self.shards = shards
    }

    /// Every method awaits the store's threads for its reads and writes.
    public var loopSafe: LoopSafeMethods { .all(of: Storebus_PaymentQueue_V1_PaymentQueueAdmin.self) }

    public func setPaymentPolicy(_ request: Storebus_PaymentQueue_V1_SetPaymentPolicyRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_SetPaymentPolicyResponse {
        try await catalog.checkApp(request.appBundleID)
        try await store.setPolicy(request.policy, app: request.appBundleID, account: request.accountID)
        authority.poke()
        return .init()
    }

    public func getPaymentPolicy(_ request: Storebus_PaymentQueue_V1_GetPaymentPolicyRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_GetPaymentPolicyResponse {
        try await catalog.checkApp(request.appBundleID)
        let (policy, isDefault) = try await store.policy(app: request.appBundleID, account: request.accountID)
        return .with {
            $0.policy = policy
            $0.isDefault = isDefault
        }
    }

    public func approveAskToBuy(_ request: Storebus_PaymentQueue_V1_ApproveAskToBuyRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_ApproveAskToBuyResponse {
        let transaction = try await store.answerAskToBuy(request.transactionIdentifier, approve: true)
        return .with { $0.transaction = transaction }
    }

    public func declineAskToBuy(_ request: Storebus_PaymentQueue_V1_DeclineAskToBuyRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_DeclineAskToBuyResponse {
        let transaction = try await store.answerAskToBuy(request.transactionIdentifier, approve: false)
        return .with { $0.transaction = transaction }
    }

    public func resolveInterruptedPurchase(
        _ request: Storebus_PaymentQueue_V1_ResolveInterruptedPurchaseRequest, context: ServerContext
    ) async throws -> Storebus_PaymentQueue_V1_ResolveInterruptedPurchaseResponse {
        let transaction = try await store.resolveInterrupted(request.transactionIdentifier)
        return .with { $0.transaction = transaction }
    }

    public func refundTransaction(_ request: Storebus_PaymentQueue_V1_RefundTransactionRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_RefundTransactionResponse {
        let (transaction, charge, revoked) = try await store.refund(request.transactionIdentifier, reason: request.revocationReason)
        return .with {
            $0.transaction = transaction
            if let charge { $0.charge = charge }
            $0.revokedProductIdentifiers = revoked
        }
    }

    public func listAccountTransactions(
        _ request: Storebus_PaymentQueue_V1_ListAccountTransactionsRequest, context: ServerContext
    ) async throws -> Storebus_PaymentQueue_V1_ListAccountTransactionsResponse {
        try await catalog.checkApp(request.appBundleID)
        let (transactions, next) = try await store.accountTransactions(
            app: request.appBundleID, account: request.accountID, includeFinished: request.includeFinished,
            pageToken: request.pageToken, limit: Paging.size(request.pageSize)
        )
        return .with {
            $0.transactions = transactions
            $0.nextPageToken = next
        }
    }

    public func clearAccountTransactions(
        _ request: Storebus_PaymentQueue_V1_ClearAccountTransactionsRequest, context: ServerContext
    ) async throws -> Storebus_PaymentQueue_V1_ClearAccountTransactionsResponse {
        try await catalog.checkApp(request.appBundleID)
        let count = try await store.clear(app: request.appBundleID, account: request.accountID)
        return .with { $0.clearedCount = UInt32(count) }
    }

    public func listCharges(_ request: Storebus_PaymentQueue_V1_ListChargesRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_ListChargesResponse {
        try await catalog.checkApp(request.appBundleID)
        let (charges, next) = try await store.charges(
            app: request.appBundleID, account: request.accountID, pageToken: request.pageToken, limit: Paging.size(request.pageSize)
        )
        return .with {
            $0.charges = charges
            $0.nextPageToken = next
        }
    }

    public func reset(_ request: Storebus_PaymentQueue_V1_ResetRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_ResetResponse {
        try await store.reset()
        return .init()
    }

    public func listAccounts(_ request: Storebus_PaymentQueue_V1_ListAccountsRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_ListAccountsResponse {
        try await catalog.checkApp(request.appBundleID)
        let (accounts, next) = try await store.accounts(app: request.appBundleID, pageToken: request.pageToken, limit: Paging.size(request.pageSize))
        return .with {
            $0.accounts = accounts
            $0.nextPageToken = next
        }
    }

    public func readActivity(_ request: Storebus_PaymentQueue_V1_ReadActivityRequest, context: ServerContext) async throws -> PrewrittenResponse<Storebus_PaymentQueue_V1_QueueEventPage> {
        // The same page the log's followers read: QueueEventPage is ReadEventsResponse's JSON with
        // its payloads typed.
        let page = try await eventLog.readEvents(
            .with {
                $0.shard = request.shard
                $0.afterSeq = request.afterSeq
                $0.limit = request.limit
            }, context: context)
        return PrewrittenResponse(json: page.json)
    }

    public func getShardMap(_ request: Storebus_PaymentQueue_V1_GetShardMapRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_GetShardMapResponse {
        try await shards.map(store.database)
    }
}
