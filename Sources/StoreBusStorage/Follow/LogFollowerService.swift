import Logging
import ServiceLifecycle
import StoreBus
import StoreBusServer

/// Follows another service's event log into a ``LogReducer``, a page at a time, until the process
/// stops: each page's effects and its position committed together (``FollowedLog``), from the position
/// the follower's database holds. A log that ends before that position (its database was replaced) is
/// forgotten and applied again from its start. `applied` (when given) hears every position reached,
/// for calls that wait to read their own writes.
public struct LogFollowerService<Reducer: LogReducer>: Service {
    let follower: EventFollower
    let log: FollowedLog
    let reducer: Reducer
    let applied: PositionWaiter<String>?
    let logger: Logger

    /// A follower of `log` through `follower`, applying with `reducer`.
    public init(follower: EventFollower, log: FollowedLog, reducer: Reducer, applied: PositionWaiter<String>? = nil, logger: Logger) {
        self.follower = follower
        self.log = log
        self.reducer = reducer
        self.applied = applied
        self.logger = logger
    }

    public func run() async throws {
        let (log, reducer, applied, logger) = (log, reducer, applied, logger)
        try await cancelWhenGracefulShutdown {
            try await follower.followAlways(
                as: Reducer.Page.self,
                start: {
                    let start = try await log.position()
                    applied?.advance(log.name, to: start)
                    return start
                },
                { records in
                    guard let last = records.last?.seq else { return }
                    try await log.apply(through: last) { db in try reducer.apply(records, in: db) }
                    applied?.advance(log.name, to: last)
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
        await follower.shutdown()
    }
}
