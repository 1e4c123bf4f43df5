import Foundation
import GRDB
import Metrics
import StoreBus
import StoreBusServer
import SwiftProtobuf

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
    public let database: any SQLDatabase
    /// The shard of each key.
    public let shardOf: @Sendable (String) -> UInt32
    private let committer: any GroupCommitter
    /// Most writes committed in one transaction.
    static let maxGroup = 256
    /// Each write's savepoint (see ``write(_:)``).
    static let savepoint: CachedSQL = "SAVEPOINT storebus_write"
    static let releaseSavepoint: CachedSQL = "RELEASE SAVEPOINT storebus_write"
    static let rollbackToSavepoint: CachedSQL = "ROLLBACK TO SAVEPOINT storebus_write"

    /// A writer for `database` announcing on `publisher` (nil: no announcements, followers poll).
    ///
    /// With a `reactor`, writes commit on its loop, between its turns (see ``LoopCommitter``): for a
    /// service whose requests arrive there, and whose publisher lives there too. The reactor must be
    /// running for writes to commit; once it stops, pending and later writes are cancelled. Without
    /// one, the writer starts a thread of its own, the committer, which ends when the writer is
    /// released.
    ///
    /// `shardOf` tells the shard of each key (a sharded log's; every key is in shard 0 otherwise).
    public init(
        logName: String, database: any SQLDatabase, publisher: DoorbellPublisher?, failPoints: FailPoints = FailPoints(), reactor: Reactor? = nil,
        shardOf: @escaping @Sendable (String) -> UInt32 = { _ in 0 }
    ) {
        self.logName = logName
        self.database = database
        self.shardOf = shardOf
        let group = GroupCommit(logName: logName, database: database, publisher: publisher, failPoints: failPoints, reactor: reactor, shardOf: shardOf)
        if let reactor {
            committer = LoopCommitter(group: group, reactor: reactor)
        } else {
            let thread = Committer(group: group)
            thread.start()
            committer = thread
        }
    }

    deinit {
        committer.stop()
    }

    /// The events appended by one write.
    public struct Batch {
        let db: any SQLConnection
        /// The log's positions as the writer knows them.
        let positions: any LogPositions
        /// The shard of each key.
        let shardOf: @Sendable (String) -> UInt32
        fileprivate(set) var events: [StoredEvent] = []

        /// The shard of `key`'s events.
        public func shard(ofKey key: String) -> UInt32 { shardOf(key) }

        /// Throws NOT_OWNER unless this instance owns `key`'s shard (see ``LogPositions/check(shard:)``):
        /// a write calls it before it changes anything for that key.
        public func requireOwner(key: String) throws {
            try positions.check(shard: shardOf(key))
        }

        /// ``requireOwner(key:)`` for a shard.
        public func requireOwner(shard: UInt32) throws {
            try positions.check(shard: shard)
        }

        /// Appends an event for `key` to the log, in the current transaction, filed under `topics`.
        @discardableResult
        public mutating func append<Payload: SwiftProtobuf.Message>(key: String, _ payload: Payload, topics: EventTopics = .all) throws -> StoredEvent {
            let event = try EventLog.append(db, key: key, shard: shardOf(key), payload: payload, topics: topics, positions: positions)
            events.append(event)
            return event
        }

        /// Appends an event for `key` whose payload, a `type` (its full message name), is already
        /// proto3 JSON.
        @discardableResult
        public mutating func appendJSON(key: String, type: String, payloadJSON: String, topics: EventTopics = .all) throws -> StoredEvent {
            try appendJSON(key: key, type: type, topics: topics) { $0 += payloadJSON.utf8 }
        }

        /// Appends an event for `key` whose payload, a `type` (its full message name), `writePayload`
        /// appends to the event's JSON as proto3 JSON (the event's record is put together in one buffer).
        @discardableResult
        public mutating func appendJSON(
            key: String, type: String, topics: EventTopics = .all, payload writePayload: (inout [UInt8]) throws -> Void
        ) throws -> StoredEvent {
            let event = try EventLog.appendJSON(db, key: key, shard: shardOf(key), type: type, topics: topics, positions: positions, payload: writePayload)
            events.append(event)
            return event
        }
    }

    /// Runs `body` in a write transaction (shared with concurrent writes), commits, then announces
    /// the events it appended. Returns once the commit is durable (with the database's sync thread,
    /// announcements and answers wait for its sync; see ``StoreDatabase``).
    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection, inout Batch) throws -> T) async throws -> T {
        let outcome = OutcomeBox<T>()
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Void, any Error>) in
            committer.submit(
                CommitJob(
                    run: { db, positions, shardOf in
                        var batch = Batch(db: db, positions: positions, shardOf: shardOf)
                        // The savepoint's statements are prepared once (GRDB's inSavepoint prepares them on
                        // every call: 5% of the commit thread) and run directly (see DirectStatements):
                        // GRDB's path follows each savepoint for transaction observers, which the writer's
                        // connection has none of, at about 4K instructions a statement, four per purchase.
                        try db.execute(cached: Self.savepoint)
                        do {
                            outcome.value = .success(try body(db, &batch))
                            try db.execute(cached: Self.releaseSavepoint)
                            return batch.events
                        } catch {
                            outcome.value = .failure(error)
                            // Events it appended are undone with it: their positions are free again.
                            positions.forget()
                            // This write only is undone. If it cannot be, the whole group is rolled back
                            // (the throw ends the transaction) rather than committing half a write.
                            try db.execute(cached: Self.rollbackToSavepoint)
                            try db.execute(cached: Self.releaseSavepoint)
                            return nil
                        }
                    },
                    complete: { error in
                        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                    }
                ))
        }
        return try outcome.take()
    }
}

