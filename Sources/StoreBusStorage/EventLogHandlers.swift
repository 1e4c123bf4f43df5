import GRDB
import StoreBus
import StoreBusServer
import StoreSchema
import Synchronization

/// Serves `storebus.eventlog.v1.EventLog` from a service's database.
///
/// The response is assembled from the stored JSON of each event, without decoding it (the contract's
/// `prewritten_response`). Followers mostly ask for the few events after their position (a device's
/// observer, a caught-up follower): such reads run inline on the RPC server's loop, on a read-only
/// connection only that loop uses, which saves the two thread hops of a pool read. In WAL mode the
/// read never waits for the writer. Large pages (catching up) go through the pool.
public struct EventLogHandlers: Storebus_Eventlog_V1_EventLog.Handlers {
    /// Largest page a reader may ask for (the contract's rule on `limit`).
    public static let maxPageSize: UInt32 = 1000
    /// Page size when the reader asks for 0.
    public static let defaultPageSize: UInt32 = 256

    /// Pages up to this size are read inline on the server's loop, through a read-only connection of
    /// the loop's own; larger ones through the pool.
    public static let inlinePageSize = 64

    /// A page stops before its events' JSON passes this size (it always holds at least one event), so
    /// that an answer stays well under the 4 MiB message limit whatever the events hold.
    public static let maxPageBytes = 1024 * 1024

    /// Positions a page read with topics looks at, at most: a follower of a rare topic is answered
    /// in bounded time however long the log, and reads on from the page's `through_seq`.
    public static let maxScan: UInt64 = 16 * 1024

    let database: any SQLDatabase
    /// SQLite's read-only connection for small pages, read on the loop (nil on another engine).
    let inline: InlineReader?
    /// The log's name (its shards, on a sharded engine, are the database's for it).
    let logName: String
    /// The log's topic names, in the order of their bits (``EventTopics``).
    let topics: [String]

    /// Handlers reading `database`'s log, whose writer files events under `topics` (none: ReadEvents
    /// with topics is refused).
    public init(database: any SQLDatabase, logName: String = "", topics: [String] = []) throws {
        self.database = database
        self.logName = logName
        self.topics = topics
        inline = try (database as? StoreDatabase).map { InlineReader(try $0.makeReadOnlyConnection()) }
    }

    /// A router answering ReadEvents.
    public var router: RPCRouter {
        var router = RPCRouter()
        router.register(self)
        return router
    }

    /// Small pages are read inline, large ones awaited from the pool: never a block on the loop.
    public var loopSafe: LoopSafeMethods { .all(of: Storebus_Eventlog_V1_EventLog.self) }

    public func readEvents(_ request: Storebus_Eventlog_V1_ReadEventsRequest, context: ServerContext) async throws -> PrewrittenResponse<Storebus_Eventlog_V1_ReadEventsResponse> {
        let limit = Int(request.limit == 0 ? Self.defaultPageSize : request.limit)
        let topics = try Self.topics(request.topics, of: self.topics)
        let shards = database.shardCount(logName: logName)
        guard request.key.isEmpty ? request.shard < shards : true else {
            throw RPCError.invalidArgument(field: "shard", "this event log has \(shards) shard\(shards == 1 ? "" : "s"): 0 to \(shards - 1)")
        }
        // Events not yet durable are left out: a follower never passes on one that a power loss
        // could still take back (and give its position to another).
        let durable = database.durableEventSeq
        if limit <= Self.inlinePageSize, let inline, let page = try inline.read({ db in try Self.page(db, request, topics: topics, limit: limit, through: durable, shards: shards) }) {
            return PrewrittenResponse(json: page)
        }
        // Without waiting for a sync: the durable bound above leaves out what is not durable yet.
        return PrewrittenResponse(json: try await database.readCommitted { db in try Self.page(db, request, topics: topics, limit: limit, through: durable, shards: shards) })
    }

    /// The topics `names` of a log whose topics are `topics` (nil for none asked); INVALID_ARGUMENT
    /// for a name the log does not have.
    static func topics(_ names: [String], of topics: [String]) throws -> EventTopics? {
        guard !names.isEmpty else { return nil }
        switch EventTopics.named(names, in: topics) {
        case .success(let set): return set
        case .failure(let unknown):
            throw RPCError.invalidArgument(
                field: "topics",
                topics.isEmpty
                    ? "this event log has no topics: read it without"
                    : "'\(RPCError.echo(unknown.name))' is not one of this event log's topics: \(topics.joined(separator: ", "))")
        }
    }

    /// One page of the log as the ReadEventsResponse JSON, of the events at or before `through`, in
    /// any of `topics` when given.
    static func page(
        _ db: any SQLConnection, _ request: Storebus_Eventlog_V1_ReadEventsRequest, topics: EventTopics?, limit: Int, through: UInt64, shards: UInt32
    ) throws -> [UInt8] {
        let shard = request.key.isEmpty ? request.shard : 0
        let head = try EventLog.head(db, key: request.key, shard: shard, through: through)
        let events: [StoredEvent]
        // How far the read looked: past the events given when topics left some out.
        let scanned: UInt64
        if let topics {
            (events, scanned) = try EventLog.read(db, key: request.key, shard: shard, after: request.afterSeq, limit: limit, head: head, topics: topics, scan: maxScan)
        } else {
            events = try EventLog.read(db, key: request.key, shard: shard, after: request.afterSeq, limit: limit, through: through)
            scanned = request.afterSeq
        }
        var count = 0, bytes = 0
        for event in events {
            let size = event.json.utf8.count + 1
            if count > 0 && bytes + size > maxPageBytes { break }
            count += 1
            bytes += size
        }
        let position = { (event: StoredEvent) in request.key.isEmpty ? event.seq : event.keySeq }
        // A page cut short reads through its last event, not past it.
        let readThrough = count < events.count ? position(events[count - 1]) : max(scanned, events.last.map(position) ?? 0)
        var json = "{\"events\":["
        json.reserveCapacity(bytes + 64)
        for (index, event) in events.prefix(count).enumerated() {
            if index > 0 { json += "," }
            json += event.json
        }
        json += "],\"headSeq\":\"\(head)\",\"throughSeq\":\"\(readThrough)\",\"shardCount\":\(shards)}"
        return Array(json.utf8)
    }
}

/// A read-only connection used from one thread at a time: the RPC server's loop. `read` returns nil
/// instead of waiting when the connection is busy (which only a second server loop sharing the
/// router could cause); the caller then reads through the pool.
final class InlineReader: Sendable {
    private let connection: DatabaseQueue
    private let busy = Atomic<Bool>(false)

    init(_ connection: DatabaseQueue) {
        self.connection = connection
    }

    func read<T>(_ body: (Database) throws -> T) throws -> T? {
        guard !busy.exchange(true, ordering: .acquiring) else { return nil }
        defer { busy.store(false, ordering: .releasing) }
        return try connection.read(body)
    }
}
