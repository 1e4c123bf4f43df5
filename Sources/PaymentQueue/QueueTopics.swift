import StoreBusServer
import StoreBusStorage
import StoreSchema

/// Which of the log's topics (``QueueTopic``) each QueueEvent is filed under, so that the receipt,
/// notification and download services read only the events they act on: a purchase flow's three
/// events (purchasing, purchased, finished) are two for the receipt service, one for the
/// notification service, and none for the download service unless the product has hosted content.
enum QueueTopics {
    /// The topics of `event`.
    static func of(_ event: Storebus_PaymentQueue_V1_QueueEvent) -> EventTopics {
        switch event.event {
        case .updatedTransactions(let updated): of(updated.transactions, removed: false)
        case .removedTransactions(let removed): of(removed.transactions, removed: true)
        case .refundedTransactions: QueueTopic.refunded.bit
        case .historyCleared: QueueTopic.cleared.bit
        case .subscriptionChanged: QueueTopic.subscriptions.bit
        case .updatedDownloads: QueueTopic.downloads.bit
        case .restoreCompletedTransactionsFinished, .restoreCompletedTransactionsFailed, .revokedEntitlements: []
        case nil: .all
        }
    }

    /// The topics of an updatedTransactions event (or, `removed`, a removedTransactions one) with
    /// `transactions`.
    static func of(_ transactions: [Storebus_PaymentQueue_V1_PaymentTransaction], removed: Bool) -> EventTopics {
        if removed {
            return transactions.contains { !$0.downloads.isEmpty } ? [QueueTopic.finished.bit, QueueTopic.downloads.bit] : QueueTopic.finished.bit
        }
        return transactions.contains { $0.transactionState == .purchased || $0.transactionState == .restored } ? QueueTopic.completed.bit : []
    }
}

extension EventLogWriter.Batch {
    /// Appends `event` for the queue `key`, filed under its topics.
    @discardableResult
    mutating func appendQueueEvent(key: String, _ event: Storebus_PaymentQueue_V1_QueueEvent) throws -> StoredEvent {
        try append(key: key, event, topics: QueueTopics.of(event))
    }
}
