import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import StoreBus
import StoreBusHost
import StoreBusStorage
import StoreSchema
import Synchronization

/// Where a service's PostgreSQL database is, and how to sign in (a service's `postgres` setting).
public struct PostgresSettings: Sendable, Codable, Equatable {
    /// The servers to try, in order, each `host:port` (or `host`, port 5432): the first that takes
    /// writes (not in recovery: the primary) is used, and the list is tried again when it is lost.
    public var hosts: [String]
    /// The role to sign in as.
    public var user: String
    /// The database.
    public var database: String
    /// A file holding the role's password (its first line); nil when the server asks for none.
    public var passwordFile: String?
    /// Connections for reads (each read is one REPEATABLE READ transaction on one of them).
    public var readers: Int
    /// How long a connection attempt to one host may take.
    public var connectTimeoutSeconds: Double
    /// A sharded log's number of shards, fixed when its database is made (1: one log, as SQLite's).
    public var shards: UInt32
    /// How long a shard's lease lasts unless renewed (renewed every third of it); a transaction
    /// left idle this long is ended by the server, so that a paused instance holds no lock.
    public var leaseSeconds: Double
    /// ``leaseSeconds`` as a duration.
    public var lease: Duration { .milliseconds(Int64(leaseSeconds * 1000)) }
    /// Longest wait for a statement's answer: past it the connection is given up (closed) and the
    /// statement fails UNAVAILABLE, as when the connection is lost. A server that died while its
    /// backend lived on, a commit waiting for a standby that is gone, a network that drops packets
    /// unanswered: each would hold the caller for ever.
    public var answerTimeoutSeconds: Double

    public init(
        hosts: [String], user: String, database: String, passwordFile: String? = nil, readers: Int = 4, connectTimeoutSeconds: Double = 5, shards: UInt32 = 1,
        leaseSeconds: Double = 5, answerTimeoutSeconds: Double = 10
    ) {
        self.hosts = hosts
        self.user = user
        self.database = database
        self.passwordFile = passwordFile
        self.readers = readers
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.shards = shards
        self.leaseSeconds = leaseSeconds
        self.answerTimeoutSeconds = answerTimeoutSeconds
    }

    enum CodingKeys: String, CodingKey {
        case hosts, user, database, passwordFile, readers, connectTimeoutSeconds, shards, leaseSeconds, answerTimeoutSeconds
    }

    /// A config file's `postgres` section: `hosts` required, the rest as ``init(hosts:user:database:passwordFile:readers:connectTimeoutSeconds:shards:leaseSeconds:)``
    /// defaults them (role and database `storebus`); a relative `passwordFile` is from the file's directory.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = Self(hosts: [], user: "storebus", database: "storebus")
        hosts = try container.decode([String].self, forKey: .hosts)
        user = try container.value(.user, default: defaults.user)
        database = try container.value(.database, default: defaults.database)
        passwordFile = try container.decodeIfPresent(String.self, forKey: .passwordFile).map(decoder.configPath)
        readers = try container.value(.readers, default: defaults.readers)
        connectTimeoutSeconds = try container.value(.connectTimeoutSeconds, default: defaults.connectTimeoutSeconds)
        shards = try container.value(.shards, default: defaults.shards)
        leaseSeconds = try container.value(.leaseSeconds, default: defaults.leaseSeconds)
        answerTimeoutSeconds = try container.value(.answerTimeoutSeconds, default: defaults.answerTimeoutSeconds)
    }

    /// Refuses settings that cannot work, saying which and why.
    public func validate() throws {
        guard !hosts.isEmpty else { throw StartupError("postgres.hosts: at least one host:port") }
        for host in hosts {
            guard Self.endpoint(host) != nil else { throw StartupError("postgres.hosts: '\(host)' is not host or host:port") }
        }
        guard !user.isEmpty, !database.isEmpty else { throw StartupError("postgres.user and postgres.database must not be empty") }
        guard (1...64).contains(readers) else { throw StartupError("postgres.readers: from 1 to 64") }
        guard connectTimeoutSeconds > 0, connectTimeoutSeconds <= 300 else { throw StartupError("postgres.connectTimeoutSeconds: above 0, at most 300") }
        guard answerTimeoutSeconds > 0, answerTimeoutSeconds <= 3600 else { throw StartupError("postgres.answerTimeoutSeconds: above 0, at most 3600") }
        guard (1...4096).contains(shards) else { throw StartupError("postgres.shards: from 1 to 4096") }
        guard leaseSeconds >= 1, leaseSeconds <= 600 else { throw StartupError("postgres.leaseSeconds: from 1 to 600") }
    }

    /// What a service's `storage` and `postgres` settings come to: nil with `sqlite`; with `postgres`,
    /// its `postgres` settings, refused (``StartupError`` naming the setting) when missing or unworkable.
    public static func forStorage(_ storage: SQLEngine, _ postgres: PostgresSettings?) throws -> PostgresSettings? {
        guard storage == .postgres else { return nil }
        return try required(postgres)
    }

    /// A service's `postgres` settings with `storage` `postgres`, refused when missing or unworkable.
    public static func required(_ postgres: PostgresSettings?) throws -> PostgresSettings {
        guard let postgres else { throw StartupError("service.storage is postgres: service.postgres must name the servers, role and database") }
        do {
            try postgres.validate()
        } catch {
            throw StartupError("service.\(error)")
        }
        return postgres
    }

    /// `host:port` (or `host`, `[v6]:port`) as a host and a port.
    static func endpoint(_ text: String) -> (host: String, port: Int)? {
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            let host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if rest.isEmpty { return (host, 5432) }
            guard rest.hasPrefix(":"), let port = Int(rest.dropFirst()), (1...65535).contains(port) else { return nil }
            return (host, port)
        }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard let first = parts.first, !first.isEmpty else { return nil }
        if parts.count == 1 { return (String(first), 5432) }
        guard parts.count == 2, let port = Int(parts[1]), (1...65535).contains(port) else { return nil }
        return (String(first), port)
    }
}

