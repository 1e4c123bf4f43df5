import Logging
import ServiceLifecycle
import StoreBus
import StoreBusServer

/// Follows another service's event log into a ``LogReducer``, a page at a time, until the process
/// stops: each page's effects and its position committed together (``FollowedLog``), from the position
/// the follower's database holds. A log that ends before that position (its database was replaced) is
/// forgotten and applied again from its start. A reducer's effects are derived state: each page is
/// committed without waiting for the disk (``FollowedLog/apply(after:through:derived:_:)``), as a power
/// loss that takes pages back takes their position back too, and they are applied again. `applied` (when given) hears every position reached,
/// for calls that wait to read their own writes.
///
/// A sharded log (the payment queue's on PostgreSQL) is followed shard by shard, each shard a log of
/// its own with its own position (``FollowedLog/shard(_:)``), all at once; `shards` (when given) hears
/// how many there are, once the log said so.
///
/// With `leases` (several instances of the follower sharing one database), each instance follows
/// only the shards it holds a lease on, and takes the others' over when they lapse. Every page moves
/// the stored position on condition that it is still the one this instance read (so an instance
/// that lost a shard, paused, and woke up applies nothing twice), pages of no interest included,
/// and the positions the other instances reach are read from the database every
/// ``positionPoll`` into `applied`: a call waiting for a shard another instance follows is answered
/// here as well.
public struct LogFollowerService<Reducer: LogReducer>: Service {
    let follower: EventFollower
    let log: FollowedLog
    let reducer: Reducer
    let applied: PositionWaiter<String>?
    let shards: LogShards?
    let leases: (any FollowerLeases)?
    let logger: Logger

    /// How often an instance sharing the log with others reads the positions they reached.
    public static var positionPoll: Duration { .milliseconds(50) }
    /// How often an instance looks whether it gained or lost a shard.
    static var ownershipPoll: Duration { .milliseconds(100) }

    /// A follower of `log` through `follower`, applying with `reducer`; with `leases`, one of several
    /// instances sharing the log's shards.
    public init(
        follower: EventFollower, log: FollowedLog, reducer: Reducer, applied: PositionWaiter<String>? = nil, shards: LogShards? = nil,
        leases: (any FollowerLeases)? = nil, logger: Logger
    ) {
        self.follower = follower
        self.log = log
        self.reducer = reducer
        self.applied = applied
        self.shards = shards
        self.leases = leases
        self.logger = logger
    }

    public func run() async throws {
        let (follower, log, reducer, applied, shards, logger) = (follower, log, reducer, applied, self.shards, logger)
        if let leases {
            try await cancelWhenGracefulShutdown {
                try await Self.share(leases: leases, follower: follower, log: log, reducer: reducer, applied: applied, shards: shards, logger: logger)
            }
        } else {
            try await cancelWhenGracefulShutdown {
                try await follower.followEveryShard(found: { shards?.found($0) }) { shard in
                    try await Self.follow(
                        shard: shard, follower: follower, log: log.shard(shard), reducer: reducer, applied: applied, everyPage: false, logger: logger)
                }
            }
        }
        await follower.shutdown()
    }

