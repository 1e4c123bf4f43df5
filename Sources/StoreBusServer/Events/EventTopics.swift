/// The topics an event of a log is filed under, a bit each: bit `i` is the log's `i`-th topic name
/// (the payment queue's: ``QueueTopic``). A follower that needs a few kinds of event asks ReadEvents
/// for their topics and reads those, not the whole log. The bits are stored with each event, so a
/// log's topic names only ever grow at the end; a new one is added with a migration that files the
/// events already stored.
public struct EventTopics: OptionSet, Sendable, Hashable {
    public let rawValue: Int64

    public init(rawValue: Int64) {
        self.rawValue = rawValue
    }

    /// Every topic: an event its writer does not sort, or one written before its log had topics.
    public static let all = EventTopics(rawValue: -1)

    /// The topics named `names` among a log's `topics`, or the first name that is not one of them.
    public static func named(_ names: [String], in topics: [String]) -> Result<EventTopics, UnknownTopic> {
        var set: EventTopics = []
        for name in names {
            guard let index = topics.firstIndex(of: name), index < 63 else { return .failure(UnknownTopic(name: name)) }
            set.insert(EventTopics(rawValue: 1 << Int64(index)))
        }
        return .success(set)
    }

    /// A topic name a log does not have.
    public struct UnknownTopic: Error, Sendable {
        public let name: String
    }
}

/// The payment queue log's topics, in the order of their bits. A follower names the ones it needs
/// (the receipt service: completed, refunded, finished, cleared and subscriptions; the notification
/// service: completed, refunded and subscriptions; the download service: downloads). The gateway,
/// which hands devices every event of their queue, names none.
public enum QueueTopic: String, CaseIterable, Sendable {
    /// updatedTransactions holding a purchased or restored transaction.
    case completed
    /// refundedTransactions.
    case refunded
    /// removedTransactions: transactions finished.
    case finished
    /// historyCleared.
    case cleared
    /// subscriptionChanged.
    case subscriptions
    /// updatedDownloads, and removedTransactions of a transaction with hosted content.
    case downloads

    /// This topic's bit.
    public var bit: EventTopics {
        EventTopics(rawValue: 1 << Int64(Self.allCases.firstIndex(of: self)!))
    }

    /// The names, in the order of their bits (what the payment queue's EventLog handlers accept).
    public static let names = allCases.map(\.rawValue)
}