/// A service's database on PostgreSQL: the ``SQLDatabase`` of the scale-out set-up.
///
/// Writes go through one connection, one transaction at a time, as SQLite's single writer does:
/// the log writer's groups (``inGroupTransaction(_:)``, on its committer's thread) and the writes of
/// their own (``write(_:)``, on a thread of the database's) take turns on it. Reads run on
/// ``PostgresSettings/readers`` other connections, each in a REPEATABLE READ, READ ONLY transaction:
/// one snapshot for all of a read's statements. A commit is acknowledged once PostgreSQL has made it
/// durable (`synchronous_commit = on`, and with a synchronous standby, once the standby has it too):
/// every event committed is durable, and nothing waits for a sync of ours.
///
/// A connection that is lost is made again at its next use, from the first host of the list that is
/// a primary: after a failover, the promoted standby.
public final class PostgresDatabase: SQLDatabase {
    public let settings: PostgresSettings
    let logger: Logger
    private let connector: Connector
    private let writer: Worker
    private let readers: [Worker]
    private let nextReader = Atomic<Int>(0)
    /// The sharded logs' leases, by log name.
    private let sharded = Mutex<[String: ShardLeases]>([:])
    /// The lease every write must hold (``fence(_:)``); nil: none.
    private let writeFence = Mutex<ShardLeases?>(nil)

