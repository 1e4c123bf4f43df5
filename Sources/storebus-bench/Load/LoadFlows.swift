import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

/// The kinds of flow a simulated device runs, each a sequence of timed steps as an app makes them.
enum FlowKind: String, CaseIterable, Sendable, Codable {
    /// Fetch the product, buy it, wait for purchased, have the store verify the refreshed receipt,
    /// finish.
    case purchase
    /// Buy a product with hosted content, download it to the end, finish.
    case download
    /// Buy with Ask to Buy: deferred, approved by an admin, then purchased; finish.
    case askToBuy = "ask-to-buy"
    /// Restore the account's completed transactions and finish them.
    case restore
    /// Subscribe (the account's first purchase in the group, or "already subscribed"), read the
    /// group's status with its signed transaction and renewal info verified, have an admin renew it
    /// now and wait for the renewal on the queue, finish both, turn auto-renew off.
    case subscribe
}

/// What the flows need of the deployment.
struct LoadTarget: Sendable {
    var gateways: [String]
    var gatewayKey: String?
    var appKey: String
    var adminKey: String
    /// verifyReceipt's password: a receipt holding auto-renewable subscriptions needs it (21004).
    var sharedSecret: String
    var app: String
    var consumable: String
    var downloadable: String
    var subscription: String
    var subscriptionGroup: String
    var runID: String
    var downloadDirectory: URL

    func configuration(account: String, device: String, key: String? = nil) -> StoreConfiguration {
        var configuration = StoreConfiguration(gatewayEndpoints: gateways, apiKey: key ?? appKey, appBundleID: app, accountID: account, deviceID: device)
        configuration.gatewayPublicKey = gatewayKey
        configuration.callTimeout = .seconds(20)
        configuration.downloadDirectory = downloadDirectory.appendingPathComponent(device)
        return configuration
    }
}

/// A failure of a flow: where, and the status code (or StoreKit error) it ended with.
struct FlowFailure: Error {
    let step: String
    let code: String
    let message: String
}

/// One simulated device: an account's payment queue, kept open between its flows as an app keeps
/// its queue.
final class LoadDevice: Sendable {
    let queue: PaymentQueue
    let admin: StoreConnection
    let target: LoadTarget
    let account: String

    /// Device `index` for its `generation`-th account: a new account every so many flows, as a
    /// deployment serves many customers rather than a few buying without end.
    init(index: Int, generation: Int, target: LoadTarget, admin: StoreConnection) throws {
        self.target = target
        self.admin = admin
        account = "load-\(target.runID)-\(index)-\(generation)"
        queue = try PaymentQueue(configuration: target.configuration(account: account, device: "load-device-\(index)"))
    }

