import ArgumentParser
import Foundation
import StoreBusSDK
import StoreSchema
import Synchronization

/// `storectl products`: SKProductsRequest at a terminal.
struct ProductsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "products", abstract: "Show products as the store sells them in a storefront.")

    @OptionGroup var client: ClientOptions
    @Option(help: "ISO 3166-1 alpha-3 storefront, such as FRA (default: the app's).")
    var storefront: String?
    @Argument(help: "Product identifiers.")
    var identifiers: [String]

    func run() async throws {
        let connection = try StoreConnection(configuration: client.configuration())
        let response = try await sentence {
            try await ProductsRequest(productIdentifiers: identifiers, storefront: storefront, connection: connection).start()
        }
        print("storefront \(response.storefront)")
        for product in response.products {
            print("\(product.productIdentifier)  \(product.localizedTitle)  \(product.formattedPrice)\(product.isDownloadable ? "  (hosted content)" : "")")
        }
        for identifier in response.invalidProductIdentifiers {
            print("\(identifier)  invalid: not for sale in \(response.storefront)")
        }
        await connection.close()
    }
}

/// `storectl buy`: adds a payment and prints its callbacks until it settles.
struct BuyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "buy", abstract: "Buy a product and print the callbacks until the transaction settles.")

    @OptionGroup var client: ClientOptions
    @OptionGroup var wait: WaitOptions
    @Argument(help: "The product identifier.")
    var product: String
    @Option(help: "How many, 1 to 10.")
    var quantity: Int = 1
    @Flag(help: "Answer with Ask to Buy (sandbox).")
    var askToBuy = false
    @Flag(help: "Finish the transaction once it is purchased or failed.")
    var finish = false
    @Option(help: "ISO 3166-1 alpha-3 storefront.")
    var storefront: String?

    func run() async throws {
        let queue = try await client.queue()
        let callbacks = queue.callbacks
        let transaction = try await sentence {
            try await queue.addPayment(Payment(productIdentifier: product, quantity: quantity, simulatesAskToBuyInSandbox: askToBuy), storefront: storefront)
        }
        print("added transaction \(transaction.transactionIdentifier) for \(product)")
        let id = transaction.transactionIdentifier
        guard await settles(id, callbacks, within: wait.duration) else {
            await queue.close()
            throw Failure(description: "Transaction \(id) did not settle within \(wait.text); `storectl watch` shows it when it does.")
        }
        let settled = queue.transactions.first(where: { $0.transactionIdentifier == id })
        if finish, let settled, settled.transactionState != .deferred {
            try await sentence { try await queue.finish(settled) }
            _ = await isRemoved(id, callbacks, within: wait.duration)
        }
        await queue.close()
        // A script must be able to tell a purchase that failed from one that went through.
        if let settled, settled.transactionState == .failed {
            throw Failure(description: "The purchase failed: \(settled.error?.localizedDescription ?? "no reason given") (transaction \(id)).")
        }
    }
}

/// `storectl finish`: finishes a transaction.
struct FinishCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "finish", abstract: "Finish a transaction of this device's queue.")

    @OptionGroup var client: ClientOptions
    @OptionGroup var wait: WaitOptions
    @Argument(help: "Transaction identifiers.")
    var transactions: [String]

    func run() async throws {
        let queue = try await client.launchedQueue(wait)
        for id in transactions {
            guard let transaction = queue.transactions.first(where: { $0.transactionIdentifier == id }) else {
                await queue.close()
                throw Failure(description: "Transaction \(id) is not an unfinished transaction of account \(client.account) on device \(client.device).")
            }
            let already = try await sentence { try await queue.finish(transaction) }
            print(already ? "\(id) was already finished" : "finished \(id)")
        }
        await queue.close()
    }
}

/// `storectl transactions`: the queue's unfinished transactions.
struct TransactionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "transactions", abstract: "List this device's unfinished transactions.")

    @OptionGroup var client: ClientOptions
    @OptionGroup var wait: WaitOptions

    func run() async throws {
        let queue = try await client.launchedQueue(wait)
        let transactions = queue.transactions
        if transactions.isEmpty { print("no unfinished transactions") }
        for transaction in transactions {
            print("\(transaction.transactionIdentifier)  \(transaction.payment.productIdentifier)  \(transaction.transactionState.rawValue)")
        }
        await queue.close()
    }
}

