import GRDB
import StoreBus
import Synchronization

/// Writes state changes together with their events, then rings the doorbell.
///
/// `write` runs the body in a database transaction; the body appends events through the batch it is
/// given. Only after the commit are the events announced on the PUB socket. A crash between the two
/// loses the announcement, never the event: followers read the log itself and find it on their next
/// read (the test suite kills a process exactly there, through the `eventlog.after-commit` fail point).
///
/// Writes that arrive while another commit is under way are committed together (group commit): one
/// transaction, one fsync, each body in a savepoint of its own, in arrival order. A body that throws
/// rolls back its own savepoint only, and its caller gets the error; the others commit. Each body
/// sees the effects of the bodies before it, exactly as if they had run one after the other.
public final class EventLogWriter: Sendable {
    /// The log's name in doorbells, for example `payment-queue`.
    public let logName: String
    /// The database.
    public let database: StoreDatabase
    private let publisher: DoorbellPublisher?
    private let failPoints: FailPoints
    private let queue = Mutex(Pending())
    /// Most writes committed in one transaction.
    static let maxGroup = 256

    private struct Pending {
        var jobs: [Job] = []
        var committing = false
    }

    /// One caller's write: `run` applies it inside the group's transaction and returns its events (nil
    /// when the body threw and its savepoint was rolled back); `complete` answers the caller once the
    /// group has committed (nil) or failed to (the error).
    private struct Job: Sendable {
        let run: @Sendable (Database) -> [StoredEvent]?
        let complete: @Sendable ((any Error)?) -> Void
    }

    /// A writer for `database` announcing on `publisher` (nil: no announcements, followers poll).
    public init(logName: String, database: StoreDatabase, publisher: DoorbellPublisher?, failPoints: FailPoints = FailPoints()) {
        self.logName = logName
        self.database = database
        self.publisher = publisher
        self.failPoints = failPoints
    }

    /// The events appended by one write.
    public struct Batch {
        let db: Database
        fileprivate(set) var events: [StoredEvent] = []

        /// Appends an event for `key` to the log, in the current transaction.
        @discardableResult
        public mutating func append<Payload: SwiftProtobuf.Message>(key: String, _ payload: Payload) throws -> StoredEvent {
            let event = try EventLog.append(db, key: key, payload: payload)
            events.append(event)
            return event
        }
    }

    /// Runs `body` in a write transaction (shared with concurrent writes), commits, then announces
    /// the events it appended. Returns once the commit is durable.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Database, inout Batch) throws -> T) async throws -> T {
        let outcome = OutcomeBox<T>()
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let job = Job(
                run: { db in
                    var batch = Batch(db: db)
                    do {
                        try db.inSavepoint {
                            outcome.value = .success(try body(db, &batch))
                            return .commit
                        }
                        return batch.events
                    } catch {
                        outcome.value = .failure(error)
                        return nil
                    }
                },
                complete: { error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }
            )
            let startCommitting = queue.withLock { pending -> Bool in
                pending.jobs.append(job)
                guard !pending.committing else { return false }
                pending.committing = true
                return true
            }
            if startCommitting {
                Task { await self.commitPending() }
            }
        }
        return try outcome.take()
    }

    /// Commits groups of pending writes until none is left.
    private func commitPending() async {
        while true {
            let jobs = queue.withLock { pending -> [Job] in
                let group = Array(pending.jobs.prefix(Self.maxGroup))
                pending.jobs.removeFirst(group.count)
                if group.isEmpty { pending.committing = false }
                return group
            }
            if jobs.isEmpty { return }
            do {
                let events = try await database.pool.write { db -> [StoredEvent] in
                    var events: [StoredEvent] = []
                    for job in jobs { events += job.run(db) ?? [] }
                    return events
                }
                for _ in jobs { failPoints.hit("eventlog.after-commit") }
                publisher?.ring(events.map { Doorbell(log: logName, key: $0.key, seq: $0.seq, keySeq: $0.keySeq) })
                for job in jobs { job.complete(nil) }
            } catch {
                for job in jobs { job.complete(error) }
            }
        }
    }
}

/// A write's result, set inside the transaction and read by its caller after the commit.
private final class OutcomeBox<T: Sendable>: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `value` is written once, by the committing task while it runs
    // the write's body, and read once, by the caller after the commit has resumed it; the
    // continuation's resume orders the two.
    var value: Result<T, any Error>?

    func take() throws -> T {
        guard let value else { throw CancellationError() }
        return try value.get()
    }
}

import SwiftProtobuf
