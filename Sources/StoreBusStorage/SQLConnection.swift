import Foundation
import GRDB

// The storage seam below a store: the statements a store's code runs, whichever engine runs them.
// A store (the payment queue's, a follower's) is written once, against `SQLConnection`, in the SQL
// both engines take; SQLite's connection is GRDB's `Database` (the direct statements of
// DirectStatements.swift), PostgreSQL's is `PostgresConnection` in StoreBusPostgres.

/// Which engine runs a connection's statements.
public enum SQLEngine: String, Sendable, Codable, CaseIterable {
    case sqlite
    case postgres
}

/// One value of a parameter or of a column, whichever engine it goes to or comes from.
public enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)

    /// The value as an integer, converted as SQLite converts it (0 for NULL, text that is no number
    /// and blobs).
    public var int64: Int64 {
        switch self {
        case .integer(let value): value
        case .real(let value): Int64(exactly: value.rounded(.towardZero)) ?? 0
        case .text(let value): Int64(value) ?? Double(value).flatMap { Int64(exactly: $0.rounded(.towardZero)) } ?? 0
        case .null, .blob: 0
        }
    }

    /// The value as a floating-point number (0 for NULL, text that is no number and blobs).
    public var double: Double {
        switch self {
        case .integer(let value): Double(value)
        case .real(let value): value
        case .text(let value): Double(value) ?? 0
        case .null, .blob: 0
        }
    }

    /// The value as text (empty for NULL; a blob's bytes as UTF-8).
    public var text: String {
        switch self {
        case .null: ""
        case .integer(let value): String(value)
        case .real(let value): String(value)
        case .text(let value): value
        case .blob(let value): String(decoding: value, as: UTF8.self)
        }
    }

    /// The value as bytes (empty for NULL; text as its UTF-8).
    public var data: Data {
        switch self {
        case .blob(let value): value
        case .text(let value): Data(value.utf8)
        case .null: Data()
        case .integer, .real: Data(text.utf8)
        }
    }

    /// GRDB's value.
    public var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let value): value.databaseValue
        case .real(let value): value.databaseValue
        case .text(let value): value.databaseValue
        case .blob(let value): value.databaseValue
        }
    }

    /// GRDB's value as one of ours.
    public init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let value): self = .integer(value)
        case .double(let value): self = .real(value)
        case .string(let value): self = .text(value)
        case .blob(let value): self = .blob(value)
        }
    }
}

/// A Swift value bound as a statement parameter.
public protocol SQLArgument: Sendable {
    var sqlValue: SQLValue { get }
}

extension String: SQLArgument {
    public var sqlValue: SQLValue { .text(self) }
}

extension Int64: SQLArgument {
    public var sqlValue: SQLValue { .integer(self) }
}

extension Int: SQLArgument {
    public var sqlValue: SQLValue { .integer(Int64(self)) }
}

extension UInt32: SQLArgument {
    public var sqlValue: SQLValue { .integer(Int64(self)) }
}

extension Int32: SQLArgument {
    public var sqlValue: SQLValue { .integer(Int64(self)) }
}

/// A position or a count: SQLite and PostgreSQL integers are signed 64-bit, so one past Int64.max
/// is bound as Int64.max (no position of a log reaches it).
extension UInt64: SQLArgument {
    public var sqlValue: SQLValue { .integer(Int64(clamping: self)) }
}

/// 1 or 0, as GRDB stores a Bool (the schemas keep flags as integers in both engines).
extension Bool: SQLArgument {
    public var sqlValue: SQLValue { .integer(self ? 1 : 0) }
}

extension Double: SQLArgument {
    public var sqlValue: SQLValue { .real(self) }
}

extension Data: SQLArgument {
    public var sqlValue: SQLValue { .blob(self) }
}

extension Optional: SQLArgument where Wrapped: SQLArgument {
    public var sqlValue: SQLValue { self?.sqlValue ?? .null }
}

/// A Swift value read from a column.
public protocol SQLColumnValue {
    /// The value of `value`; nil when it is NULL and the type has no NULL (which the reader of a
    /// row treats as a broken schema).
    static func fromSQL(_ value: SQLValue) -> Self?
}

extension String: SQLColumnValue {
    public static func fromSQL(_ value: SQLValue) -> String? { value == .null ? nil : value.text }
}

extension Int64: SQLColumnValue {
    public static func fromSQL(_ value: SQLValue) -> Int64? { value == .null ? nil : value.int64 }
}

extension Int: SQLColumnValue {
    public static func fromSQL(_ value: SQLValue) -> Int? { value == .null ? nil : Int(value.int64) }
}