    /// Follows one shard (the whole log, when it is not sharded) until cancelled. `everyPage`: a page
    /// of no interest moves the stored position too (the other instances read it).
    static func follow(
        shard: UInt32, follower: EventFollower, log: FollowedLog, reducer: Reducer, applied: PositionWaiter<String>?, everyPage: Bool, logger: Logger
    ) async throws {
        /// The position stored, as this follower last read or moved it.
        var stored: UInt64 = 0
        // Events of no interest heard while caught up: those waiting for the position see it at
        // once. Not when every page moves the stored position (other instances read it there).
        let name = log.name
        let quiet: (@Sendable (UInt64) -> Void)?
        if everyPage {
            quiet = nil
        } else {
            quiet = { through in applied?.advance(name, to: through) }
        }
        // A call waiting for a position ends the follower's batch window, if it has one.
        var gather: (@Sendable (Duration) async -> Bool)?
        if let applied {
            gather = { window in await applied.gather(name, upTo: window) }
        }
        try await follower.followAlways(
            as: Reducer.Page.self,
            shard: shard,
            start: {
                let start = try await log.position()
                stored = start
                applied?.advance(log.name, to: start)
                return start
            },
            quiet: quiet,
            gather: gather,
            { records, through in
                // A page of events in none of the reducer's topics moves the position in memory
                // only (unless others read it): after a restart the log's pages step over them again.
                if !records.isEmpty || everyPage {
                    try await log.apply(after: stored, through: through, derived: true) { db in
                        if !records.isEmpty { try reducer.apply(records, in: db) }
                    }
                    stored = through
                }
                applied?.advance(log.name, to: through)
            },
            replaced: { error in
                logger.warning(
                    "A followed event log was replaced; applying it again from its start",
                    metadata: [
                        "log": "\(log.name)", "error": "\(error.message)"
                    ])
                try await log.forget { db in try reducer.forget(in: db) }
                applied?.reset(log.name)
            })
    }

    /// One of several instances: takes a share of the shards, follows each shard while it holds it,
    /// and reads the positions of the others, until cancelled; then lets go of its leases.
    static func share(
        leases: any FollowerLeases, follower: EventFollower, log: FollowedLog, reducer: Reducer, applied: PositionWaiter<String>?, shards: LogShards?,
        logger: Logger
    ) async throws {
        let count = try await follower.shardCount()
        shards?.found(count)
        try await leases.start(shardCount: count)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await leases.keep() }
            if let applied {
                group.addTask {
                    while !Task.isCancelled {
                        do {
                            for (name, seq) in try await log.positions() { applied.advance(name, to: seq) }
                        } catch {
                            logger.debug("Reading the followed log's positions failed", metadata: ["log": "\(log.name)", "error": "\(error)"])
                        }
                        try? await Task.sleep(for: positionPoll)
                    }
                }
            }
            for shard in 0..<count {
                group.addTask {
                    await followWhileHeld(
                        shard: shard, of: count, leases: leases, follower: follower, log: log.shard(shard), reducer: reducer, applied: applied, logger: logger)
                }
            }
            try await group.waitForAll()
        }
    }

    /// Follows `shard` whenever this instance holds it, until cancelled: a shard lost stops its
    /// follow; a follow that fails (the database lost, the position moved by another instance)
    /// starts again from the stored position.
    static func followWhileHeld(
        shard: UInt32, of count: UInt32, leases: any FollowerLeases, follower: EventFollower, log: FollowedLog, reducer: Reducer,
        applied: PositionWaiter<String>?, logger: Logger
    ) async {
        while !Task.isCancelled {
            guard leases.holds(shard) else {
                try? await Task.sleep(for: ownershipPoll)
                continue
            }
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    do {
                        try await reducer.holding(shard: shard, of: count)
                        try await follow(shard: shard, follower: follower, log: log, reducer: reducer, applied: applied, everyPage: true, logger: logger)
                    } catch  where !Task.isCancelled {
                        logger.warning("Following a shard failed; starting again from its stored position", metadata: ["log": "\(log.name)", "error": "\(error)"])
                        try? await Task.sleep(for: ownershipPoll)
                    } catch {}
                }
                group.addTask {
                    while leases.holds(shard), !Task.isCancelled { try? await Task.sleep(for: ownershipPoll) }
                }
                await group.next()
                group.cancelAll()
            }
            reducer.released(shard: shard, of: count)
        }
    }
}

/// Leases on a followed log's shards, shared with the other instances of the follower (see
/// ``LogFollowerService``): PostgreSQL's `FollowerShardLeases`.
public protocol FollowerLeases: Sendable {
    /// Starts sharing `shardCount` shards; returns once this instance took its first share.
    func start(shardCount: UInt32) async throws
    /// Keeps the leases (renews, takes lapsed ones, lets go of extra ones) until cancelled; then
    /// lets go of them at once.
    func keep() async
    /// Whether this instance holds `shard` now.
    func holds(_ shard: UInt32) -> Bool
}