    /// Connects to the primary among `settings.hosts` and brings its schema up to `schema`.
    public init(settings: PostgresSettings, schema: PostgresSchema, logger: Logger) throws {
        try settings.validate()
        self.settings = settings
        self.logger = logger
        let password = try settings.passwordFile.map { path in
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw StartupError("postgres.passwordFile: cannot read \(path)")
            }
            return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
        }
        let connector = Connector(settings: settings, password: password, logger: logger)
        self.connector = connector
        writer = Worker(name: "storebus-pg-writer", connector: connector)
        readers = (0..<settings.readers).map { Worker(name: "storebus-pg-read-\($0)", connector: connector) }
        try writer.sync { session in try schema.apply(session) }
    }

    deinit {
        try? close()
    }

    /// Stops the workers; each closes its connection once its jobs are done.
    public func close() throws {
        writer.stop()
        for reader in readers { reader.stop() }
    }

    public var engine: SQLEngine { .postgres }

    /// How a read begins: one snapshot for all its statements.
    static let beginRead = "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"

    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        let index = nextReader.wrappingAdd(1, ordering: .relaxed).oldValue % readers.count
        return try await readers[index].run { session in try Self.inTransaction(session, begin: Self.beginRead, body) }
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        let fence = writeFence.withLock { $0 }
        return try await writer.run { session in try Self.fenced(session, fence, body) }
    }

    /// A write transaction on `session`, holding `fence`'s lease when there is one (``fence(_:)``).
    static func fenced<T>(_ session: PostgresSession, _ fence: ShardLeases?, _ body: (any SQLConnection) throws -> T) throws -> T {
        try inTransaction(session, begin: "BEGIN") { db in
            try check(fence, db)
            return try body(db)
        }
    }

    /// Makes every write of this database hold shard 0 of `leases` (a service of which one instance
    /// is active at a time): each write transaction first reads the lease row with a share lock, on
    /// condition that this instance owns it with its epoch and that it has not lapsed, and is
    /// refused (UNAVAILABLE, reason NOT_OWNER) otherwise. The lock keeps another instance from
    /// taking the lease over until the write has committed or rolled back.
    public func fence(_ leases: ShardLeases) {
        writeFence.withLock { $0 = leases }
    }

    static func check(_ fence: ShardLeases?, _ db: any SQLConnection) throws {
        guard let fence else { return }
        guard let epoch = fence.epoch(of: 0),
            try db.value(Int64.self, cached: fenceSQL, arguments: [fence.logName, fence.instance, Int64(epoch)]) != nil
        else {
            throw RPCError.notOwner(shard: 0, "this instance no longer holds the \(fence.logName) lease: another instance is active")
        }
    }

    static let fenceSQL: CachedSQL = """
        SELECT 1 FROM storebus_shard WHERE log = ? AND shard = 0 AND owner = ? AND epoch = ? AND expires_at > clock_timestamp() FOR SHARE
        """

    public func writeDerived<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await write(body)
    }

    public var durableEventSeq: UInt64 { .max }

    /// ``write(_:)`` on the caller's thread, waiting for it: for work done once at start, or
    /// seldom, by code that cannot wait asynchronously (the receipt service's signing keys).
    public func writeBlocking<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        let fence = writeFence.withLock { $0 }
        return try writer.sync { session in try Self.fenced(session, fence, body) }
    }

    /// ``read(_:)`` on the caller's thread, waiting for it (see ``writeBlocking(_:)``).
    public func readBlocking<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        let index = nextReader.wrappingAdd(1, ordering: .relaxed).oldValue % readers.count
        return try readers[index].sync { session in try Self.inTransaction(session, begin: Self.beginRead, body) }
    }

    public func inGroupTransaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try writeBlocking(body)
    }

    public func betweenGroups() {}

    /// Makes `leases`' log a sharded one: its writer takes positions from its shards' rows, fenced
    /// by the leases (before the writer is made).
    public func shard(_ leases: ShardLeases) {
        sharded.withLock { $0[leases.logName] = leases }
    }

    public func logPositions(logName: String) -> any LogPositions {
        if let leases = sharded.withLock({ $0[logName] }) { return ShardPositions(leases: leases) }
        return EventPositions()
    }

    public func shardCount(logName: String) -> UInt32 {
        sharded.withLock { $0[logName] }?.shardCount ?? 1
    }

    public func ownedShards(logName: String) -> [UInt32] {
        guard let leases = sharded.withLock({ $0[logName] }) else { return [0] }
        return leases.ownership.keys.sorted()
    }

    /// A connection on a thread of its own, for a task of the engine's (the leases).
    func makeWorker(name: String) -> Worker {
        Worker(name: name, connector: connector)
    }

    public var syncer: WALSyncer? { nil }

    /// Runs `body` between `begin` and COMMIT; rolls back when it throws.
    static func inTransaction<T>(_ session: PostgresSession, begin: String, _ body: (any SQLConnection) throws -> T) throws -> T {
        try session.run(begin)
        do {
            let value = try body(session)
            try session.run("COMMIT")
            return value
        } catch {
            try? session.run("ROLLBACK")
            throw error
        }
    }
}

/// Makes connections to the primary among the settings' hosts.
final class Connector: Sendable {
    let settings: PostgresSettings
    let password: String?
    let logger: Logger
    private let ids = Atomic<Int>(0)

    init(settings: PostgresSettings, password: String?, logger: Logger) {
        self.settings = settings
        self.password = password
        self.logger = logger
    }

