import Foundation
import GRDB
import StoreBus
import StoreBusServer
import StoreSchema
import SwiftProtobuf

/// One committed event as stored: its positions and its complete `storebus.eventlog.v1.Event` JSON.
public struct StoredEvent: Sendable, Equatable {
    /// The shard it is in (0 when the log is not sharded).
    public var shard: UInt32 = 0
    /// Position in its shard (the whole log, when it is not sharded).
    public let seq: UInt64
    /// The key.
    public let key: String
    /// Position within the key.
    public let keySeq: UInt64
    /// The `storebus.eventlog.v1.Event` in proto3 JSON, payload included.
    public let json: String
    /// The topics it is filed under (``EventTopics/all`` when its writer does not sort its events).
    public var topics: EventTopics = .all
}

/// The ordered event log kept in a service's own database (the transactional outbox).
///
/// Events are appended inside the transaction that makes the change they describe, so a change and
/// its event commit together or not at all. `seq` counts every event of the log and `key_seq` the
/// events of one key, both from 1 with no gaps: SQLite has a single writer, so a position is taken
/// only by a transaction that commits, and commit order is position order. Each event's JSON is built
/// once, at append, and served as stored.
public enum EventLog {
    /// Adds the event log's table to a migrator.
    public static func registerMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("storebus_event_log_v1") { db in
            try db.execute(
                cached: """
                    CREATE TABLE storebus_event (
                        seq INTEGER PRIMARY KEY,
                        stream_key TEXT NOT NULL,
                        key_seq INTEGER NOT NULL,
                        type TEXT NOT NULL,
                        time_ms INTEGER NOT NULL,
                        json TEXT NOT NULL,
                        UNIQUE (stream_key, key_seq)
                    )
                    """)
        }
        // Each event's topics (``EventTopics``), a bit each. The events already there are in all.
        migrator.registerMigration("storebus_event_log_v2_topics") { db in
            try db.execute(sql: "ALTER TABLE storebus_event ADD COLUMN topics INTEGER NOT NULL DEFAULT -1")
        }
        // Each event's shard: always 0 in SQLite, where a log is never sharded; the column is there
        // so that the statements are the same as PostgreSQL's.
        migrator.registerMigration("storebus_event_log_v3_shard") { db in
            try db.execute(sql: "ALTER TABLE storebus_event ADD COLUMN shard INTEGER NOT NULL DEFAULT 0")
        }
    }

    /// Appends an event to the log within the caller's write transaction, filed under `topics`.
    public static func append<Payload: SwiftProtobuf.Message>(_ db: any SQLConnection, key: String, payload: Payload, topics: EventTopics = .all) throws -> StoredEvent {
        try append(db, key: key, shard: 0, payload: payload, topics: topics, positions: nil)
    }

    /// Appends an event, its positions taken from `positions` when given (see ``EventPositions``).
    static func append<Payload: SwiftProtobuf.Message>(
        _ db: any SQLConnection, key: String, shard: UInt32, payload: Payload, topics: EventTopics, positions: (any LogPositions)?
    ) throws -> StoredEvent {
        let payloadJSON: [UInt8]
        do {
            payloadJSON = try payload.jsonUTF8Bytes()
        } catch {
            throw RPCError(.internalError, "could not encode event \(Payload.protoMessageName)", cause: error)
        }
        return try appendJSON(db, key: key, shard: shard, type: Payload.protoMessageName, topics: topics, positions: positions) { $0 += payloadJSON }
    }

    /// Appends an event whose payload is already proto3 JSON.
    public static func appendJSON(_ db: any SQLConnection, key: String, type: String, payloadJSON: String, topics: EventTopics = .all) throws -> StoredEvent {
        try appendJSON(db, key: key, shard: 0, type: type, topics: topics, positions: nil) { $0 += payloadJSON.utf8 }
    }

    /// Appends an event whose payload is already proto3 JSON, as UTF-8.
    public static func appendJSON(_ db: any SQLConnection, key: String, type: String, payloadJSON: [UInt8], topics: EventTopics = .all) throws -> StoredEvent {
        try appendJSON(db, key: key, shard: 0, type: type, topics: topics, positions: nil) { $0 += payloadJSON }
    }

    /// Appends an event whose payload `writePayload` appends to the record's JSON, as proto3 JSON:
    /// the record is put together in one buffer, the payload written into it rather than into a
    /// string of its own that is then copied. With `positions` (the log's one writer's), the event's
    /// positions come from there rather than from the table.
    static func appendJSON(
        _ db: any SQLConnection, key: String, shard: UInt32, type: String, topics: EventTopics, positions: (any LogPositions)?,
        payload writePayload: (inout [UInt8]) throws -> Void
    ) throws -> StoredEvent {
        let (seq, keySeq) = try positions?.take(db, key: key, shard: shard) ?? readPositions(db, key: key, shard: shard)
        do {
            let timeMS = EpochMilliseconds.now
            var record: [UInt8] = []
            record.reserveCapacity(1024)
            record += #"{"seq":""#.utf8
            record += String(seq).utf8
            if shard != 0 {
                record += #"","shard":"#.utf8
                record += String(shard).utf8
                record += #","key":"#.utf8
            } else {
                record += #"","key":"#.utf8
            }
            JSONText.appendQuoted(key, to: &record)
            record += #","keySeq":""#.utf8
            record += String(keySeq).utf8
            record += #"","type":"#.utf8
            JSONText.appendQuoted(type, to: &record)
            record += #","time":""#.utf8
            JSONText.appendMillisecondTimestamp(timeMS, to: &record)
            record += #"","payload":"#.utf8
            try writePayload(&record)
            record.append(UInt8(ascii: "}"))
            let json = String(decoding: record, as: UTF8.self)
            try db.execute(cached: insertSQL) {
                $0.int(Int64(shard))
                $0.int(Int64(seq))
                $0.text(key)
                $0.int(Int64(keySeq))
                $0.text(type)
                $0.int(timeMS)
                $0.text(json)
                $0.int(topics.rawValue)
            }
            return StoredEvent(shard: shard, seq: seq, key: key, keySeq: keySeq, json: json, topics: topics)
        } catch {
            // The positions taken were not used: the next append reads them again.
            positions?.forget()
            throw error
        }
    }

    static let insertSQL: CachedSQL = "INSERT INTO storebus_event (shard, seq, stream_key, key_seq, type, time_ms, json, topics) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    static let positionsSQL: CachedSQL = """
        SELECT (SELECT COALESCE(MAX(seq), 0) + 1 FROM storebus_event WHERE shard = ?),
               (SELECT COALESCE(MAX(key_seq), 0) + 1 FROM storebus_event WHERE stream_key = ?)
        """

    /// The next positions of `shard` and of `key`, read from the table.
    static func readPositions(_ db: any SQLConnection, key: String, shard: UInt32) throws -> (seq: UInt64, keySeq: UInt64) {
        let positions = try db.fetchFirst(
            cached: positionsSQL,
            bind: {
                $0.int(Int64(shard))
                $0.text(key)
            }
        ) { row in (seq: UInt64(row.int64(0)), keySeq: UInt64(row.int64(1))) }
        guard let positions else {
            throw RPCError(.internalError, "the event log's next position could not be read")
        }
        return positions
    }

    /// Up to `limit` events after `position`: of the whole log when `key` is empty (by seq), of one
    /// key otherwise (by key seq). With `through`, only events at or before that log position (the
    /// durable ones, see ``StoreDatabase/durableEventSeq``): within a key too, they come first.
    public static func read(_ db: any SQLConnection, key: String, shard: UInt32 = 0, after position: UInt64, limit: Int, through last: UInt64 = .max) throws -> [StoredEvent] {
        // Positions are SQLite integers: none lies past Int64.max (and binding one past it would trap).
        guard position < UInt64(Int64.max) else { return [] }
        let last = Int64(clamping: last)
        var events: [StoredEvent] = []
        if key.isEmpty {
            try db.forEachRow(
                cached: readSQL,
                bind: {
                    $0.int(Int64(shard)); $0.int(Int64(position)); $0.int(last); $0.int(limit)
                }
            ) { events.append(event($0)) }
        } else {
            try db.forEachRow(
                cached: readKeySQL,
                bind: {
                    $0.text(key); $0.int(Int64(position)); $0.int(last); $0.int(limit)
                }
            ) { events.append(event($0)) }
        }
        return events
    }

    static let readSQL: CachedSQL = "SELECT seq, stream_key, key_seq, json, shard FROM storebus_event WHERE shard = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
    static let readKeySQL: CachedSQL = "SELECT seq, stream_key, key_seq, json, shard FROM storebus_event WHERE stream_key = ? AND key_seq > ? AND seq <= ? ORDER BY key_seq LIMIT ?"
    static let readTopicsSQL: CachedSQL =
        "SELECT seq, stream_key, key_seq, json, shard FROM storebus_event WHERE shard = ? AND seq > ? AND seq <= ? AND topics & ? != 0 ORDER BY seq LIMIT ?"
    static let readKeyTopicsSQL: CachedSQL =
        "SELECT seq, stream_key, key_seq, json, shard FROM storebus_event WHERE stream_key = ? AND key_seq > ? AND key_seq <= ? AND topics & ? != 0 ORDER BY key_seq LIMIT ?"
    static let headSQL: CachedSQL = "SELECT seq FROM storebus_event WHERE shard = ? AND seq <= ? ORDER BY seq DESC LIMIT 1"
    static let keyHeadSQL: CachedSQL = "SELECT key_seq FROM storebus_event WHERE stream_key = ? AND seq <= ? ORDER BY key_seq DESC LIMIT 1"

    /// The event of a row of the read statements (seq, stream_key, key_seq, json, shard).
    private static func event(_ row: StatementColumns) -> StoredEvent {
        StoredEvent(shard: UInt32(truncatingIfNeeded: row.int64(4)), seq: UInt64(row.int64(0)), key: row.text(1), keySeq: UInt64(row.int64(2)), json: row.text(3))
    }

    /// A page of ``read(_:key:after:limit:through:)`` in any of `topics`, up to `head` (the log's or
    /// the key's, ``head(_:key:through:)``), and the position it read through: at most `scan`
    /// positions after `position` are looked at (so that a follower of a rare topic is answered in
    /// bounded time, and steps on), and fewer than `limit` events found means every position up to
    /// the returned one was read (and the others are in none of the topics).
    public static func read(
        _ db: any SQLConnection, key: String, shard: UInt32 = 0, after position: UInt64, limit: Int, head: UInt64, topics: EventTopics, scan: UInt64
    ) throws -> (events: [StoredEvent], through: UInt64) {
        guard position < UInt64(Int64.max) else { return ([], position) }
        let bound = min(head, position.addingReportingOverflow(scan).overflow ? .max : position + scan)
        guard bound > position else { return ([], position) }
        var events: [StoredEvent] = []
        let bound64 = Int64(clamping: bound)
        if key.isEmpty {
            try db.forEachRow(
                cached: readTopicsSQL,
                bind: {
                    $0.int(Int64(shard)); $0.int(Int64(position)); $0.int(bound64); $0.int(topics.rawValue); $0.int(limit)
                }
            ) { events.append(event($0)) }
        } else {
            try db.forEachRow(
                cached: readKeyTopicsSQL,
                bind: {
                    $0.text(key); $0.int(Int64(position)); $0.int(bound64); $0.int(topics.rawValue); $0.int(limit)
                }
            ) {
                events.append(event($0))
            }
        }
        guard events.count == limit, let final = events.last else { return (events, bound) }
        return (events, key.isEmpty ? final.seq : final.keySeq)
    }

    /// The newest position: seq of the whole log, or key seq of one key (0 when empty). With
    /// `through`, the newest at or before that log position.
    public static func head(_ db: any SQLConnection, key: String, shard: UInt32 = 0, through last: UInt64 = .max) throws -> UInt64 {
        // Newest first through the key's index (or the table), stopping at the first event not past
        // `through`: at most the few events not yet durable are stepped over.
        let last = Int64(clamping: last)
        if key.isEmpty {
            return try db.fetchFirst(
                cached: headSQL,
                bind: {
                    $0.int(Int64(shard)); $0.int(last)
                }
            ) { UInt64($0.int64(0)) } ?? 0
        }
        return try db.fetchFirst(
            cached: keyHeadSQL,
            bind: {
                $0.text(key); $0.int(last)
            }
        ) { UInt64($0.int64(0)) } ?? 0
    }
}
