import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema
import Synchronization

/// A StoreBus deployment in memory, as a device sees it through a gateway: products, the payment
/// queue's states and callbacks (purchase, Ask to Buy, failures, finish, restore, refunds), for an
/// app's unit tests that need no running services. Hand it to ``StoreConnection`` as its transport:
///
/// ```swift
/// let store = InMemoryStore(products: [.init(id: "com.example.gems100", type: .consumable, price: "0.99")])
/// let queue = store.queue(account: "alice")
/// queue.add(observer)
/// store.setPolicy(.askToBuy, account: "alice")   // the sandbox's controls, as methods
/// ```
///
/// It answers the calls the SDK makes for the queue and products (Authenticate, Observe,
/// FetchProducts, CanMakePayments, AddPayment, FinishTransaction, ListTransactions,
/// RestoreCompletedTransactions) with the same states, callbacks, positions and errors as the
/// services; anything else is UNIMPLEMENTED. The SDK's own tests run one list of scenarios against it
/// and against the real processes, so the two cannot drift apart unnoticed.
public final class InMemoryStore: StoreTransport {
    /// A product on sale.
    public struct Product: Sendable {
        public enum Kind: Sendable { case consumable, nonConsumable, autoRenewable, nonRenewing }
        public var id: String
        public var kind: Kind
        public var title: String
        /// Decimal price in US dollars, such as "0.99".
        public var price: String

        public init(id: String, kind: Kind, title: String? = nil, price: String = "0.99") {
            self.id = id
            self.kind = kind
            self.title = title ?? id
            self.price = price
        }

        var type: Storebus_Catalog_V1_ProductType {
            switch kind {
            case .consumable: .consumable
            case .nonConsumable: .nonConsumable
            case .autoRenewable: .autoRenewableSubscription
            case .nonRenewing: .nonRenewingSubscription
            }
        }
    }

    /// What the store answers a payment with (the sandbox's payment policy).
    public enum Policy: Sendable, Equatable {
        case approve
        case askToBuy
        case fail(StoreKitError.Code)
    }

    private struct Stored {
        var transaction: Storebus_PaymentQueue_V1_PaymentTransaction
        var queueKey: String
        var account: String
        var idempotencyKey: String?
    }

    private struct State {
        var products: [String: Product]
        var app: String
        var transactions: [String: Stored] = [:]
        var order: [String] = []
        /// Each queue's callbacks, position n at index n - 1.
        var logs: [String: [Storebus_Gateway_V1_ObserverEvent]] = [:]
        var queues: [String: Storebus_PaymentQueue_V1_QueueRef] = [:]
        var policies: [String: Policy] = [:]
        var nextID: UInt64 = 1_000_000_000_000_001
        var waiters: [(key: String, continuation: CheckedContinuation<Void, Never>)] = []
        /// How many times each queue's log grew: a wait registers only if it has not grown since
        /// the caller looked.
        var generations: [String: Int] = [:]
        var closed = false
    }

    private let state: Mutex<State>

    /// A store selling `products` in the app `app`.
    public init(app: String = "com.example.app", products: [Product]) {
        state = Mutex(State(products: Dictionary(products.map { ($0.id, $0) }, uniquingKeysWith: { $1 }), app: app))
    }

    /// A payment queue for a device of `account` in the store's app, over this store.
    public func queue(account: String, device: String = "device") -> PaymentQueue {
        let app = state.withLock { $0.app }
        var configuration = StoreConfiguration(gatewayEndpoints: ["memory"], apiKey: "memory", appBundleID: app, accountID: account, deviceID: device)
        configuration.observerHold = .seconds(5)
        return PaymentQueue(connection: StoreConnection(configuration: configuration, transport: self))
    }

    // MARK: The sandbox's controls

    /// How payments of `account` are answered from now on (default: approved).
    public func setPolicy(_ policy: Policy, account: String) {
        state.withLock { $0.policies[account] = policy }
    }

    /// Approves a deferred (Ask to Buy) transaction: it becomes PURCHASED. Throws `RPCError`
    /// (FAILED_PRECONDITION) when it is not deferred.
    public func approveAskToBuy(_ id: String) throws {
        try settleDeferred(id) { $0.transactionState = .purchased }
    }