/// The thread that commits: it takes every pending write, runs them in one transaction on its own
/// thread (GRDB's synchronous write runs there too, with no hop to another queue), announces the
/// events, answers the callers, and sleeps when nothing is pending.
private final class Committer: GroupCommitter, @unchecked Sendable {
    // Invariant for @unchecked Sendable: `jobs` and `stopped` are read and written only with
    // `condition` locked; `group` is immutable.
    let group: GroupCommit
    private let condition = NSCondition()
    private var jobs: [CommitJob] = []
    private var stopped = false

    init(group: GroupCommit) {
        self.group = group
    }

    func start() {
        let thread = Thread { [self] in
            nameCurrentThread("storebus-commit")
            run()
        }
        thread.name = "storebus-commit"
        thread.start()
    }

    func submit(_ job: CommitJob) {
        condition.lock()
        if stopped {
            condition.unlock()
            return job.complete(CancellationError())
        }
        let wasEmpty = jobs.isEmpty
        jobs.append(job)
        condition.unlock()
        if wasEmpty { condition.signal() }
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.unlock()
        condition.signal()
    }

    /// Commits groups of pending writes until stopped; writes still pending then are cancelled.
    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            let finished = stopped
            let group = finished ? jobs : Array(jobs.prefix(EventLogWriter.maxGroup))
            jobs.removeFirst(group.count)
            condition.unlock()
            if finished {
                for job in group { job.complete(CancellationError()) }
                return
            }
            self.group.commit(group)
        }
    }
}

/// One write waiting for its group's commit.
private struct CommitJob: Sendable {
    /// Applies the write inside the group's transaction and returns its events (nil when the body
    /// threw and its savepoint was rolled back). Throws when the savepoint could not be opened or
    /// rolled back: the group's transaction must then be rolled back as a whole.
    let run: @Sendable (any SQLConnection, any LogPositions, @escaping @Sendable (String) -> UInt32) throws -> [StoredEvent]?
    /// Answers the caller once the group has committed (nil) or failed to (the error).
    let complete: @Sendable ((any Error)?) -> Void
}

/// What commits writes in groups: a thread of its own, or a reactor's loop.
private protocol GroupCommitter: Sendable {
    func submit(_ job: CommitJob)
    func stop()
}

/// Commits a group of writes in one transaction, announces their events, answers their callers.
private struct GroupCommit: Sendable {
    let logName: String
    let database: any SQLDatabase
    let publisher: DoorbellPublisher?
    let failPoints: FailPoints
    /// The loop the writes commit on, if they do: their announcements and answers go out there.
    let reactor: Reactor?
    /// The log's positions, kept between appends (see ``EventPositions``).
    let positions: any LogPositions
    let shardOf: @Sendable (String) -> UInt32
    /// `storebus_group_commit_writes`, `storebus_group_commit_seconds` (from the group's start to its
    /// commit made durable) and `storebus_event_log_head`, labelled with the log's name.
    let groupSizes: Recorder
    let commitTimes: Metrics.Timer
    let head: Gauge

    init(logName: String, database: any SQLDatabase, publisher: DoorbellPublisher?, failPoints: FailPoints, reactor: Reactor?, shardOf: @escaping @Sendable (String) -> UInt32) {
        self.logName = logName
        self.positions = database.logPositions(logName: logName)
        self.shardOf = shardOf
        self.database = database
        self.publisher = publisher
        self.failPoints = failPoints
        self.reactor = reactor
        groupSizes = Recorder(label: "storebus_group_commit_writes", dimensions: [("log", logName)])
        commitTimes = Metrics.Timer(label: "storebus_group_commit_seconds", dimensions: [("log", logName)])
        head = Gauge(label: "storebus_event_log_head", dimensions: [("log", logName)])
    }