/// `storectl restore`: restores completed purchases and prints the callbacks.
struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "restore", abstract: "Restore completed purchases into this device's queue.")

    @OptionGroup var client: ClientOptions
    @OptionGroup var wait: WaitOptions
    @Option(help: "Restore only purchases made with this applicationUsername.")
    var applicationUsername: String?
    @Option(
        name: .customLong("download"), parsing: .upToNextOption,
        help: "Products whose hosted content to download again; with it, every other restored transaction is finished at once, and these once their content is in.")
    var download: [String] = []
    @Option(help: "Where downloaded content is put. Default: STOREBUS_DOWNLOAD_DIR or ./storebus-downloads.")
    var directory: String?

    func run() async throws {
        let queue = try await client.queue(downloads: directory)
        let callbacks = queue.callbacks
        let (restoreID, count) = try await sentence { try await queue.restore(applicationUsername: applicationUsername) }
        print("restore \(restoreID): \(count) transaction\(count == 1 ? "" : "s") to restore")
        let failure = Mutex<StoreKitError?>(nil)
        let ended = await follow(callbacks, timeout: wait.duration) { callback in
            switch callback.event {
            case .restoreCompletedTransactionsFinished(let id, _): return id == restoreID
            case .restoreCompletedTransactionsFailed(let id, let error) where id == restoreID:
                failure.withLock { $0 = error }
                return true
            default: return false
            }
        }
        if !ended {
            await queue.close()
            throw Failure(description: "Restore \(restoreID) did not end within \(wait.text).")
        }
        // As with a failed purchase, a script must be able to tell.
        if let error = failure.withLock({ $0 }) {
            await queue.close()
            throw Failure(description: "Restore \(restoreID) failed: \(error).")
        }
        guard !download.isEmpty else { return await queue.close() }
        // The content chosen is downloaded again; every other restored transaction is finished now,
        // and the chosen ones once their content is in (as Apple's restore guidance has it).
        let restored = queue.transactions.filter { $0.transactionState == .restored }
        let chosen = restored.filter { download.contains($0.payment.productIdentifier) && !$0.downloads.isEmpty }
        for transaction in restored where !chosen.contains(where: { $0.id == transaction.id }) {
            try await sentence { _ = try await queue.finish(transaction) }
            print("finished \(transaction.transactionIdentifier) \(transaction.payment.productIdentifier) without downloading")
        }
        for product in download where !chosen.contains(where: { $0.payment.productIdentifier == product }) {
            print("\(product): no restored transaction with hosted content")
        }
        guard !chosen.isEmpty else { return await queue.close() }
        try await transfer(queue, chosen.flatMap(\.downloads), close: false) { try await queue.startDownloads($0) }
        for transaction in chosen {
            try await sentence { _ = try await queue.finish(transaction) }
            print("finished \(transaction.transactionIdentifier) \(transaction.payment.productIdentifier)")
        }
        await queue.close()
    }
}