    /// Declines a deferred (Ask to Buy) transaction: it becomes FAILED, paymentCancelled.
    public func declineAskToBuy(_ id: String) throws {
        try settleDeferred(id) { transaction in
            transaction.transactionState = .failed
            transaction.error = .with {
                $0.code = .paymentCancelled
                $0.localizedDescription = "The request to buy was declined."
            }
        }
    }

    /// Refunds a purchase: it and its restored copies carry a cancellation date, and every queue of
    /// the account hears `didRevokeEntitlements` for the product.
    public func refund(_ id: String) throws {
        try state.withLock { state in
            guard let stored = state.transactions[id], stored.transaction.transactionState == .purchased else {
                throw RPCError.resource(.notFound, type: "transaction", name: id, "no purchased transaction \(id)")
            }
            let now = Date()
            for key in state.order where state.transactions[key]?.transaction.transactionIdentifier == id
                || state.transactions[key]?.transaction.originalTransaction.transactionIdentifier == id {
                state.transactions[key]?.transaction.cancellationDate = .init(date: now)
            }
            for (queueKey, queue) in state.queues where queue.accountID == stored.account {
                Self.append(&state, queueKey) { $0.didRevokeEntitlementsForProductIdentifiers.productIdentifiers = [stored.transaction.payment.productIdentifier] }
            }
        }
        wake()
    }

    private func settleDeferred(_ id: String, _ change: (inout Storebus_PaymentQueue_V1_PaymentTransaction) -> Void) throws {
        try state.withLock { state in
            guard var stored = state.transactions[id], stored.transaction.transactionState == .deferred else {
                throw RPCError.resource(.failedPrecondition, type: "transaction", name: id, "transaction \(id) is not waiting for approval")
            }
            change(&stored.transaction)
            stored.transaction.transactionDate = .init(date: Date())
            state.transactions[id] = stored
            let transaction = stored.transaction
            Self.append(&state, stored.queueKey) { $0.updatedTransactions.transactions = [transaction] }
        }
        wake()
    }

    // MARK: StoreTransport

    public func callRaw(path: String, idempotent: Bool, body: [UInt8], options: CallOptions) async throws(RPCError) -> RawResponse {
        do {
            let answer = try await answer(path: path, body: body, options: options)
            return RawResponse(code: .ok, body: answer)
        } catch let error as RPCError {
            return RawResponse(code: error.code, body: (try? JSONCodec.encode(error.status)) ?? [])
        } catch {
            return RawResponse(code: .internalError, body: (try? JSONCodec.encode(RPCError(.internalError, "\(error)").status)) ?? [])
        }
    }

