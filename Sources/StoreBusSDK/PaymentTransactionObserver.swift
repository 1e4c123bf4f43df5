/// Receives the payment queue's callbacks (SKPaymentTransactionObserver).
///
/// Register one observer when your app starts: unfinished transactions come back on every launch,
/// and any transaction may change state at any time (an Ask to Buy approved hours later, a purchase
/// made on another device restored). Callbacks arrive one at a time, in the queue's order, mostly on
/// the queue's observing task; the SDK's own callbacks (a payment or restore the store refused or
/// could not be reached for) come from the task that made the call, or from a new one when they
/// waited for a listener. Keep them short and hand long work elsewhere.
public protocol PaymentTransactionObserver: AnyObject, Sendable {
    /// Transactions were added to the queue or changed state. Deliver purchased and restored
    /// content, then call ``PaymentQueue/finishTransaction(_:)``; finish failed ones too.
    func paymentQueue(_ queue: PaymentQueue, updatedTransactions transactions: [PaymentTransaction])
    /// Transactions were finished and left the queue.
    func paymentQueue(_ queue: PaymentQueue, removedTransactions transactions: [PaymentTransaction])
    /// A restore delivered all its transactions.
    func paymentQueueRestoreCompletedTransactionsFinished(_ queue: PaymentQueue)
    /// A restore failed; `error` is a ``StoreKitError``.
    func paymentQueue(_ queue: PaymentQueue, restoreCompletedTransactionsFailedWithError error: any Error)
    /// Downloads changed state or progressed.
    func paymentQueue(_ queue: PaymentQueue, updatedDownloads downloads: [Download])
    /// The account no longer owns these products (a refund, a cleared purchase history).
    func paymentQueue(_ queue: PaymentQueue, didRevokeEntitlementsForProductIdentifiers productIdentifiers: [String])
}

/// Every callback but `updatedTransactions` is optional, as in StoreKit: these do nothing.
extension PaymentTransactionObserver {
    /// Does nothing.
    public func paymentQueue(_ queue: PaymentQueue, removedTransactions transactions: [PaymentTransaction]) {}
    /// Does nothing.
    public func paymentQueueRestoreCompletedTransactionsFinished(_ queue: PaymentQueue) {}
    /// Does nothing.
    public func paymentQueue(_ queue: PaymentQueue, restoreCompletedTransactionsFailedWithError error: any Error) {}
    /// Does nothing.
    public func paymentQueue(_ queue: PaymentQueue, updatedDownloads downloads: [Download]) {}
    /// Does nothing.
    public func paymentQueue(_ queue: PaymentQueue, didRevokeEntitlementsForProductIdentifiers productIdentifiers: [String]) {}
}

/// One callback of the observer stream, for `for await` loops over ``PaymentQueue/callbacks``.
public struct PaymentQueueCallback: Sendable, Equatable {
    /// The queue position of the callback: consecutive within a queue. The launch replay's callbacks
    /// carry the position the replay reflects. The SDK's own callbacks are not queue events and carry
    /// 0: a payment or restore the store refused or could not be reached for, and the removal of
    /// such a payment's local transaction.
    public var seq: UInt64
    /// The callback.
    public var event: Event

    /// The observer callbacks.
    public enum Event: Sendable, Equatable {
        /// ``PaymentTransactionObserver/paymentQueue(_:updatedTransactions:)``; `replayed` marks the
        /// unfinished transactions re-sent when observing starts (an app launch).
        case updatedTransactions([PaymentTransaction], replayed: Bool)
        /// ``PaymentTransactionObserver/paymentQueue(_:removedTransactions:)``.
        case removedTransactions([PaymentTransaction])
        /// ``PaymentTransactionObserver/paymentQueueRestoreCompletedTransactionsFinished(_:)``.
        case restoreCompletedTransactionsFinished(restoreID: String, restoredCount: Int)
        /// ``PaymentTransactionObserver/paymentQueue(_:restoreCompletedTransactionsFailedWithError:)``.
        case restoreCompletedTransactionsFailed(restoreID: String, error: StoreKitError)
        /// ``PaymentTransactionObserver/paymentQueue(_:updatedDownloads:)``.
        case updatedDownloads([Download])
        /// ``PaymentTransactionObserver/paymentQueue(_:didRevokeEntitlementsForProductIdentifiers:)``.
        case didRevokeEntitlements(productIdentifiers: [String])
        /// The launch replay is over: `count` unfinished transactions were re-sent; live callbacks follow.
        case replayCompleted(count: Int)
        /// A callback kind newer than this SDK; skipped, but its position counts.
        case unknown
    }
}