/// `storectl watch`: the observer stream, live.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "watch", abstract: "Print this device's observer callbacks as they arrive (Ctrl-C stops).")

    @OptionGroup var client: ClientOptions
    @Option(help: "Stop after this many callbacks.")
    var count: Int?

    func run() async throws {
        let queue = try await client.queue()
        // Says on standard error when the stream is interrupted and when it is back: otherwise a
        // watch whose payment queue is down looks like a quiet queue. Checked every quarter second,
        // and before each callback, which may end the watch (--count) before the next check.
        let status = StreamStatus()
        let reporter = Task {
            while !Task.isCancelled {
                status.report { queue.observingError }
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        var seen = 0
        for await callback in queue.callbacks {
            status.report { queue.observingError }
            print(describe(callback))
            fflush(nil)
            seen += 1
            if let count, seen >= count { break }
        }
        reporter.cancel()
        await queue.close()
    }
}

/// What `watch` last said of the observer stream, so that it says each change once.
final class StreamStatus: Sendable {
    private let interrupted = Mutex(false)

    /// Says on standard error that the stream is interrupted (`error()` gives why), or back (nil),
    /// when that is news. The error is read, and the line written, under the lock: a reading taken
    /// before another caller's line must not be written after it.
    func report(_ error: () -> StoreError?) {
        interrupted.withLock { interrupted in
            let line: String
            switch (error(), interrupted) {
            case (let error?, false):
                interrupted = true
                line = "storectl: the observer stream is interrupted (\(error)); retrying"
            case (nil, true):
                interrupted = false
                line = "storectl: the observer stream is back"
            default:
                return
            }
            FileHandle.standardError.write(Data((line + "\n").utf8))
        }
    }
}

/// `storectl demo`: one complete purchase flow, printing each callback.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run a complete purchase flow, check the receipt, and download a product's hosted content, printing each callback as it arrives."
    )

    @OptionGroup var client: ClientOptions
    @OptionGroup var wait: WaitOptions
    @Option(help: "The product to buy.")
    var product: String = "com.storebus.demo.puzzle.coins100"
    @Option(help: "A product with hosted content to buy and download (bought again without a second charge when owned); empty for none.")
    var downloadProduct: String = "com.storebus.demo.puzzle.levelpack1"
    @Option(help: "Where the downloaded content is put. Default: STOREBUS_DOWNLOAD_DIR or ./storebus-downloads.")
    var directory: String?

    func run() async throws {
        let queue = try await client.queue(downloads: directory)
        let callbacks = queue.callbacks
        print("1. products")
        let response = try await sentence { try await ProductsRequest(productIdentifiers: [product], connection: queue.connection).start() }
        guard let item = response.products.first else {
            await queue.close()
            throw Failure(description: "\(product) is not for sale in \(response.storefront).")
        }
        print("   \(item.productIdentifier): \(item.localizedTitle), \(item.formattedPrice)")
        print("2. can make payments: \(try await sentence { try await queue.canMakePayments() })")
        print("3. add payment")
        let transaction = try await sentence { try await queue.addPayment(Payment(product: item)) }
        let id = transaction.transactionIdentifier
        guard await settles(id, callbacks, within: wait.duration) else {
            await queue.close()
            throw Failure(description: "Transaction \(id) did not settle within \(wait.text).")
        }
        guard let settled = queue.transactions.first(where: { $0.transactionIdentifier == id }) else {
            await queue.close()
            throw Failure(description: "Transaction \(id) left the queue unexpectedly.")
        }
        if settled.transactionState == .deferred {
            print("4. \(id) is deferred (Ask to Buy): approve it with `storectl admin approve \(id)`, then finish it")
            await queue.close()
            return
        }
        if settled.transactionState == .failed {
            // Nothing was paid for, so nothing is delivered; a failed transaction is finished all the same.
            print("4. the purchase failed (\(settled.error?.localizedDescription ?? "no reason given")): nothing to deliver; finish \(id)")
        } else {
            print("4. deliver \(item.localizedTitle), then finish \(id) (\(settled.transactionState.rawValue))")
        }
        try await sentence { try await queue.finish(settled) }
        _ = await isRemoved(id, callbacks, within: wait.duration)
        if settled.transactionState == .failed {
            await queue.close()
            throw Failure(description: "The purchase failed, so the demo ends here (the account's payment policy may be set to fail: `storectl admin policy`).")
        }
        print("5. the app receipt, refreshed and verified by the store")
        let receipt = try await sentence { try await ReceiptRefreshRequest(connection: queue.connection).start() }
        let verified = try await sentence {
            try await queue.connection.call(Storebus_Receipt_V1_Receipt.verifyReceipt, .with { $0.receiptData = receipt.base64EncodedString() })
        }
        guard verified.status == 0 else {
            await queue.close()
            throw Failure(description: "The receipt did not verify: status \(verified.status).")
        }
        print("   status 0 (\(verified.environment)), \(verified.receipt.inApp.count) in-app purchase\(verified.receipt.inApp.count == 1 ? "" : "s") in it")
        if !downloadProduct.isEmpty {
            try await download(queue, callbacks)
        }
        await queue.close()
        print("done")
    }

    /// Step 6: buys `downloadProduct`, downloads its content, then finishes it.
    private func download(_ queue: PaymentQueue, _ callbacks: PaymentQueueCallbacks) async throws {
        print("6. buy \(downloadProduct) and download its hosted content")
        let added = try await sentence { try await queue.addPayment(Payment(productIdentifier: downloadProduct)) }
        guard await settles(added.transactionIdentifier, callbacks, within: wait.duration),
            let bought = queue.transactions.first(where: { $0.transactionIdentifier == added.transactionIdentifier }),
            bought.transactionState == .purchased, !bought.downloads.isEmpty
        else {
            await queue.close()
            throw Failure(description: "\(downloadProduct) was not purchased with hosted content to download.")
        }
        // The downloads go where the queue's configuration says: the demo's own folder.
        try await transfer(queue, bought.downloads, close: false) { try await queue.startDownloads($0) }
        try await sentence { _ = try await queue.finish(bought) }
        _ = await isRemoved(bought.transactionIdentifier, callbacks, within: wait.duration)
    }
}

/// Prints callbacks until transaction `id` has left PURCHASING (`within` at most); whether it did.
func settles(_ id: String, _ callbacks: PaymentQueueCallbacks, within wait: Duration) async -> Bool {
    await follow(callbacks, timeout: wait) { callback in
        guard case .updatedTransactions(let transactions, _) = callback.event else { return false }
        return transactions.contains { $0.transactionIdentifier == id && $0.transactionState != .purchasing }
    }
}

/// Prints callbacks until transaction `id` is reported removed (`within` at most); whether it was.
func isRemoved(_ id: String, _ callbacks: PaymentQueueCallbacks, within wait: Duration) async -> Bool {
    await follow(callbacks, timeout: wait) { callback in
        if case .removedTransactions(let transactions) = callback.event { return transactions.contains { $0.transactionIdentifier == id } }
        return false
    }
}

extension PaymentQueueCallback.Event {
    var isReplayEnd: Bool {
        if case .replayCompleted = self { return true }
        return false
    }
}