extension Int32: SQLColumnValue {
    public static func fromSQL(_ value: SQLValue) -> Int32? { value == .null ? nil : Int32(truncatingIfNeeded: value.int64) }
}

extension UInt64: SQLColumnValue {
    public static func fromSQL(_ value: SQLValue) -> UInt64? { value == .null ? nil : UInt64(clamping: value.int64) }
}

extension Bool: SQLColumnValue {
    public static func fromSQL(_ value: SQLValue) -> Bool? { value == .null ? nil : value.int64 != 0 }
}

extension Double: SQLColumnValue {
    public static func fromSQL(_ value: SQLValue) -> Double? { value == .null ? nil : value.double }
}

extension Data: SQLColumnValue {
    public static func fromSQL(_ value: SQLValue) -> Data? { value == .null ? nil : value.data }
}

extension Optional: SQLColumnValue where Wrapped: SQLColumnValue {
    public static func fromSQL(_ value: SQLValue) -> Wrapped?? { .some(Wrapped.fromSQL(value)) }
}

/// One row read whole, its columns by name or by position.
public struct SQLRow: Sendable {
    /// The columns' names, in order.
    public let names: [String]
    /// The values, in the columns' order.
    public let values: [SQLValue]

    public init(names: [String], values: [SQLValue]) {
        self.names = names
        self.values = values
    }

    /// The row `columns` reads.
    public init(_ columns: StatementColumns) {
        self.init(columns, names: (0..<CInt(columns.count)).map { columns.name($0) })
    }

    /// The row `columns` reads, its columns' `names` known (a statement's rows share them).
    public init(_ columns: StatementColumns, names: [String]) {
        self.names = names
        values = (0..<CInt(columns.count)).map { columns.value($0) }
    }

    /// Column `name`'s value. A column the row lacks, or NULL read as a type without NULL, is a
    /// programming error (a statement and its reader that disagree), as in GRDB.
    @inlinable
    public subscript<T: SQLColumnValue>(_ name: String) -> T {
        guard let index = names.firstIndex(of: name) else { preconditionFailure("no column \(name) in the row: \(names)") }
        return self[index]
    }

    /// Column `index`'s value (see the subscript by name).
    @inlinable
    public subscript<T: SQLColumnValue>(_ index: Int) -> T {
        guard let value = T.fromSQL(values[index]) else { preconditionFailure("column \(names[index]) is NULL, read as \(T.self)") }
        return value
    }
}

/// The statements of one connection, inside the transaction (or the read) its caller opened: what a
/// store's code runs, on either engine. Parameters are bound by position (`?` in order, or `?N`);
/// rows are read by position, or whole as ``SQLRow``s.
public protocol SQLConnection: AnyObject {
    /// The engine, for the rare statement that cannot be written the same for both.
    var engine: SQLEngine { get }

    /// Runs `sql` with the parameters `bind` binds, to the end.
    func execute(cached sql: CachedSQL, bind: (inout StatementParameters) throws -> Void) throws

    /// The first row of `sql`, as `read` reads it; nil when there is none.
    func fetchFirst<T>(cached sql: CachedSQL, bind: (inout StatementParameters) throws -> Void, read: (StatementColumns) throws -> T) throws -> T?

    /// Every row of `sql`, each handed to `read` in turn.
    func forEachRow(cached sql: CachedSQL, bind: (inout StatementParameters) throws -> Void, read: (StatementColumns) throws -> Void) throws

    /// How many rows the last INSERT, UPDATE or DELETE changed.
    var changesCount: Int { get }
}

extension SQLConnection {
    /// Runs `sql` without parameters.
    public func execute(cached sql: CachedSQL) throws {
        try execute(cached: sql, bind: { _ in })
    }

    /// The first row of `sql` without parameters, as `read` reads it; nil when there is none.
    public func fetchFirst<T>(cached sql: CachedSQL, read: (StatementColumns) throws -> T) throws -> T? {
        try fetchFirst(cached: sql, bind: { _ in }, read: read)
    }

    /// Every row of `sql` without parameters, each handed to `read` in turn.
    public func forEachRow(cached sql: CachedSQL, read: (StatementColumns) throws -> Void) throws {
        try forEachRow(cached: sql, bind: { _ in }, read: read)
    }

    /// Runs `sql` with `arguments` bound in order.
    public func execute(cached sql: CachedSQL, arguments: [any SQLArgument]) throws {
        try execute(cached: sql, bind: { Self.bind(arguments, to: &$0) })
    }