    /// A connection to the first host of the list that answers and takes writes; UNAVAILABLE when
    /// none does (each one's reason in the message).
    func connect() throws -> PostgresSession {
        var reasons: [String] = []
        for host in settings.hosts {
            guard let (name, port) = PostgresSettings.endpoint(host) else { continue }
            var configuration = PostgresConnection.Configuration(host: name, port: port, username: settings.user, password: password, database: settings.database, tls: .disable)
            configuration.options.connectTimeout = .milliseconds(Int64(settings.connectTimeoutSeconds * 1000))
            // A transaction left idle past a lease (its process paused) is ended by the server: it
            // holds no lock that would keep the other instances from taking its shards over.
            configuration.options.additionalStartupParameters = [
                ("application_name", "storebus"), ("idle_in_transaction_session_timeout", "\(Int(settings.leaseSeconds * 1000))")
            ]
            let id = ids.wrappingAdd(1, ordering: .relaxed).oldValue
            let connection: PostgresConnection
            do {
                connection = try PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: id, logger: logger).wait()
            } catch {
                reasons.append("\(host): \(error)")
                continue
            }
            // A connection is closed before it is let go, whatever happened to it (postgres-nio
            // requires it).
            do {
                let session = PostgresSession(connection: connection, answerTimeout: .milliseconds(Int64(settings.answerTimeoutSeconds * 1000)), logger: logger)
                let standby = try session.fetchFirst(cached: Self.inRecoverySQL, bind: { _ in }) { $0.bool(0) } ?? true
                if !standby { return session }
                reasons.append("\(host): a standby, or not yet taking writes")
            } catch {
                reasons.append("\(host): \(error)")
            }
            try? connection.close().wait()
        }
        throw RPCError(.unavailable, "no PostgreSQL primary among \(settings.hosts.joined(separator: ", ")): \(reasons.joined(separator: "; "))")
    }

    /// Whether the server does not take writes: a standby, or a standby being promoted that does not
    /// take them yet (pg_auto_failover holds writes off until the old primary is surely gone).
    static let inRecoverySQL: CachedSQL = "SELECT pg_is_in_recovery() OR current_setting('default_transaction_read_only') = 'on'"
}

/// A thread with a connection of its own, running jobs one after another; the connection is made at
/// the first job, and made again after one that lost it.
final class Worker: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `jobs` and `stopped` are touched only with `condition`
    // locked; `session` only by whoever holds `turn` (the thread's jobs, or a caller of `sync`).
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var stopped = false
    private let turn = NSLock()
    private var session: PostgresSession?
    private let connector: Connector

    init(name: String, connector: Connector) {
        self.connector = connector
        let thread = Thread { [self] in loop() }
        thread.name = name
        thread.start()
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.unlock()
        condition.signal()
    }

    /// Runs `body` with the connection on the worker's thread.
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresSession) throws -> T) async throws -> T {
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<T, any Error>) in
            condition.lock()
            if stopped {
                condition.unlock()
                return continuation.resume(throwing: CancellationError())
            }
            jobs.append { [self] in continuation.resume(with: Result { try sync(body) }) }
            condition.unlock()
            condition.signal()
        }
    }

    /// Runs `body` with the connection on the caller's thread, once the worker's turn is free.
    func sync<T>(_ body: (PostgresSession) throws -> T) throws -> T {
        turn.lock()
        defer { turn.unlock() }
        if session == nil || session!.connection.isClosed {
            drop()
            session = try connector.connect()
        }
        do {
            return try body(session!)
        } catch let failure as PostgresFailure where failure.connectionLost {
            drop()
            throw RPCError(.unavailable, "the connection to PostgreSQL was lost: \(failure)")
        }
    }

    /// Closes the connection (if it is not closed already) and lets it go: the next job connects again.
    private func drop() {
        if let connection = session?.connection {
            // Not waited for without end: a connection that stopped answering may not close either.
            let closed = DispatchSemaphore(value: 0)
            connection.close().whenComplete { _ in closed.signal() }
            _ = closed.wait(timeout: .now() + .seconds(2))
        }
        session = nil
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if stopped && jobs.isEmpty {
                condition.unlock()
                try? session?.connection.close().wait()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
        }
    }
}

/// A service's tables on PostgreSQL: named steps, each applied once, in order, in one transaction
/// with its record in `storebus_migration`; several instances starting together apply each once
/// (they take turns on an advisory lock).
///
/// A database holds one service's state: the service that made it is recorded (`storebus_service`),
/// and another service's schema is refused there, since the followers' positions and leases are kept
/// under the followed log's name, which several services follow.
public struct PostgresSchema: Sendable {
    /// The service whose state the database holds (its process name); nil: any.
    public var service: String?
    /// Each step's name and statements.
    public var steps: [(name: String, statements: [String])]

    public init(service: String? = nil, steps: [(name: String, statements: [String])]) {
        self.service = service
        self.steps = steps
    }

    /// This schema and then `other`'s steps, for `other`'s service (this one's when it names none).
    public func adding(_ other: PostgresSchema) -> PostgresSchema {
        PostgresSchema(service: other.service ?? service, steps: steps + other.steps)
    }