    /// Runs one flow of `kind`, timing each step into `record` (step name, seconds); throws
    /// ``FlowFailure`` naming the step that failed.
    func run(_ kind: FlowKind, record: (String, Double) -> Void) async throws {
        switch kind {
        case .purchase:
            let product = try await step("fetch", record) { try await self.fetch(self.target.consumable) }
            let bought = try await step("purchase", record) { try await self.buy(Payment(product: product)) }
            try await step("verify-receipt", record) { try await self.verifyReceipt() }
            try await step("finish", record) { _ = try await self.queue.finish(bought) }
        case .download:
            let product = try await step("fetch", record) { try await self.fetch(self.target.downloadable) }
            let bought = try await step("purchase", record) { try await self.buy(Payment(product: product)) }
            try await step("download", record) { try await self.download(bought) }
            try await step("finish", record) { _ = try await self.queue.finish(bought) }
        case .askToBuy:
            let product = try await step("fetch", record) { try await self.fetch(self.target.consumable) }
            let updates = queue.transactionUpdates
            let deferred = try await step("ask", record) { () async throws -> PaymentTransaction in
                guard case .pending(let transaction) = try await self.queue.purchase(Payment(productIdentifier: product.productIdentifier, simulatesAskToBuyInSandbox: true)) else {
                    throw FlowFailure(step: "ask", code: "NOT_DEFERRED", message: "an Ask to Buy purchase was not deferred")
                }
                return transaction
            }
            let bought = try await step("approve", record) { () async throws -> PaymentTransaction in
                _ = try await self.admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.approveAskToBuy, .with { $0.transactionIdentifier = deferred.transactionIdentifier })
                for await update in updates where update.transactionIdentifier == deferred.transactionIdentifier && update.transactionState == .purchased {
                    return update
                }
                throw FlowFailure(step: "approve", code: "CLOSED", message: "the queue closed before the approval arrived")
            }
            try await step("finish", record) { _ = try await self.queue.finish(bought) }
        case .subscribe:
            try await subscribe(record)
        case .restore:
            let restored = try await step("restore", record) { try await self.restore() }
            try await step("finish", record) {
                for transaction in restored { _ = try await self.queue.finish(transaction) }
            }
        }
    }

    func close() async {
        await queue.close()
    }

    /// The subscribe flow (``FlowKind/subscribe``).
    private func subscribe(_ record: (String, Double) -> Void) async throws {
        let product = try await step("fetch", record) { try await self.fetch(self.target.subscription) }
        let bought = try await step("subscribe", record) { try await self.buy(Payment(product: product)) }
        let status = try await step("status", record) { () async throws -> SubscriptionStatus in
            guard let status = try await self.queue.subscriptionStatus(for: self.target.subscriptionGroup).first, status.state == .subscribed else {
                throw FlowFailure(step: "status", code: "NOT_SUBSCRIBED", message: "the group's status does not say subscribed")
            }
            return status
        }
        let updates = queue.transactionUpdates
        let renewal = try await step("renew", record) { () async throws -> PaymentTransaction in
            _ = try await self.admin.call(
                Storebus_PaymentQueue_V1_Subscriptions.renewNow,
                .with {
                    $0.appBundleID = self.target.app
                    $0.accountID = self.account
                    $0.subscriptionGroupIdentifier = self.target.subscriptionGroup
                })
            for await update in updates
            where update.isRenewal && update.transactionState == .purchased
                && update.subscriptionOriginalTransactionIdentifier == status.originalTransactionIdentifier
            {
                return update
            }
            throw FlowFailure(step: "renew", code: "CLOSED", message: "the queue closed before the renewal arrived")
        }
        try await step("finish", record) {
            _ = try await self.queue.finish(bought)
            _ = try await self.queue.finish(renewal)
        }
        try await step("cancel", record) { _ = try await self.queue.connection.setAutoRenew(false, group: self.target.subscriptionGroup) }
    }

    private func fetch(_ identifier: String) async throws -> Product {
        let response = try await ProductsRequest(productIdentifiers: [identifier], connection: queue.connection).start()
        guard let product = response.products.first else {
            throw FlowFailure(step: "fetch", code: "INVALID_PRODUCT", message: "\(identifier) is not sold")
        }
        return product
    }

    private func buy(_ payment: Payment) async throws -> PaymentTransaction {
        switch try await queue.purchase(payment) {
        case .success(let transaction): return transaction
        case .pending(let transaction), .userCancelled(let transaction):
            throw FlowFailure(step: "purchase", code: "NOT_PURCHASED", message: "\(transaction.transactionIdentifier) is \(transaction.transactionState)")
        }
    }

    private func verifyReceipt() async throws {
        let receipt = try await ReceiptRefreshRequest(connection: queue.connection).start()
        let answer = try await queue.connection.call(
            Storebus_Receipt_V1_Receipt.verifyReceipt,
            .with {
                $0.receiptData = receipt.base64EncodedString()
                $0.password = self.target.sharedSecret
            })
        guard answer.status == 0 else {
            throw FlowFailure(step: "verify-receipt", code: "RECEIPT_\(answer.status)", message: "verifyReceipt answered \(answer.status)")
        }
    }

    private func download(_ transaction: PaymentTransaction) async throws {
        guard let first = transaction.downloads.first else {
            throw FlowFailure(step: "download", code: "NO_CONTENT", message: "\(transaction.payment.productIdentifier) has no hosted content")
        }
        let progress = queue.progress(of: first)
        _ = try await queue.startDownloads(transaction.downloads)
        var last: Download?
        for await update in progress { last = update }
        guard let last, last.state == .finished else {
            throw FlowFailure(step: "download", code: "DOWNLOAD_\(last?.state.rawValue.uppercased() ?? "CLOSED")", message: last?.error?.localizedDescription ?? "the download did not finish")
        }
        // The content is not kept: a device downloads again in its next flow.
        if let url = last.contentURL { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
    }

    private func restore() async throws -> [PaymentTransaction] {
        let callbacks = queue.callbacks
        queue.restoreCompletedTransactions()
        var restored: [PaymentTransaction] = []
        for await callback in callbacks {
            switch callback.event {
            case .updatedTransactions(let transactions, _):
                restored += transactions.filter { $0.transactionState == .restored }
            case .restoreCompletedTransactionsFinished:
                return restored
            case .restoreCompletedTransactionsFailed(_, let error):
                throw FlowFailure(step: "restore", code: "SK_\(error.code)", message: error.localizedDescription)
            default:
                continue
            }
        }
        throw FlowFailure(step: "restore", code: "CLOSED", message: "the queue closed before the restore ended")
    }

    /// Times `body` as step `name`; its failure becomes a ``FlowFailure`` of that step.
    private func step<Value>(_ name: String, _ record: (String, Double) -> Void, _ body: () async throws -> Value) async throws -> Value {
        let start = ContinuousClock.now
        do {
            let value = try await body()
            record(name, (ContinuousClock.now - start).seconds)
            return value
        } catch let failure as FlowFailure {
            throw failure
        } catch let error as StoreError {
            throw FlowFailure(step: name, code: error.code, message: error.message)
        } catch let error as StoreKitError {
            throw FlowFailure(step: name, code: "SK_\(error.code)", message: error.localizedDescription)
        } catch {
            throw FlowFailure(step: name, code: "ERROR", message: "\(error)")
        }
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