    /// Every row of `sql` with `arguments`, whole.
    public func rows(cached sql: CachedSQL, arguments: [any SQLArgument] = []) throws -> [SQLRow] {
        var rows: [SQLRow] = []
        try forEachRow(cached: sql, bind: { Self.bind(arguments, to: &$0) }) { columns in
            // Every row of a statement has the first's columns: their names read once.
            rows.append(rows.first.map { SQLRow(columns, names: $0.names) } ?? SQLRow(columns))
        }
        return rows
    }

    /// The first row of `sql` with `arguments`, whole; nil when there is none.
    public func row(cached sql: CachedSQL, arguments: [any SQLArgument] = []) throws -> SQLRow? {
        try fetchFirst(cached: sql, bind: { Self.bind(arguments, to: &$0) }) { SQLRow($0) }
    }

    /// The first column of every row of `sql` with `arguments`.
    public func values<T: SQLColumnValue>(_ type: T.Type = T.self, cached sql: CachedSQL, arguments: [any SQLArgument] = []) throws -> [T] {
        var values: [T] = []
        try forEachRow(cached: sql, bind: { Self.bind(arguments, to: &$0) }) { columns in
            guard let value = T.fromSQL(columns.value(0)) else { preconditionFailure("NULL read as \(T.self): \(sql.sql)") }
            values.append(value)
        }
        return values
    }

    /// The first column of the first row of `sql` with `arguments`; nil when there is no row, or
    /// when the column is NULL.
    public func value<T: SQLColumnValue>(_ type: T.Type = T.self, cached sql: CachedSQL, arguments: [any SQLArgument] = []) throws -> T? {
        try fetchFirst(cached: sql, bind: { Self.bind(arguments, to: &$0) }) { T.fromSQL($0.value(0)) } ?? nil
    }

    private static func bind(_ arguments: [any SQLArgument], to parameters: inout StatementParameters) {
        for argument in arguments { parameters.value(argument.sqlValue) }
    }
}

extension Database: SQLConnection {
    public var engine: SQLEngine { .sqlite }
}

/// A service's database, whichever engine keeps it: reads, writes of their own, and the group
/// transactions of its log's writer (``EventLogWriter``). SQLite's is ``StoreDatabase``;
/// PostgreSQL's is `PostgresDatabase` in StoreBusPostgres.
public protocol SQLDatabase: AnyObject, Sendable {
    /// The engine.
    var engine: SQLEngine { get }

    /// Runs `body` in a read transaction (one snapshot for all its statements); returns once
    /// everything it could have seen is durable.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T

    /// ``read(_:)`` without waiting for what it saw to be durable: for a reader that bounds itself by
    /// ``durableEventSeq``.
    func readCommitted<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T

    /// Runs `body` in a write transaction of its own (outside the log writer's groups: for writes
    /// with no events) and returns once it is durable.
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T

    /// Writes state derived from another service's log (see ``FollowedLog``): ``write(_:)``, or a
    /// commit that need not wait for the disk where the engine allows it.
    func writeDerived<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T

    /// The last event position of the log that is durable (readers that cannot wait for a sync
    /// leave out the events after it).
    var durableEventSeq: UInt64 { get }

    /// Runs `body` in one transaction of the log writer's connection, on the caller's thread, and
    /// commits it; rolls it back when `body` throws (and rethrows). Only ``EventLogWriter`` calls
    /// it, one group at a time.
    func inGroupTransaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T

    /// Between two groups: the moment for the engine's housekeeping (SQLite's WAL checkpoint).
    func betweenGroups()

    /// The thread that makes the writer's commits durable, when the engine has one (SQLite's with
    /// ``Durability/syncThread``).
    var syncer: WALSyncer? { get }

    /// Closes the database's connections (a process stopping).
    func close() throws

    /// Where the writer of log `logName` takes its events' positions from: the engine's way of
    /// numbering them without gaps, in commit order.
    func logPositions(logName: String) -> any LogPositions

    /// How many shards log `logName` has (1: it is not sharded).
    func shardCount(logName: String) -> UInt32

    /// The shards of log `logName` this instance owns and may write, in order (all of them when the
    /// log is not shared with other instances).
    func ownedShards(logName: String) -> [UInt32]
}

extension SQLDatabase {
    /// ``read(_:)``: an engine whose commits are durable once made has nothing to wait for.
    public func readCommitted<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await read(body)
    }

    /// The positions of a log with one writer, in memory between appends (``EventPositions``).
    public func logPositions(logName: String) -> any LogPositions { EventPositions() }

    /// One: a log of this engine is not sharded.
    public func shardCount(logName: String) -> UInt32 { 1 }

    /// The one shard of a log that is not sharded.
    public func ownedShards(logName: String) -> [UInt32] { [0] }
}