    func commit(_ group: [CommitJob]) {
        // Between two transactions: the moment for the engine's housekeeping (SQLite's checkpoint).
        database.betweenGroups()
        let started = ContinuousClock.now
        groupSizes.record(group.count)
        let syncer = database.syncer
        let mark = syncer?.begin()
        let events: [StoredEvent]
        do {
            events = try database.inGroupTransaction { db -> [StoredEvent] in
                var events: [StoredEvent] = []
                for job in group { events += try job.run(db, positions, shardOf) ?? [] }
                return events
            }
        } catch {
            // Every append of the group is undone.
            positions.forget()
            // Rolled back: nothing of it to make durable, but its callers hear of it after those of
            // the groups before it, as they would have without a sync thread.
            guard let syncer, let mark else { return fail(group, error) }
            return syncer.end(mark, lastSeq: nil) { [self] in onLoop { fail(group, error) } }
        }
        guard let syncer, let mark else { return announce(group, events, started: started) }
        // The loop goes on to the next group while the sync thread makes this one durable; then the
        // announcements and answers go out on the loop, in commit order.
        syncer.end(mark, lastSeq: events.last?.seq) { [self] in onLoop { announce(group, events, started: started) } }
    }

    /// Runs `work` on the writes' loop, if they have one that still runs; here otherwise (the sync
    /// thread, or the committer's own).
    private func onLoop(_ work: @escaping @Sendable () -> Void) {
        if let reactor, reactor.execute(work) { return }
        work()
    }

    private func fail(_ group: [CommitJob], _ error: any Error) {
        for job in group { job.complete(error) }
    }

    /// Once the group's commit is durable: rings its doorbells and answers its writers.
    private func announce(_ group: [CommitJob], _ events: [StoredEvent], started: ContinuousClock.Instant) {
        commitTimes.record(since: started)
        if let last = events.last { head.record(last.seq) }
        for _ in group { failPoints.hit("eventlog.after-commit") }
        publisher?.ring(
            events.map { event in
                let json = event.json.utf8
                return Doorbell(
                    log: logName, key: event.key, seq: event.seq, keySeq: event.keySeq, shard: event.shard, topics: event.topics == .all ? nil : event.topics,
                    event: json.count <= Doorbell.maxEventBytes ? Array(json) : nil)
            })
        for job in group { job.complete(nil) }
    }
}

/// Commits on a reactor's loop, as its idle work (``Reactor/whenIdle(hasWork:run:)``): once the loop
/// has handled the messages of a turn, the writes they asked for commit together, and their callers,
/// tasks of that loop, resume on it. No thread stands between a request, its commit and its answer:
/// in the payment queue's flow benchmark that took about 2 of its 3 context switches a write away and
/// a third off the paced median latency. Messages that arrive during a commit wait for it, and make
/// the next group.
private final class LoopCommitter: GroupCommitter, @unchecked Sendable {
    // Invariant for @unchecked Sendable: `pending` and `stopped` are touched only on the reactor's
    // loop thread; `group` and `reactor` are immutable.
    let group: GroupCommit
    let reactor: Reactor
    private var pending: [CommitJob] = []
    private var stopped = false

    /// Registers with `reactor` (from a job, so on its loop, before any write can reach it there).
    init(group: GroupCommit, reactor: Reactor) {
        self.group = group
        self.reactor = reactor
        // Weak: the reactor keeps its idle work and stop actions as long as it runs, and may outlive
        // the writer.
        reactor.execute { [weak self] in
            reactor.whenIdle(hasWork: { self.map { !$0.pending.isEmpty } ?? false }, run: { self?.commitPending() })
            reactor.onStop { self?.cancelPending() }
        }
    }

    func submit(_ job: CommitJob) {
        if reactor.isInLoop { return enqueue(job) }
        // The reactor has finished: nothing will commit this write.
        if !reactor.execute({ [self] in enqueue(job) }) { job.complete(CancellationError()) }
    }

    /// Stops committing: writes pending now, and any submitted later, are cancelled.
    func stop() {
        reactor.execute { [self] in cancelPending() }
    }

    private func enqueue(_ job: CommitJob) {
        if stopped { return job.complete(CancellationError()) }
        pending.append(job)
    }

    private func commitPending() {
        let batch = Array(pending.prefix(EventLogWriter.maxGroup))
        pending.removeFirst(batch.count)
        group.commit(batch)
    }

    private func cancelPending() {
        stopped = true
        let cancelled = pending
        pending.removeAll()
        for job in cancelled { job.complete(CancellationError()) }
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
