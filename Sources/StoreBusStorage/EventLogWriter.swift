import GRDB
import StoreBus

/// Writes state changes together with their events, then rings the doorbell.
///
/// `write` runs the body in one database transaction; the body appends events through the batch it is
/// given. Only after the commit are the events announced on the PUB socket. A crash between the two
/// loses the announcement, never the event: followers read the log itself and find it on their next
/// read (the test suite kills a process exactly there, through the `eventlog.after-commit` fail point).
public final class EventLogWriter: Sendable {
    /// The log's name in doorbells, for example `payment-queue`.
    public let logName: String
    /// The database.
    public let database: StoreDatabase
    private let publisher: DoorbellPublisher?
    private let failPoints: FailPoints

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

    /// Runs `body` in a write transaction, commits, then announces the events it appended.
    public func write<T: Sendable>(_ body: @escaping @Sendable (Database, inout Batch) throws -> T) async throws -> T {
        let (result, events) = try await database.pool.write { db -> (T, [StoredEvent]) in
            var batch = Batch(db: db)
            let result = try body(db, &batch)
            return (result, batch.events)
        }
        failPoints.hit("eventlog.after-commit")
        publisher?.ring(events.map { Doorbell(log: logName, key: $0.key, seq: $0.seq, keySeq: $0.keySeq) })
        return result
    }
}

import SwiftProtobuf
