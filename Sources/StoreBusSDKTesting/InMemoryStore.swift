import ContentPackage
import Crypto
import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema
import Synchronization
import ZeroMQ

/// A StoreBus deployment in memory, as a device sees it through a gateway: products, the payment
/// queue's states and callbacks (purchase, Ask to Buy, failures, finish, restore, refunds), for an
/// app's unit tests that need no running services. Hand it to ``StoreConnection`` as its transport:
///
/// ```swift
/// let store = try InMemoryStore(products: [.init(id: "com.example.gems100", kind: .consumable, price: "0.99")])
/// let queue = store.queue(account: "alice")
/// queue.add(observer)
/// store.setPolicy(.askToBuy, account: "alice")   // the sandbox's controls, as methods
/// ```
///
/// It answers the calls the SDK makes for the queue, products, downloads and subscriptions
/// (Authenticate, Observe, FetchProducts, CanMakePayments, AddPayment, FinishTransaction,
/// ListTransactions, RestoreCompletedTransactions, Download's start, pause, resume, cancel,
/// complete, fail and chunk reads, ListSubscriptions and SetAutoRenew) with the same states,
/// callbacks, positions and errors as the services; anything else (receipts among them) is
/// UNIMPLEMENTED. Subscriptions renew on a virtual clock the test moves on with ``advance(by:)``. The SDK's own tests run one list of scenarios against it
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
        /// Hosted content (non-consumables): file paths and their bytes, packed as the download
        /// service packs a product's folder; nil for none.
        public var hostedContent: [(path: String, bytes: [UInt8])]?
        /// Subscriptions: the length of a period (default one month).
        public var period: SubscriptionPeriod?
        /// Auto-renewable subscriptions: the group (default: the product identifier).
        public var group: String?

        public init(
            id: String, kind: Kind, title: String? = nil, price: String = "0.99", hostedContent: [(path: String, bytes: [UInt8])]? = nil,
            period: SubscriptionPeriod? = nil, group: String? = nil
        ) {
            self.id = id
            self.kind = kind
            self.title = title ?? id
            self.price = price
            self.hostedContent = hostedContent
            let subscription = kind == .autoRenewable || kind == .nonRenewing
            self.period = subscription ? period ?? SubscriptionPeriod(unit: .month, numberOfUnits: 1) : nil
            self.group = kind == .autoRenewable ? group ?? id : nil
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

    struct Stored {
        var transaction: Storebus_PaymentQueue_V1_PaymentTransaction
        var queueKey: String
        var account: String
        var idempotencyKey: String?
        /// What the payment queue's state machine, shared with the service, knows of it.
        var facts: TransactionStateMachine.Facts
        /// A renewal: the account's other queues it was delivered to, and whether each finished it.
        var deliveries: [String: Bool] = [:]

        var machineFacts: TransactionStateMachine.Facts {
            var facts = facts
            facts.finished = transaction.finished
            return facts
        }
    }

    /// A product's hosted content, packed.
    struct Package {
        var bytes: [UInt8]
        var sha256: String
        /// The digest of its pieces' digests, as the download service gives it.
        var piecesSHA256: String
        static let version = "1.0"
    }

    struct State {
        var products: [String: Product]
        var packages: [String: Package] = [:]
        var app: String
        var transactions: [String: Stored] = [:]
        var order: [String] = []
        /// Each queue's callbacks, position n at index n - 1.
        var logs: [String: [Storebus_Gateway_V1_ObserverEvent]] = [:]
        var queues: [String: Storebus_PaymentQueue_V1_QueueRef] = [:]
        var policies: [String: Policy] = [:]
        var nextID: UInt64 = 1_000_000_000_000_001
        /// How many times each queue's log grew (``grown`` hears of it after the lock): a wait
        /// returns at once if it has grown since the caller looked.
        var generations: [String: Int] = [:]
        var closed = false
        /// How far the test moved the store's clock on (``advance(by:)``).
        var offset: TimeInterval = 0
        var now: Date { Date().addingTimeInterval(offset) }
        /// Each account's subscription per group (key ``subscriptionKey(_:_:)``).
        var subscriptions: [String: SubscriptionState] = [:]
        var billing = BillingControls()
    }

    let state: Mutex<State>
    /// Each queue's log growth, as Observe calls wait for it.
    private let grown = PositionWaiter<String>()

    /// A store selling `products` in the app `app`. Throws when hosted content cannot be packed.
    public init(app: String = "com.example.app", products: [Product]) throws {
        var state = State(products: Dictionary(products.map { ($0.id, $0) }, uniquingKeysWith: { $1 }), app: app)
        for product in products {
            guard let files = product.hostedContent else { continue }
            state.packages[product.id] = try Self.pack(files)
        }
        self.state = Mutex(state)
    }

    /// The files packed as ContentPackage packs them (through a temporary folder).
    private static func pack(_ files: [(path: String, bytes: [UInt8])]) throws -> Package {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("storebus-memory-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        var sources: [ContentPackage.File] = []
        for file in files {
            let source = folder.appendingPathComponent("files").appendingPathComponent(file.path)
            try FileManager.default.createDirectory(at: source.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(file.bytes).write(to: source)
            sources.append(ContentPackage.File(path: file.path, source: source, length: Int64(file.bytes.count)))
        }
        let package = folder.appendingPathComponent("package.tar")
        let made = try ContentPackage.write(sources, to: package, pieceBytes: ContentPackage.pieceBytes)
        return Package(bytes: Array(try Data(contentsOf: package)), sha256: made.sha256, piecesSHA256: ContentPackage.PiecesDigest(made.pieceSHA256).finalize())
    }

    /// A payment queue for a device of `account` in the store's app, over this store.
    /// Downloads go to `downloads` (default: a folder of the temporary directory).
    public func queue(account: String, device: String = "device", downloads: URL? = nil) -> PaymentQueue {
        let app = state.withLock { $0.app }
        var configuration = StoreConfiguration(gatewayEndpoints: ["memory"], apiKey: "memory", appBundleID: app, accountID: account, deviceID: device)
        if let downloads { configuration.downloadDirectory = downloads }
        configuration.observerHold = .seconds(5)
        return PaymentQueue(connection: StoreConnection(configuration: configuration, transport: self))
    }

    // MARK: The sandbox's controls

    /// How payments of `account` are answered from now on (default: approved).
    public func setPolicy(_ policy: Policy, account: String) {
        state.withLock { $0.policies[account] = policy }
    }

    /// Approves a deferred (Ask to Buy) transaction: it becomes PURCHASED; approving it again is OK.
    /// Throws `RPCError` as the payment queue does: NOT_FOUND for an unknown transaction,
    /// FAILED_PRECONDITION when it is not waiting for Ask to Buy.
    public func approveAskToBuy(_ id: String) throws {
        try answerAskToBuy(id, .approve)
    }

    /// Declines a deferred (Ask to Buy) transaction: it becomes FAILED, paymentCancelled; declining it
    /// again is OK.
    public func declineAskToBuy(_ id: String) throws {
        try answerAskToBuy(id, .decline)
    }

    /// Refunds a purchase: it and its restored copies carry a cancellation date, and every queue of
    /// the account hears `didRevokeEntitlements` for the product.
    public func refund(_ id: String) throws {
        try state.withLock { state in
            guard let stored = state.transactions[id] else { throw TransactionStateMachine.unknown(id) }
            if case .refused(let predicate) = TransactionStateMachine.step(stored.transaction.transactionState, .refund, stored.machineFacts) {
                throw TransactionStateMachine.refusal(id, predicate)
            }
            let now = state.now
            for key in state.order
            where state.transactions[key]?.transaction.transactionIdentifier == id
                || state.transactions[key]?.transaction.originalTransaction.transactionIdentifier == id
            {
                state.transactions[key]?.transaction.cancellationDate = .init(date: now)
            }
            guard stored.transaction.productType != .consumable, Self.revokeSubscription(&state, refunded: stored.transaction, account: stored.account) else { return }
            for (queueKey, queue) in state.queues where queue.accountID == stored.account {
                Self.append(&state, queueKey) { $0.didRevokeEntitlementsForProductIdentifiers.productIdentifiers = [stored.transaction.payment.productIdentifier] }
            }
        }
        wake()
    }

    private func answerAskToBuy(_ id: String, _ event: TransactionStateMachine.Event) throws {
        try state.withLock { state in
            guard var stored = state.transactions[id] else { throw TransactionStateMachine.unknown(id) }
            switch TransactionStateMachine.step(stored.transaction.transactionState, event, stored.machineFacts) {
            case .refused(let predicate):
                throw TransactionStateMachine.refusal(id, predicate)
            case .move(let target, let failure, _):
                Self.move(&stored.transaction, to: target, failure: failure, packages: state.packages, at: state.now)
                if target == .purchased { Self.startPeriod(&state, &stored.transaction, queueKey: stored.queueKey, account: stored.account) }
                state.transactions[id] = stored
                let transaction = stored.transaction
                Self.append(&state, stored.queueKey) { $0.updatedTransactions.transactions = [transaction] }
            case .unchanged, .leaveQueue, .revoke:
                return
            }
        }
        wake()
    }

    /// A move the state machine says, with the time, the error and, once purchased, the content.
    static func move(
        _ transaction: inout Storebus_PaymentQueue_V1_PaymentTransaction, to target: TransactionStateMachine.State,
        failure: Storebus_PaymentQueue_V1_StoreKitError?, packages: [String: Package], at now: Date
    ) {
        transaction.transactionState = target
        transaction.transactionDate = .init(date: now)
        if let failure { transaction.error = failure }
        if target == .purchased { transaction.downloads = offered(packages, transaction) }
    }

    // MARK: StoreTransport

    public func callRaw(path: String, idempotent: Bool, body: [UInt8], options: CallOptions) async throws(RPCError) -> RawResponse {
        do {
            if path == Storebus_Download_V1_Download.readChunk.path {
                // Its bytes in a frame of their own when asked, as the download service answers.
                let request = try JSONCodec.decode(Storebus_Download_V1_ReadChunkRequest.self, from: body)
                let (json, attachment) = try readChunk(request, queue: try Self.queue(of: options))
                return RawResponse(code: .ok, body: json, attachment: attachment.map(HeldFrame.init))
            }
            let answer = try await answer(path: path, body: body, options: options)
            return RawResponse(code: .ok, body: answer)
        } catch let error as RPCError {
            return RawResponse(code: error.code, body: (try? JSONCodec.encode(error.status)) ?? [])
        } catch {
            return RawResponse(code: .internalError, body: (try? JSONCodec.encode(RPCError(.internalError, "\(error)").status)) ?? [])
        }
    }

    public func shutdown() async {
        state.withLock { $0.closed = true }
        grown.close()
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
            return try JSONCodec.encode(
                Storebus_Gateway_V1_AuthenticateResponse.with {
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
            return try JSONCodec.encode(
                Storebus_PaymentQueue_V1_ListTransactionsResponse.with {
                    $0.transactions = transactions
                    $0.keySeq = head
                    $0.queueKey = queue.key
                })
        case Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions.path:
            let request = try JSONCodec.decode(Storebus_PaymentQueue_V1_RestoreCompletedTransactionsRequest.self, from: body)
            return try JSONCodec.encode(restore(request, queue: try Self.queue(of: options)))
        case Storebus_Download_V1_Download.startDownloads.path:
            let request = try JSONCodec.decode(Storebus_Download_V1_StartDownloadsRequest.self, from: body)
            return try JSONCodec.encode(try changeDownloads(request, action: .start, queue: try Self.queue(of: options), as: Storebus_Download_V1_StartDownloadsResponse.self))
        case Storebus_Download_V1_Download.resumeDownloads.path:
            let request = try JSONCodec.decode(Storebus_Download_V1_ResumeDownloadsRequest.self, from: body)
            return try JSONCodec.encode(try changeDownloads(request, action: .resume, queue: try Self.queue(of: options), as: Storebus_Download_V1_ResumeDownloadsResponse.self))
        case Storebus_Download_V1_Download.pauseDownloads.path:
            let request = try JSONCodec.decode(Storebus_Download_V1_PauseDownloadsRequest.self, from: body)
            return try JSONCodec.encode(try changeDownloads(request, action: .pause, queue: try Self.queue(of: options), as: Storebus_Download_V1_PauseDownloadsResponse.self))
        case Storebus_Download_V1_Download.cancelDownloads.path:
            let request = try JSONCodec.decode(Storebus_Download_V1_CancelDownloadsRequest.self, from: body)
            return try JSONCodec.encode(try changeDownloads(request, action: .cancel, queue: try Self.queue(of: options), as: Storebus_Download_V1_CancelDownloadsResponse.self))
        case Storebus_Download_V1_Download.completeDownload.path:
            let request = try JSONCodec.decode(Storebus_Download_V1_CompleteDownloadRequest.self, from: body)
            let queue = try Self.queue(of: options)
            let expected = try state.withLock { state in state.packages[try Self.product(of: request.download, in: state)]?.sha256 }
            guard request.sha256 == expected else {
                throw RPCError(.failedPrecondition, "the SHA-256 is not the package's").withReason("DIGEST_MISMATCH", domain: "storebus.download")
            }
            let status = try changeDownloads([request.download], action: .complete, queue: queue, contentURL: request.contentURL).first ?? .init()
            return try JSONCodec.encode(Storebus_Download_V1_CompleteDownloadResponse.with { $0.download = status })
        case Storebus_Download_V1_Download.failDownload.path:
            let request = try JSONCodec.decode(Storebus_Download_V1_FailDownloadRequest.self, from: body)
            let status = try changeDownloads([request.download], action: .fail, queue: try Self.queue(of: options), error: request.error).first ?? .init()
            return try JSONCodec.encode(Storebus_Download_V1_FailDownloadResponse.with { $0.download = status })
        default:
            if let answer = try answerSubscriptions(path: path, body: body, queue: { try Self.queue(of: options) }) { return answer }
            throw RPCError(.unimplemented, "\(path) is not served by InMemoryStore").withReason("UNKNOWN_METHOD", domain: "storebus.rpc")
        }
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
                $0.transactionDate = .init(date: state.now)
                $0.payment = payment
                $0.queue = queue
                $0.storefront = "USA"
                $0.productType = product?.type ?? .unspecified
                $0.price = product?.price ?? ""
                $0.currencyCode = product == nil ? "" : "USD"
            }
            state.nextID += 1
            let id = transaction.transactionIdentifier
            var facts = TransactionStateMachine.Facts(asksToBuy: payment.simulatesAskToBuyInSandbox)
            switch state.policies[queue.accountID] ?? .approve {
            case .approve: facts.policy = .approve
            case .askToBuy: facts.policy = .askToBuy
            case .fail(let code):
                facts.policy = .fail
                facts.policyError = Storebus_PaymentQueue_V1_SKError(rawValue: code.rawValue) ?? .unknown
            }
            state.transactions[id] = Stored(transaction: transaction, queueKey: queue.key, account: queue.accountID, idempotencyKey: key, facts: facts)
            state.order.append(id)
            let purchasing = transaction
            Self.append(&state, queue.key) { $0.updatedTransactions.transactions = [purchasing] }
            // The sandbox decides at once, as the payment queue's machine says.
            if product == nil {
                Self.move(&transaction, to: .failed, failure: .make(.storeProductNotAvailable), packages: state.packages, at: state.now)
            } else if case .move(let target, let failure, _) = TransactionStateMachine.step(.purchasing, .decide, facts) {
                Self.move(&transaction, to: target, failure: failure, packages: state.packages, at: state.now)
                if target == .purchased { Self.startPeriod(&state, &transaction, queueKey: queue.key, account: queue.accountID) }
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
            if let finished = state.transactions[id]?.deliveries[queue.key] {
                // A renewal delivered to this queue: finished here on its own.
                guard !finished else { return true }
                state.transactions[id]!.deliveries[queue.key] = true
                var removed = state.transactions[id]!.transaction
                removed.queue = queue
                removed.finished = true
                Self.append(&state, queue.key) { $0.removedTransactions.transactions = [removed] }
                return false
            }
            guard let stored = state.transactions[id], stored.queueKey == queue.key else {
                if state.transactions[id].map({ $0.account != queue.accountID }) == true {
                    throw RPCError.resource(.permissionDenied, type: "transaction", name: id, "transaction \(id) belongs to another account")
                        .withReason("OTHER_ACCOUNT", domain: "storebus.payment_queue")
                }
                throw RPCError.resource(.notFound, type: "transaction", name: id, "no transaction \(id) in this queue")
            }
            switch TransactionStateMachine.step(stored.transaction.transactionState, .finish, stored.machineFacts) {
            case .unchanged: return true
            case .refused(let predicate): throw TransactionStateMachine.refusal(id, predicate)
            case .leaveQueue, .move, .revoke: break
            }
            var downloads = stored.transaction.downloads
            let cancelled = downloads.indices.filter { ![.finished, .cancelled].contains(downloads[$0].state) }
            for index in cancelled { downloads[index] = Self.moved(downloads[index], to: .cancelled) }
            if !cancelled.isEmpty {
                state.transactions[id]?.transaction.downloads = downloads
                let announced = cancelled.map { downloads[$0] }
                Self.append(&state, queue.key) { $0.updatedDownloads.downloads = announced }
            }
            state.transactions[id]?.transaction.finished = true
            let removed = state.transactions[id]!.transaction
            Self.append(&state, queue.key) { $0.removedTransactions.transactions = [removed] }
            return false
        }
        wake()
        return already
    }

    private func restore(
        _ request: Storebus_PaymentQueue_V1_RestoreCompletedTransactionsRequest, queue: Storebus_PaymentQueue_V1_QueueRef
    ) -> Storebus_PaymentQueue_V1_RestoreCompletedTransactionsResponse {
        let response = state.withLock { state -> Storebus_PaymentQueue_V1_RestoreCompletedTransactionsResponse in
            state.queues[queue.key] = queue
            let originals = state.order.compactMap { state.transactions[$0] }.filter { stored in
                stored.account == queue.accountID && stored.transaction.transactionState == .purchased
                    && [.nonConsumable, .autoRenewableSubscription].contains(stored.transaction.productType)
                    && [stored.transaction.transactionIdentifier, ""].contains(stored.transaction.originalTransactionID)
                    && (request.applicationUsername.isEmpty || stored.transaction.payment.applicationUsername == request.applicationUsername)
            }
            var restored: [Storebus_PaymentQueue_V1_PaymentTransaction] = []
            for original in originals {
                var copy = original.transaction
                copy.transactionIdentifier = String(state.nextID)
                state.nextID += 1
                copy.transactionState = .restored
                copy.transactionDate = .init(date: state.now)
                copy.finished = false
                copy.queue = queue
                copy.originalTransaction = original.transaction
                copy.originalTransaction.clearOriginalTransaction()
                copy.downloads = Self.offered(state.packages, copy)
                state.transactions[copy.transactionIdentifier] = Stored(transaction: copy, queueKey: queue.key, account: queue.accountID, facts: .init())
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
                        events.append(
                            .with {
                                $0.seq = head
                                $0.updatedTransactions.transactions = unfinished
                                $0.replayed = true
                            })
                    }
                    events.append(
                        .with {
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
            // The caller went away (its queue closed): no answer is waited for.
            if Task.isCancelled { throw RPCError(.cancelled, "the Observe call was cancelled") }
        }
    }

    /// Waits until the queue `key`'s log grows past `generation`, or `deadline` passes.
    private func waitForEvent(_ key: String, after generation: Int, until deadline: ContinuousClock.Instant) async {
        _ = await grown.wait(key, beyond: UInt64(generation), timeout: ContinuousClock.now.duration(to: deadline))
    }

    /// Tells the Observe calls waiting how far each queue's log has grown.
    func wake() {
        for (key, generation) in state.withLock({ $0.generations }) {
            grown.advance(key, to: UInt64(generation))
        }
    }

    static func append(_ state: inout State, _ key: String, _ fill: (inout Storebus_Gateway_V1_ObserverEvent) -> Void) {
        var event = Storebus_Gateway_V1_ObserverEvent()
        event.seq = UInt64((state.logs[key]?.count ?? 0) + 1)
        fill(&event)
        state.logs[key, default: []].append(event)
        state.generations[key, default: 0] += 1
    }

    /// The queue's unfinished transactions and the renewals delivered to it that it has not finished.
    private static func unfinished(_ state: State, _ key: String) -> [Storebus_PaymentQueue_V1_PaymentTransaction] {
        state.order.compactMap { state.transactions[$0] }.compactMap { stored in
            if stored.queueKey == key { return stored.transaction.finished ? nil : stored.transaction }
            guard stored.deliveries[key] == false, let queue = state.queues[key] else { return nil }
            var delivered = stored.transaction
            delivered.queue = queue
            return delivered
        }
    }
}
