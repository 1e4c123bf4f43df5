import Foundation
import GRDB
import StoreBus
import StoreBusPostgres
import StoreBusServer
import StoreBusStorage
import StoreSchema
import Synchronization

/// The download service's tables, in its own database (`download.sqlite`).
enum DownloadSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("download_v1") { db in
            // The position of the payment queue's log applied, committed with its effects (moved to
            // the follower kit's sb_follow by the migration below).
            try db.execute(cached: "CREATE TABLE dl_follow (log TEXT PRIMARY KEY, seq INTEGER NOT NULL) STRICT")
            // Every download this service was asked about, with its state as the payment queue last
            // said (key_seq: the queue position that said it) and what was sent for it. A finished
            // transaction's downloads stay, marked, so that a late answer cannot bring them back.
            try db.execute(
                cached: """
                    CREATE TABLE dl_download (
                        transaction_id TEXT NOT NULL,
                        content_id TEXT NOT NULL,
                        queue_key TEXT NOT NULL,
                        app TEXT NOT NULL,
                        product_id TEXT NOT NULL,
                        state INTEGER NOT NULL,
                        key_seq INTEGER NOT NULL,
                        bytes_sent INTEGER NOT NULL DEFAULT 0,
                        served_end INTEGER NOT NULL DEFAULT 0,
                        created_ms INTEGER NOT NULL,
                        transaction_finished INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (transaction_id, content_id)
                    ) STRICT
                    """)
            try db.execute(cached: "CREATE INDEX dl_download_queue ON dl_download (queue_key, created_ms)")
        }
        FollowedLog.registerMigration(&migrator, replacing: "dl_follow")
        return migrator
    }

    /// The same table on PostgreSQL (a database of the download service's own), with the follower
    /// kit's positions and the leases its instances split the payment queue's shards by.
    static var postgres: PostgresSchema {
        let text = "TEXT COLLATE \"C\""
        return PostgresSchema.shardLeases.adding(.followedLog).adding(
            PostgresSchema(
                service: DownloadService.process,
                steps: [
                    (
                        "download_v1",
                        [
                            """
                            CREATE TABLE dl_download (
                                transaction_id \(text) NOT NULL,
                                content_id \(text) NOT NULL,
                                queue_key \(text) NOT NULL,
                                app \(text) NOT NULL,
                                product_id \(text) NOT NULL,
                                state BIGINT NOT NULL,
                                key_seq BIGINT NOT NULL,
                                bytes_sent BIGINT NOT NULL DEFAULT 0,
                                served_end BIGINT NOT NULL DEFAULT 0,
                                created_ms BIGINT NOT NULL,
                                transaction_finished BIGINT NOT NULL DEFAULT 0,
                                PRIMARY KEY (transaction_id, content_id)
                            )
                            """,
                            "CREATE INDEX dl_download_queue ON dl_download (queue_key, created_ms)"
                        ]
                    )
                ]))
    }
}

/// One download as the ledger knows it.
struct LedgerEntry: Sendable, Equatable {
    var queueKey: String
    var app: String
    var productID: String
    var state: Storebus_PaymentQueue_V1_DownloadState
    /// The queue position that said `state`.
    var keySeq: UInt64
    /// Bytes sent over every start and resume.
    var bytesSent: Int64
    /// The furthest byte sent so far (the progress this service knows).
    var servedEnd: Int64
    var createdMS: Int64
    /// The transaction was finished: its downloads can no longer be used.
    var transactionFinished = false
}

/// A download's name.
struct DownloadKey: Hashable, Sendable {
    var transaction: String
    var content: String
}

/// The downloads the service has been asked about, their states as the payment queue says (from
/// its answers and its log) and what was sent, in memory for ReadChunk and in the database for a
/// restart. Byte counts reach the database with each state change; a crash loses the counts since.
///
/// Several instances sharing one database (on PostgreSQL) each serve the queues of the shards they
/// hold: an instance keeps in memory the downloads of those shards only, loaded from the database
/// when it takes a shard and let go when it loses it, and answers for no other (``serves(shard:)``).
final class DownloadLedger: Sendable {
    /// The log followed: the payment queue's.
    static let log = ServiceRegistry.paymentQueueLog

    let database: any SQLDatabase
    private let entries: Mutex<[DownloadKey: LedgerEntry]>
    /// The shards whose downloads are in memory; nil: every one (a single instance).
    private let served: Mutex<Set<UInt32>?>
    /// Whether several instances share the database (memory holds some shards only).
    private let shared: Bool

    /// The ledger kept in `database`: loaded whole, or (`shared` by several instances) a shard at a
    /// time as this instance takes it (``load(shard:of:)``).
    init(database: any SQLDatabase, shared: Bool = false) async throws {
        self.database = database
        self.shared = shared
        served = Mutex(shared ? [] : nil)
        entries = Mutex(shared ? [:] : Dictionary(try await Self.read(database), uniquingKeysWith: { $1 }))
    }

    /// Whether this instance answers for the queues of `shard`.
    func serves(shard: UInt32) -> Bool {
        served.withLock { $0?.contains(shard) ?? true }
    }