    public func shutdown() async {
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiters.removeAll() }
            return state.waiters.map(\.continuation)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The session token names the queue: a device's calls act on its own queue, as through a gateway.
    private static func queue(of options: CallOptions) throws -> Storebus_PaymentQueue_V1_QueueRef {
        let parts = (options.metadata[GatewayMetadata.session] ?? "").split(separator: "|", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, parts[0] == "memory" else {
            throw RPCError(.unauthenticated, "this call needs a session").withReason("SESSION_REQUIRED", domain: "storebus.gateway")
        }
        return .with {
            $0.appBundleID = parts[1]
            $0.accountID = parts[2]
            $0.deviceID = parts[3]
        }
    }

    private func answer(path: String, body: [UInt8], options: CallOptions) async throws -> [UInt8] {
        switch path {
        case Storebus_Gateway_V1_Gateway.authenticate.path:
            let request = try JSONCodec.decode(Storebus_Gateway_V1_AuthenticateRequest.self, from: body)
            try QueueNames.check(app: request.appBundleID, account: request.accountID, device: request.deviceID)
            return try JSONCodec.encode(Storebus_Gateway_V1_AuthenticateResponse.with {
                $0.sessionID = "memory|\(request.appBundleID)|\(request.accountID)|\(request.deviceID)"
                $0.expiresAt = .init(date: Date().addingTimeInterval(3600))
                $0.queue = .with {
                    $0.appBundleID = request.appBundleID
                    $0.accountID = request.accountID
                    $0.deviceID = request.deviceID
                }
            })
        case Storebus_Gateway_V1_Gateway.observe.path:
            let request = try JSONCodec.decode(Storebus_Gateway_V1_ObserveRequest.self, from: body)
            return try JSONCodec.encode(try await observe(request, queue: try Self.queue(of: options)))
        case Storebus_Catalog_V1_Catalog.fetchProducts.path:
            let request = try JSONCodec.decode(Storebus_Catalog_V1_FetchProductsRequest.self, from: body)
            _ = try Self.queue(of: options)
            return try JSONCodec.encode(fetchProducts(request))
        case Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments.path:
            _ = try Self.queue(of: options)
            return try JSONCodec.encode(Storebus_PaymentQueue_V1_CanMakePaymentsResponse.with { $0.canMakePayments = true })
        case Storebus_PaymentQueue_V1_PaymentQueue.addPayment.path:
            let request = try JSONCodec.decode(Storebus_PaymentQueue_V1_AddPaymentRequest.self, from: body)
            let transaction = try addPayment(request, queue: try Self.queue(of: options), key: options.idempotencyKey)
            return try JSONCodec.encode(Storebus_PaymentQueue_V1_AddPaymentResponse.with { $0.transaction = transaction })
        case Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction.path:
            let request = try JSONCodec.decode(Storebus_PaymentQueue_V1_FinishTransactionRequest.self, from: body)
            let already = try finish(request.transactionIdentifier, queue: try Self.queue(of: options))
            return try JSONCodec.encode(Storebus_PaymentQueue_V1_FinishTransactionResponse.with { $0.alreadyFinished = already })
        case Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path:
            let queue = try Self.queue(of: options)
            let (transactions, head) = state.withLock { state in (Self.unfinished(state, queue.key), UInt64(state.logs[queue.key]?.count ?? 0)) }
            return try JSONCodec.encode(Storebus_PaymentQueue_V1_ListTransactionsResponse.with {
                $0.transactions = transactions
                $0.keySeq = head
                $0.queueKey = queue.key
            })
        case Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions.path:
            let request = try JSONCodec.decode(Storebus_PaymentQueue_V1_RestoreCompletedTransactionsRequest.self, from: body)
            return try JSONCodec.encode(restore(request, queue: try Self.queue(of: options)))
        default:
            throw RPCError(.unimplemented, "\(path) is not served by InMemoryStore").withReason("UNKNOWN_METHOD", domain: "storebus.rpc")
        }
    }

    // MARK: Products

    private func fetchProducts(_ request: Storebus_Catalog_V1_FetchProductsRequest) -> Storebus_Catalog_V1_FetchProductsResponse {
        let products = state.withLock { $0.products }
        var seen = Set<String>()
        var response = Storebus_Catalog_V1_FetchProductsResponse()
        response.storefront = "USA"
        for id in request.productIdentifiers where seen.insert(id).inserted {
            guard let product = products[id] else {
                response.invalidProductIdentifiers.append(id)
                continue
            }
            response.products.append(.with {
                $0.productIdentifier = product.id
                $0.localizedTitle = product.title
                $0.price = product.price
                $0.priceLocale = "en_US"
                $0.currencyCode = "USD"
                $0.formattedPrice = "$\(product.price)"
                $0.productType = product.type
            })
        }
        return response
    }

    // MARK: The queue

    private func addPayment(_ request: Storebus_PaymentQueue_V1_AddPaymentRequest, queue: Storebus_PaymentQueue_V1_QueueRef, key: String?) throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        guard (0...10).contains(request.payment.quantity) else {
            throw RPCError.invalidArgument(field: "payment.quantity", "must be 1 to 10")
        }
        guard !request.payment.productIdentifier.isEmpty else {
            throw RPCError.invalidArgument(field: "payment.productIdentifier", "must not be empty")
        }
        let added = state.withLock { state -> Storebus_PaymentQueue_V1_PaymentTransaction in
            state.queues[queue.key] = queue
            if let key, let known = state.transactions.values.first(where: { $0.idempotencyKey == key && $0.queueKey == queue.key }) {
                return known.transaction
            }
            var payment = request.payment
            if payment.quantity == 0 { payment.quantity = 1 }
            let product = state.products[payment.productIdentifier]
            var transaction = Storebus_PaymentQueue_V1_PaymentTransaction.with {
                $0.transactionIdentifier = String(state.nextID)
                $0.transactionState = .purchasing
                $0.transactionDate = .init(date: Date())
                $0.payment = payment
                $0.queue = queue
                $0.storefront = "USA"
                $0.productType = product?.type ?? .unspecified
                $0.price = product?.price ?? ""
                $0.currencyCode = product == nil ? "" : "USD"
            }
            state.nextID += 1
            let id = transaction.transactionIdentifier
            state.transactions[id] = Stored(transaction: transaction, queueKey: queue.key, account: queue.accountID, idempotencyKey: key)
            state.order.append(id)
            let purchasing = transaction
            Self.append(&state, queue.key) { $0.updatedTransactions.transactions = [purchasing] }
            // The sandbox answers at once.
            transaction.transactionDate = .init(date: Date())
            if product == nil {
                transaction.transactionState = .failed
                transaction.error = .with {
                    $0.code = .storeProductNotAvailable
                    $0.localizedDescription = "The product is not available in this storefront."
                }
            } else if payment.simulatesAskToBuyInSandbox {
                transaction.transactionState = .deferred
            } else {
                switch state.policies[queue.accountID] ?? .approve {
                case .approve:
                    transaction.transactionState = .purchased
                case .askToBuy:
                    transaction.transactionState = .deferred
                case .fail(let code):
                    transaction.transactionState = .failed
                    transaction.error = .with {
                        $0.code = Storebus_PaymentQueue_V1_SKError(rawValue: code.rawValue) ?? .unknown
                        $0.localizedDescription = code == .paymentCancelled ? "The payment was cancelled." : "The payment failed."
                    }
                }
            }
            state.transactions[id]?.transaction = transaction
            let decided = transaction
            Self.append(&state, queue.key) { $0.updatedTransactions.transactions = [decided] }
            return purchasing
        }
        wake()
        return added
    }

