import StoreBus
import StoreSchema

/// Where a followed log stands now, asked of the service that keeps it: what a follower's handlers
/// wait for to read their callers' writes. Both questions are one small ReadEvents, answered on the
/// log keeper's loop.
public struct LogHead: Sendable {
    let eventLog: Storebus_Eventlog_V1_EventLog.Client

    /// Asks through `client`, connected to the service that keeps the log.
    public init(client: RPCClient) {
        eventLog = .init(client)
    }

    /// The newest durable position of the whole log (of `shard`, when it is sharded): everything
    /// committed (and answered) before this call is at or before it.
    public func newest(shard: UInt32 = 0, timeout: Duration?) async throws(RPCError) -> UInt64 {
        try await eventLog.readEvents(
            .with {
                // Past every position: the answer holds the head alone.
                $0.afterSeq = UInt64(Int64.max)
                $0.limit = 1
                $0.shard = shard
            }, options: CallOptions(timeout: timeout)
        ).headSeq
    }

    /// The position in the whole log (in its shard, when it is sharded) of `key`'s event `keySeq` (a
    /// device's queue position, the `seq` of an observer callback): nil when the key has no such
    /// event yet.
    public func position(ofKey key: String, keySeq: UInt64, timeout: Duration?) async throws(RPCError) -> UInt64? {
        guard keySeq > 0 else { return 0 }
        let page = try await eventLog.readEvents(
            .with {
                $0.key = key
                $0.afterSeq = keySeq - 1
                $0.limit = 1
            }, options: CallOptions(timeout: timeout))
        return page.events.first { $0.keySeq == keySeq }?.seq
    }
}
