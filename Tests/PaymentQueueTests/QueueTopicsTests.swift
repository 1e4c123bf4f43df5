import StoreBusServer
import StoreSchema
import Testing

@testable import PaymentQueue

/// Which topics of the payment queue's log each kind of QueueEvent is filed under, as a table: the
/// receipt, notification and download services read only those topics, so an event filed under too
/// few would never reach them.
@Suite("Payment queue log topics")
struct QueueTopicsTests {
    typealias Event = Storebus_PaymentQueue_V1_QueueEvent
    typealias Transaction = Storebus_PaymentQueue_V1_PaymentTransaction

    static func transaction(_ state: Storebus_PaymentQueue_V1_TransactionState, content: Bool = false) -> Transaction {
        .with {
            $0.transactionState = state
            if content { $0.downloads = [.with { $0.contentIdentifier = "levels" }] }
        }
    }

    static let rows: [(String, Event, [QueueTopic])] = [
        ("purchasing", .with { $0.updatedTransactions.transactions = [transaction(.purchasing)] }, []),
        ("deferred", .with { $0.updatedTransactions.transactions = [transaction(.deferred)] }, []),
        ("failed", .with { $0.updatedTransactions.transactions = [transaction(.failed)] }, []),
        ("purchased", .with { $0.updatedTransactions.transactions = [transaction(.purchased)] }, [.completed]),
        ("restored", .with { $0.updatedTransactions.transactions = [transaction(.restored)] }, [.completed]),
        ("failed and restored", .with { $0.updatedTransactions.transactions = [transaction(.failed), transaction(.restored)] }, [.completed]),
        ("finished", .with { $0.removedTransactions.transactions = [transaction(.purchased)] }, [.finished]),
        ("finished with content", .with { $0.removedTransactions.transactions = [transaction(.purchased), transaction(.purchased, content: true)] }, [.finished, .downloads]),
        ("refunded", .with { $0.refundedTransactions.transactions = [transaction(.purchased)] }, [.refunded]),
        ("history cleared", .with { $0.historyCleared.accountID = "a" }, [.cleared]),
        ("subscription changed", .with { $0.subscriptionChanged.subscription.autoRenewStatus = true }, [.subscriptions]),
        ("downloads", .with { $0.updatedDownloads.downloads = [.with { $0.contentIdentifier = "levels" }] }, [.downloads]),
        ("restore finished", .with { $0.restoreCompletedTransactionsFinished = .init() }, []),
        ("restore failed", .with { $0.restoreCompletedTransactionsFailed = .init() }, []),
        ("entitlements revoked", .with { $0.revokedEntitlements.productIdentifiers = ["p"] }, [])
    ]

    @Test("each kind of event, under exactly its topics", arguments: rows)
    func table(_ name: String, _ event: Event, _ expected: [QueueTopic]) {
        let expectedSet = expected.reduce(into: EventTopics()) { $0.insert($1.bit) }
        #expect(QueueTopics.of(event) == expectedSet, "\(name)")
        // The updated and removed transactions are written as JSON directly: the same topics
        switch event.event {
        case .updatedTransactions(let updated): #expect(QueueTopics.of(updated.transactions, removed: false) == expectedSet, "\(name)")
        case .removedTransactions(let removed): #expect(QueueTopics.of(removed.transactions, removed: true) == expectedSet, "\(name)")
        default: break
        }
    }

    @Test("an event with nothing set is in every topic; the names are in the order of their bits")
    func unknownAndNames() {
        #expect(QueueTopics.of(Event()) == .all)
        #expect(QueueTopic.names == ["completed", "refunded", "finished", "cleared", "subscriptions", "downloads"])
        #expect(QueueTopic.allCases.map(\.bit.rawValue) == [1, 2, 4, 8, 16, 32])
    }
}