    private func finish(_ id: String, queue: Storebus_PaymentQueue_V1_QueueRef) throws -> Bool {
        let already = try state.withLock { state -> Bool in
            guard let stored = state.transactions[id], stored.queueKey == queue.key else {
                if state.transactions[id].map({ $0.account != queue.accountID }) == true {
                    throw RPCError.resource(.permissionDenied, type: "transaction", name: id, "transaction \(id) belongs to another account")
                        .withReason("OTHER_ACCOUNT", domain: "storebus.payment_queue")
                }
                throw RPCError.resource(.notFound, type: "transaction", name: id, "no transaction \(id) in this queue")
            }
            if stored.transaction.finished { return true }
            guard stored.transaction.transactionState != .purchasing, stored.transaction.transactionState != .deferred else {
                throw RPCError.resource(.failedPrecondition, type: "transaction", name: id, "transaction \(id) is not settled yet: it cannot be finished")
            }
            state.transactions[id]?.transaction.finished = true
            let removed = state.transactions[id]!.transaction
            Self.append(&state, queue.key) { $0.removedTransactions.transactions = [removed] }
            return false
        }
        wake()
        return already
    }

    private func restore(_ request: Storebus_PaymentQueue_V1_RestoreCompletedTransactionsRequest, queue: Storebus_PaymentQueue_V1_QueueRef) -> Storebus_PaymentQueue_V1_RestoreCompletedTransactionsResponse {
        let response = state.withLock { state -> Storebus_PaymentQueue_V1_RestoreCompletedTransactionsResponse in
            state.queues[queue.key] = queue
            let originals = state.order.compactMap { state.transactions[$0] }.filter { stored in
                stored.account == queue.accountID && stored.transaction.transactionState == .purchased
                    && [.nonConsumable, .autoRenewableSubscription].contains(stored.transaction.productType)
                    && (request.applicationUsername.isEmpty || stored.transaction.payment.applicationUsername == request.applicationUsername)
            }
            var restored: [Storebus_PaymentQueue_V1_PaymentTransaction] = []
            for original in originals {
                var copy = original.transaction
                copy.transactionIdentifier = String(state.nextID)
                state.nextID += 1
                copy.transactionState = .restored
                copy.transactionDate = .init(date: Date())
                copy.finished = false
                copy.queue = queue
                copy.originalTransaction = original.transaction
                copy.originalTransaction.clearOriginalTransaction()
                state.transactions[copy.transactionIdentifier] = Stored(transaction: copy, queueKey: queue.key, account: queue.accountID)
                state.order.append(copy.transactionIdentifier)
                restored.append(copy)
            }
            let restoreID = "restore-\(state.nextID)"
            state.nextID += 1
            for start in stride(from: 0, to: restored.count, by: 64) {
                let chunk = Array(restored[start..<min(start + 64, restored.count)])
                Self.append(&state, queue.key) { $0.updatedTransactions.transactions = chunk }
            }
            Self.append(&state, queue.key) {
                $0.restoreCompletedTransactionsFinished = .with {
                    $0.restoreID = restoreID
                    $0.restoredCount = UInt32(restored.count)
                }
            }
            return .with {
                $0.restoreID = restoreID
                $0.restoredCount = UInt32(restored.count)
            }
        }
        wake()
        return response
    }