    func apply(_ session: PostgresSession) throws {
        try PostgresDatabase.inTransaction(session, begin: "BEGIN") { _ in
            try session.run("SELECT pg_advisory_xact_lock(7130571)")
            if let service {
                try session.run("CREATE TABLE IF NOT EXISTS storebus_service (service TEXT COLLATE \"C\" PRIMARY KEY)")
                if let other = try session.values(String.self, cached: "SELECT service FROM storebus_service").first(where: { $0 != service }) {
                    throw StartupError(
                        "this PostgreSQL database holds the state of \(other): give \(service) a database of its own (postgres.database)")
                }
                try session.execute(cached: "INSERT INTO storebus_service (service) VALUES (?) ON CONFLICT (service) DO NOTHING", arguments: [service])
            }
            try session.run("CREATE TABLE IF NOT EXISTS storebus_migration (name TEXT COLLATE \"C\" PRIMARY KEY, applied_ms BIGINT NOT NULL)")
            let applied = Set(try session.values(String.self, cached: "SELECT name FROM storebus_migration"))
            for step in steps where !applied.contains(step.name) {
                for statement in step.statements { try session.run(statement) }
                try session.execute(cached: "INSERT INTO storebus_migration (name, applied_ms) VALUES (?, ?)", arguments: [step.name, EpochMilliseconds.now])
            }
        }
    }
}

extension PostgresSchema {
    /// The event log's table (``EventLog``) on PostgreSQL, and its shards' (``shardLeases``).
    public static var eventLog: PostgresSchema {
        PostgresSchema(steps: [
            (
                "storebus_event_log_v1",
                [
                    """
                    CREATE TABLE storebus_event (
                        shard BIGINT NOT NULL DEFAULT 0,
                        seq BIGINT NOT NULL,
                        stream_key TEXT COLLATE "C" NOT NULL,
                        key_seq BIGINT NOT NULL,
                        type TEXT NOT NULL,
                        time_ms BIGINT NOT NULL,
                        json TEXT NOT NULL,
                        topics BIGINT NOT NULL DEFAULT -1,
                        PRIMARY KEY (shard, seq),
                        UNIQUE (stream_key, key_seq)
                    )
                    """
                ]
            )
        ]).adding(shardLeases)
    }

    /// The tables of ``ShardLeases``: a sharded log's shards, their owners and positions, and the
    /// live instances (a log's writers', or a follower's instances sharing another log's shards).
    public static var shardLeases: PostgresSchema {
        PostgresSchema(steps: [
            (
                "storebus_shards_v1",
                [
                    // A sharded log's shards (``ShardLeases``): each one's last position, and its
                    // owner with the owner's epoch and lease. A log that is not sharded has none.
                    """
                    CREATE TABLE storebus_shard (
                        log TEXT COLLATE "C" NOT NULL,
                        shard BIGINT NOT NULL,
                        seq BIGINT NOT NULL DEFAULT 0,
                        owner TEXT COLLATE "C" NOT NULL DEFAULT '',
                        epoch BIGINT NOT NULL DEFAULT 0,
                        expires_at TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
                        PRIMARY KEY (log, shard)
                    )
                    """,
                    // The instances of each sharded log's service that are alive, and where they
                    // answer: the shard map's endpoints.
                    """
                    CREATE TABLE storebus_instance (
                        log TEXT COLLATE "C" NOT NULL,
                        instance TEXT COLLATE "C" NOT NULL,
                        rpc_endpoints TEXT NOT NULL,
                        event_endpoints TEXT NOT NULL,
                        expires_at TIMESTAMPTZ NOT NULL,
                        PRIMARY KEY (log, instance)
                    )
                    """
                ]
            ),
            (
                "storebus_shards_v2_positions",
                [
                    // Each shard's last position in a row of its own, apart from its lease: a writer
                    // holds its position's row until it commits, and the leases' rounds (renewals,
                    // takeovers) never wait for it, nor it for them (with both in one row, a writer
                    // and its own instance's renewal could each wait for the other).
                    """
                    CREATE TABLE storebus_shard_position (
                        log TEXT COLLATE "C" NOT NULL,
                        shard BIGINT NOT NULL,
                        seq BIGINT NOT NULL DEFAULT 0,
                        PRIMARY KEY (log, shard)
                    )
                    """,
                    "INSERT INTO storebus_shard_position (log, shard, seq) SELECT log, shard, seq FROM storebus_shard",
                    "ALTER TABLE storebus_shard DROP COLUMN seq"
                ]
            )
        ])
    }

    /// The follower kit's positions (``FollowedLog``): as `sb_follow` in a SQLite follower's database.
    public static var followedLog: PostgresSchema {
        PostgresSchema(steps: [("sb_follow_v1", ["CREATE TABLE sb_follow (log TEXT COLLATE \"C\" PRIMARY KEY, seq BIGINT NOT NULL)"])])
    }
}