    /// Loads the downloads of the queues in `shard` (of `count`), keeping what memory holds of a
    /// later queue position, and answers for them from now on.
    func load(shard: UInt32, of count: UInt32) async throws {
        let loaded = try await Self.read(database).filter { ShardHash.shard(ofQueueKey: $0.1.queueKey, count: count) == shard }
        entries.withLock { entries in
            for (key, entry) in loaded where entries[key].map({ $0.keySeq <= entry.keySeq }) ?? true { entries[key] = entry }
        }
        _ = served.withLock { $0?.insert(shard) }
    }

    /// Stops answering for the queues of `shard` (of `count`) and lets their downloads go from memory.
    func drop(shard: UInt32, of count: UInt32) {
        _ = served.withLock { $0?.remove(shard) }
        entries.withLock { entries in
            entries = entries.filter { ShardHash.shard(ofQueueKey: $0.value.queueKey, count: count) != shard }
        }
    }

    /// A row of `dl_download` as an entry.
    private static func entry(_ row: SQLRow) -> LedgerEntry {
        LedgerEntry(
            queueKey: row["queue_key"], app: row["app"], productID: row["product_id"],
            state: Storebus_PaymentQueue_V1_DownloadState(rawValue: row["state"]) ?? .unspecified,
            keySeq: row["key_seq"], bytesSent: row["bytes_sent"], servedEnd: row["served_end"], createdMS: row["created_ms"],
            transactionFinished: row["transaction_finished"]
        )
    }

    /// Every download the database holds.
    private static func read(_ database: any SQLDatabase) async throws -> [(DownloadKey, LedgerEntry)] {
        try await database.read { db in
            try db.rows(cached: CachedSQL("SELECT * FROM dl_download")).map { row -> (DownloadKey, LedgerEntry) in
                (DownloadKey(transaction: row["transaction_id"], content: row["content_id"]), entry(row))
            }
        }
    }

    func entry(_ key: DownloadKey) -> LedgerEntry? {
        entries.withLock { $0[key] }
    }

    /// Brings the downloads `keys` name into memory from the database when memory lacks them and
    /// this instance answers for their queues now. Shared by several instances, a download may
    /// reach the database after this instance took its shard over and loaded it (the instance
    /// before answered its start a moment late); its later changes come through the log.
    func readThrough(_ keys: [DownloadKey], shardOf: (String) -> UInt32) async throws {
        guard shared else { return }
        let missing = entries.withLock { entries in keys.filter { entries[$0] == nil } }
        guard !missing.isEmpty else { return }
        let found = try await database.read { db in
            try missing.compactMap { key -> (DownloadKey, LedgerEntry)? in
                try db.row(cached: Self.oneSQL, arguments: [key.transaction, key.content]).map { (key, Self.entry($0)) }
            }
        }
        entries.withLock { entries in
            for (key, entry) in found where entries[key] == nil && serves(shard: shardOf(entry.queueKey)) { entries[key] = entry }
        }
    }

    static let oneSQL: CachedSQL = "SELECT * FROM dl_download WHERE transaction_id = ? AND content_id = ?"

    /// Every entry of the queue `queueKey` whose transaction is not finished, oldest first.
    func entries(queueKey: String) -> [(DownloadKey, LedgerEntry)] {
        entries.withLock { entries in
            entries.filter { $0.value.queueKey == queueKey && !$0.value.transactionFinished }.sorted {
                ($0.value.createdMS, $0.key.transaction, $0.key.content) < ($1.value.createdMS, $1.key.transaction, $1.key.content)
            }
            .map { ($0.key, $0.value) }
        }
    }

    /// Counts a chunk as sent when its download is still active in `queueKey` and its transaction
    /// unfinished, in one step under the ledger's lock (the chunk is then answered); false, counting
    /// nothing, otherwise.
    func sentIfActive(_ key: DownloadKey, queueKey: String, count: Int, end: Int64) -> Bool {
        entries.withLock { entries in
            guard let entry = entries[key], entry.queueKey == queueKey, entry.state == .active, !entry.transactionFinished else { return false }
            entries[key]?.bytesSent += Int64(count)
            if entry.servedEnd < end { entries[key]?.servedEnd = end }
            return true
        }
    }

    /// Takes in the payment queue's answer to UpdateDownloads: each download's state as of `keySeq`.
    func record(queue: Storebus_PaymentQueue_V1_QueueRef, app: String, downloads: [Storebus_PaymentQueue_V1_Download], productIDs: [String], keySeq: UInt64) async throws {
        let now = EpochMilliseconds.now
        let changed = entries.withLock { entries -> [(DownloadKey, LedgerEntry)] in
            var changed: [(DownloadKey, LedgerEntry)] = []
            for (download, productID) in zip(downloads, productIDs) {
                let key = DownloadKey(transaction: download.transactionIdentifier, content: download.contentIdentifier)
                var entry = entries[key] ?? LedgerEntry(queueKey: queue.key, app: app, productID: productID, state: download.state, keySeq: 0, bytesSent: 0, servedEnd: 0, createdMS: now)
                guard keySeq >= entry.keySeq, !entry.transactionFinished else { continue }
                entry.state = download.state
                entry.keySeq = keySeq
                if download.state == .cancelled { entry.servedEnd = 0 }
                entries[key] = entry
                changed.append((key, entry))
            }
            return changed
        }
        guard !changed.isEmpty else { return }
        try await database.write { db in
            for (key, entry) in changed { try Self.save(db, key, entry) }
        }
    }