    // MARK: The observer stream

    private func observe(_ request: Storebus_Gateway_V1_ObserveRequest, queue: Storebus_PaymentQueue_V1_QueueRef) async throws -> Storebus_Gateway_V1_ObserveResponse {
        let credit = Int(request.credit == 0 ? 64 : min(request.credit, 500))
        let deadline = ContinuousClock.now + .milliseconds(Int64(min(request.waitMs, 30_000)))
        while true {
            var looked = 0
            let answer = try state.withLock { state -> Storebus_Gateway_V1_ObserveResponse? in
                looked = state.generations[queue.key, default: 0]
                state.queues[queue.key] = queue
                let log = state.logs[queue.key] ?? []
                let head = UInt64(log.count)
                if request.replay {
                    let unfinished = Self.unfinished(state, queue.key)
                    var events: [Storebus_Gateway_V1_ObserverEvent] = []
                    if !unfinished.isEmpty {
                        events.append(.with {
                            $0.seq = head
                            $0.updatedTransactions.transactions = unfinished
                            $0.replayed = true
                        })
                    }
                    events.append(.with {
                        $0.seq = head
                        $0.replayComplete.replayedCount = UInt32(unfinished.count)
                    })
                    return .with {
                        $0.events = events
                        $0.headSeq = head
                    }
                }
                guard request.afterSeq <= head else {
                    throw RPCError(.outOfRange, "afterSeq \(request.afterSeq) is past the queue's newest position \(head)")
                }
                let waiting = Array(log.dropFirst(Int(request.afterSeq)).prefix(credit))
                if waiting.isEmpty && ContinuousClock.now < deadline && !state.closed { return nil }
                return .with {
                    $0.events = waiting
                    $0.headSeq = head
                }
            }
            if let answer { return answer }
            await waitForEvent(queue.key, after: looked, until: deadline)
        }
    }

    /// Waits until the queue `key`'s log grows past `generation`, or `deadline` passes.
    private func waitForEvent(_ key: String, after generation: Int, until deadline: ContinuousClock.Instant) async {
        let timer = Task { [weak self] in
            try? await Task.sleep(until: deadline, clock: .continuous)
            self?.wake(key)
        }
        defer { timer.cancel() }
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.closed || state.generations[key, default: 0] != generation { return true }
                state.waiters.append((key, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Wakes the Observe calls waiting on `key` (all of them when nil).
    private func wake(_ key: String? = nil) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            var ready: [CheckedContinuation<Void, Never>] = []
            state.waiters.removeAll { waiter in
                guard key == nil || waiter.key == key else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    private static func append(_ state: inout State, _ key: String, _ fill: (inout Storebus_Gateway_V1_ObserverEvent) -> Void) {
        var event = Storebus_Gateway_V1_ObserverEvent()
        event.seq = UInt64((state.logs[key]?.count ?? 0) + 1)
        fill(&event)
        state.logs[key, default: []].append(event)
        state.generations[key, default: 0] += 1
    }

    private static func unfinished(_ state: State, _ key: String) -> [Storebus_PaymentQueue_V1_PaymentTransaction] {
        state.order.compactMap { state.transactions[$0] }.filter { $0.queueKey == key && !$0.transaction.finished }.map(\.transaction)
    }
}