    /// Applies a page of the payment queue's log in the follower's write transaction `db`: download
    /// states, and the end of finished transactions' downloads. Events of downloads never asked about
    /// here are passed over.
    func apply(_ records: [Storebus_PaymentQueue_V1_QueueEventRecord], in db: any SQLConnection) throws {
        // With several instances: downloads the database may hold that memory does not (see
        // readThrough), brought up to date there.
        var unknown: [(DownloadKey, Storebus_PaymentQueue_V1_DownloadState, UInt64)] = []
        var finishedIDs: [(String, UInt64)] = []
        let saved = entries.withLock { entries -> [(DownloadKey, LedgerEntry)] in
            var saved: [DownloadKey: LedgerEntry] = [:]
            for record in records {
                switch record.payload.event {
                case .updatedDownloads(let updated):
                    for download in updated.downloads {
                        let key = DownloadKey(transaction: download.transactionIdentifier, content: download.contentIdentifier)
                        guard var entry = entries[key] else {
                            unknown.append((key, download.state, record.keySeq))
                            continue
                        }
                        guard record.keySeq > entry.keySeq else { continue }
                        entry.state = download.state
                        entry.keySeq = record.keySeq
                        entries[key] = entry
                        saved[key] = entry
                    }
                case .removedTransactions(let finished):
                    for transaction in finished.transactions {
                        let id = transaction.transactionIdentifier
                        finishedIDs.append((id, record.keySeq))
                        for key in entries.keys where key.transaction == id {
                            var entry = entries[key]!
                            if entry.state != .finished { entry.state = .cancelled }
                            entry.keySeq = max(entry.keySeq, record.keySeq)
                            entry.transactionFinished = true
                            entries[key] = entry
                            saved[key] = entry
                        }
                    }
                default:
                    continue
                }
            }
            return saved.map { ($0.key, $0.value) }
        }
        for (key, entry) in saved { try Self.save(db, key, entry) }
        guard shared else { return }
        for (key, state, keySeq) in unknown {
            try db.execute(cached: Self.stateSQL, arguments: [state.rawValue, Int64(keySeq), key.transaction, key.content, Int64(keySeq)])
        }
        for (id, keySeq) in finishedIDs {
            try db.execute(cached: Self.finishedSQL, arguments: [Storebus_PaymentQueue_V1_DownloadState.cancelled.rawValue, Int64(keySeq), id])
        }
    }

    static let stateSQL: CachedSQL = "UPDATE dl_download SET state = ?, key_seq = ? WHERE transaction_id = ? AND content_id = ? AND key_seq < ?"
    static let finishedSQL: CachedSQL = """
        UPDATE dl_download SET state = CASE WHEN state = \(Storebus_PaymentQueue_V1_DownloadState.finished.rawValue) THEN state ELSE ?1 END,
            key_seq = CASE WHEN key_seq > ?2 THEN key_seq ELSE ?2 END, transaction_finished = 1
        WHERE transaction_id = ?3 AND transaction_finished = 0
        """

    private static func save(_ db: any SQLConnection, _ key: DownloadKey, _ entry: LedgerEntry) throws {
        try db.execute(
            cached: """
                INSERT INTO dl_download (transaction_id, content_id, queue_key, app, product_id, state, key_seq, bytes_sent, served_end, created_ms, transaction_finished)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (transaction_id, content_id) DO UPDATE SET
                    state = excluded.state, key_seq = excluded.key_seq, bytes_sent = excluded.bytes_sent, served_end = excluded.served_end,
                    transaction_finished = excluded.transaction_finished
                WHERE dl_download.key_seq <= excluded.key_seq
                """,
            arguments: [
                key.transaction, key.content, entry.queueKey, entry.app, entry.productID, entry.state.rawValue, entry.keySeq,
                entry.bytesSent, entry.servedEnd, entry.createdMS, entry.transactionFinished
            ])
    }
}

/// The download service's reducer of the payment queue's log (``DownloadLedger/apply(_:in:)``). A
/// replaced log forgets nothing: the downloads asked about stay, and the log applied again only
/// brings their states up to date.
struct DownloadReducer: LogReducer {
    typealias Page = Storebus_PaymentQueue_V1_QueueEventPage
    /// Download states, and the finishes of transactions with hosted content: a purchase without
    /// any costs this service nothing.
    static let topics = [QueueTopic.downloads.rawValue]
    let ledger: DownloadLedger

    func apply(_ records: [Storebus_PaymentQueue_V1_QueueEventRecord], in db: any SQLConnection) throws {
        try ledger.apply(records, in: db)
    }

    func holding(shard: UInt32, of count: UInt32) async throws {
        try await ledger.load(shard: shard, of: count)
    }

    func released(shard: UInt32, of count: UInt32) {
        ledger.drop(shard: shard, of: count)
    }
}
