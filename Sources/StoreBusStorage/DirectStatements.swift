import Foundation
import GRDB
import GRDBSQLite
import StoreBus

// The writer's hot statements (the event log's append, a transaction's row) run through SQLite's C
// API on GRDB's cached statements: parameters are bound by position from Swift values, and a result
// row is read in place by position. GRDB's own path wraps each argument in an existential and
// binds it through nested closures, and builds a row whose column names it lowercases into a
// dictionary for every cursor it opens, whether or not a name is ever looked up: together about a
// fifth of the payment queue's instructions per purchase, more than SQLite's own work. The
// statements stay GRDB's (prepared once, in its cache, in its transactions); only binding, stepping
// and reading go around it, and each ends with the statement reset, as GRDB leaves it.

/// SQLite's "copy the value now" destructor for bound text and blobs.
private let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

/// The parameters of a statement, bound in order (the first call binds `?1`); see
/// `Database.execute(cached:bind:)`.
public struct StatementParameters {
    fileprivate let statement: SQLiteStatement?
    fileprivate var next: CInt = 1
    fileprivate var failure: CInt = SQLITE_OK
    /// The values, kept rather than bound here: with the fast paths off, for GRDB to bind
    /// (``Database/execute(cached:bind:)`` then runs the statement through GRDB); on another engine
    /// (PostgreSQL), for it to send. nil when they are bound to `statement` as they come.
    public internal(set) var values: [SQLValue]?

    fileprivate init(_ statement: SQLiteStatement, keepingValues: Bool = false) {
        self.statement = statement
        if keepingValues { values = [] }
    }

    /// Parameters whose values are kept, in order, for an engine other than SQLite to send.
    public static func keepingValues() -> StatementParameters {
        StatementParameters(values: [])
    }

    private init(values: [SQLValue]) {
        self.statement = nil
        self.values = values
    }

    /// Keeps `value` when values are kept; true when it did (nothing is to be bound here).
    private mutating func kept(_ value: SQLValue) -> Bool {
        guard values != nil else { return false }
        values!.append(value)
        next += 1
        return true
    }

    private mutating func bound(_ code: CInt) {
        if code != SQLITE_OK, failure == SQLITE_OK { failure = code }
        next += 1
    }

    /// Binds text, all of its bytes (an embedded NUL included), empty text as empty text.
    public mutating func text(_ value: String) {
        if kept(.text(value)) { return }
        var value = value
        let (statement, index) = (self.statement, next)
        bound(
            value.withUTF8 { bytes in
                bytes.withMemoryRebound(to: CChar.self) { chars in
                    // A null pointer would bind NULL, not empty text.
                    guard let start = chars.baseAddress else { return sqlite3_bind_text(statement, index, "", 0, transient) }
                    return sqlite3_bind_text(statement, index, start, CInt(chars.count), transient)
                }
            })
    }

    /// Binds text, or NULL for nil.
    public mutating func text(_ value: String?) {
        guard let value else { return null() }
        text(value)
    }

    public mutating func int(_ value: Int64) {
        if kept(.integer(value)) { return }
        bound(sqlite3_bind_int64(statement, next, value))
    }

    public mutating func int(_ value: Int) {
        int(Int64(value))
    }

    /// Binds an integer, or NULL for nil.
    public mutating func int(_ value: Int64?) {
        guard let value else { return null() }
        int(value)
    }

    /// Binds an integer, or NULL for nil.
    public mutating func int(_ value: Int?) {
        guard let value else { return null() }
        int(Int64(value))
    }

    /// Binds 1 or 0, as GRDB stores a Bool.
    public mutating func bool(_ value: Bool) {
        int(Int64(value ? 1 : 0))
    }

    /// Binds a blob, empty data as an empty blob (not NULL).
    public mutating func blob(_ value: Data) {
        if kept(.blob(value)) { return }
        let (statement, index) = (self.statement, next)
        guard !value.isEmpty else { return bound(sqlite3_bind_zeroblob(statement, index, 0)) }
        bound(value.withUnsafeBytes { bytes in sqlite3_bind_blob(statement, index, bytes.baseAddress, CInt(bytes.count), transient) })
    }

    public mutating func double(_ value: Double) {
        if kept(.real(value)) { return }
        bound(sqlite3_bind_double(statement, next, value))
    }

    /// Binds `value`, whichever kind it is.
    public mutating func value(_ value: SQLValue) {
        switch value {
        case .null: null()
        case .integer(let value): int(value)
        case .real(let value): double(value)
        case .text(let value): text(value)
        case .blob(let value): blob(value)
        }
    }

    public mutating func null() {
        if kept(.null) { return }
        bound(sqlite3_bind_null(statement, next))
    }
}

/// The current row of a statement, read in place by column position (0 first); valid only inside
/// the closure it is given to.
public struct StatementColumns {
    fileprivate let statement: SQLiteStatement?
    /// The row's values, when they were read already: with the fast paths off (the row GRDB read),
    /// or on another engine (the row PostgreSQL sent). nil when they are read from `statement`.
    private let values: [SQLValue]?
    /// The columns' names, with `values`.
    private let names: [String]

    fileprivate init(statement: SQLiteStatement) {
        self.statement = statement
        self.values = nil
        self.names = []
    }

    /// A row whose values were read already, the columns named `names`.
    public init(values: [SQLValue], names: [String]) {
        self.statement = nil
        self.values = values
        self.names = names
    }

    /// How many columns the row has.
    public var count: Int {
        if let values { return values.count }
        return Int(sqlite3_column_count(statement))
    }

    /// The name of column `index`, as the statement gives it.
    public func name(_ index: CInt) -> String {
        if values != nil { return names[Int(index)] }
        return sqlite3_column_name(statement, index).map { String(cString: $0) } ?? ""
    }

    /// Column `index` as a value of its own.
    public func value(_ index: CInt) -> SQLValue {
        if let values { return values[Int(index)] }
        switch sqlite3_column_type(statement, index) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, index))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, index))
        case SQLITE_BLOB: return .blob(data(index))
        default: return .text(text(index))
        }
    }

    public func isNull(_ index: CInt) -> Bool {
        if let values { return values[Int(index)] == .null }
        return sqlite3_column_type(statement, index) == SQLITE_NULL
    }

    public func int64(_ index: CInt) -> Int64 {
        if let values { return values[Int(index)].int64 }
        return sqlite3_column_int64(statement, index)
    }

    public func int(_ index: CInt) -> Int {
        Int(int64(index))
    }

    public func bool(_ index: CInt) -> Bool {
        int64(index) != 0
    }

    public func double(_ index: CInt) -> Double {
        if let values { return values[Int(index)].double }
        return sqlite3_column_double(statement, index)
    }

    public func optionalInt64(_ index: CInt) -> Int64? {
        isNull(index) ? nil : int64(index)
    }

    /// The column as text (empty for NULL).
    public func text(_ index: CInt) -> String {
        if let values { return values[Int(index)].text }
        // The pointer first, then its length: that order converts the value once.
        guard let characters = sqlite3_column_text(statement, index) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: characters, count: Int(sqlite3_column_bytes(statement, index))), as: UTF8.self)
    }

    public func optionalText(_ index: CInt) -> String? {
        isNull(index) ? nil : text(index)
    }

    /// The column as a byte array (empty for NULL): one copy, where `Data` and then an array were two.
    public func bytes(_ index: CInt) -> [UInt8] {
        if let values { return [UInt8](values[Int(index)].data) }
        let count = Int(sqlite3_column_bytes(statement, index))
        guard count > 0, let bytes = sqlite3_column_blob(statement, index) else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// The column as bytes (empty for NULL).
    public func data(_ index: CInt) -> Data {
        if let values { return values[Int(index)].data }
        guard let bytes = sqlite3_column_blob(statement, index) else { return Data() }
        return Data(bytes: bytes, count: Int(sqlite3_column_bytes(statement, index)))
    }
}

/// SQL that a connection runs often (the writer's statements of every purchase), with the statement
/// prepared for it remembered: ``Database/execute(cached:bind:)`` then finds it without looking its
/// text up in GRDB's statement cache, a dictionary keyed by the text, which hashed all of it every
/// time (about 1,000 instructions for a statement of the payment queue's, some 18 a purchase).
///
/// It remembers one connection's statement at a time (another connection's use takes its place) and
/// holds it weakly: the statement stays GRDB's, finalized when GRDB drops it (as a connection
/// closes), and then looked up again. A statement still alive belongs to a connection still open, so
/// the same connection pointer is the same connection.
public final class CachedSQL: ExpressibleByStringInterpolation, @unchecked Sendable {
    // Invariant for @unchecked Sendable: `connection`, `statement` and `numberedText` are read and
    // written only with `lock` held; `sql` is immutable.
    /// The SQL text.
    public let sql: String
    private let lock = NSLock()
    private var connection: SQLiteConnection?
    private weak var statement: Statement?
    private var numberedText: String?

    public init(_ sql: String) {
        self.sql = sql
    }

    /// The SQL with its parameters numbered as PostgreSQL takes them (``SQLDialect/numberedParameters(_:)``),
    /// worked out once.
    public var numbered: String {
        lock.lock()
        defer { lock.unlock() }
        if let numberedText { return numberedText }
        let text = SQLDialect.numberedParameters(sql)
        numberedText = text
        return text
    }

    public convenience init(stringLiteral sql: String) {
        self.init(sql)
    }

    /// SQL put together where it is run (each use prepares or finds its statement by its text).
    public convenience init(stringInterpolation: DefaultStringInterpolation) {
        self.init(String(stringInterpolation: stringInterpolation))
    }

    /// The statement of `db` for this SQL, from GRDB's statement cache the first time.
    func statement(in db: Database) throws -> Statement {
        guard FastPaths.enabled else { return try db.cachedStatement(sql: sql) }
        let connection = db.sqliteConnection
        lock.lock()
        if self.connection == connection, let statement {
            lock.unlock()
            return statement
        }
        lock.unlock()
        let statement = try db.cachedStatement(sql: sql)
        lock.lock()
        self.connection = connection
        self.statement = statement
        lock.unlock()
        return statement
    }
}

extension Database {
    /// Runs `sql` (prepared once, in GRDB's statement cache) with the parameters `bind` binds in
    /// order (none by default), to the end. Throws a DatabaseError when SQLite refuses it, or when `bind` binds more or
    /// fewer parameters than the statement has.
    public func execute(cached sql: String, bind: (inout StatementParameters) throws -> Void = { _ in }) throws {
        try execute(cachedStatement: cachedStatement(sql: sql), bind: bind)
    }

    /// ``execute(cached:bind:)`` for SQL whose statement is remembered with it (see ``CachedSQL``).
    public func execute(cached sql: CachedSQL, bind: (inout StatementParameters) throws -> Void = { _ in }) throws {
        try execute(cachedStatement: sql.statement(in: self), bind: bind)
    }

    private func execute(cachedStatement: Statement, bind: (inout StatementParameters) throws -> Void) throws {
        guard FastPaths.enabled else {
            // The plain way: GRDB binds the values and runs the statement.
            return try cachedStatement.execute(arguments: plainArguments(cachedStatement, bind: bind))
        }
        try step(cachedStatement, bind: bind) { statement, code in
            var code = code
            // A statement that returns rows (RETURNING) made its changes at the first step; the rest
            // only hands them over.
            while code == SQLITE_ROW { code = sqlite3_step(statement) }
            guard code == SQLITE_DONE else { throw stepError(code, statement) }
        }
    }

    /// The first row of `sql` (prepared once, in GRDB's statement cache) with the parameters `bind`
    /// binds in order, as `read` reads it; nil when there is none. Throws as
    /// ``execute(cached:bind:)`` does.
    public func fetchFirst<T>(cached sql: String, bind: (inout StatementParameters) throws -> Void = { _ in }, read: (StatementColumns) throws -> T) throws -> T? {
        try fetchFirst(cachedStatement: cachedStatement(sql: sql), bind: bind, read: read)
    }

    /// ``fetchFirst(cached:bind:read:)`` for SQL whose statement is remembered with it (see ``CachedSQL``).
    public func fetchFirst<T>(cached sql: CachedSQL, bind: (inout StatementParameters) throws -> Void = { _ in }, read: (StatementColumns) throws -> T) throws -> T? {
        try fetchFirst(cachedStatement: sql.statement(in: self), bind: bind, read: read)
    }

    /// Every row of `sql` (prepared once, in GRDB's statement cache) with the parameters `bind`
    /// binds in order, each handed to `read` in turn, as SQLite returns them. Throws as
    /// ``execute(cached:bind:)`` does.
    public func forEachRow(cached sql: CachedSQL, bind: (inout StatementParameters) throws -> Void = { _ in }, read: (StatementColumns) throws -> Void) throws {
        let cachedStatement = try sql.statement(in: self)
        guard FastPaths.enabled else {
            // The plain way: GRDB runs the statement and builds each row.
            for row in try Row.fetchAll(cachedStatement, arguments: plainArguments(cachedStatement, bind: bind)) {
                try read(Self.columns(of: row))
            }
            return
        }
        try step(cachedStatement, bind: bind) { statement, code in
            var code = code
            while code == SQLITE_ROW {
                try read(StatementColumns(statement: statement))
                code = sqlite3_step(statement)
            }
            guard code == SQLITE_DONE else { throw stepError(code, statement) }
        }
    }

    private func fetchFirst<T>(cachedStatement: Statement, bind: (inout StatementParameters) throws -> Void, read: (StatementColumns) throws -> T) throws -> T? {
        guard FastPaths.enabled else {
            // The plain way: GRDB runs the statement and builds the row.
            guard let row = try Row.fetchOne(cachedStatement, arguments: plainArguments(cachedStatement, bind: bind)) else { return nil }
            return try read(Self.columns(of: row))
        }
        return try step(cachedStatement, bind: bind) { statement, code in
            switch code {
            case SQLITE_ROW: return try read(StatementColumns(statement: statement))
            case SQLITE_DONE: return nil
            default: throw stepError(code, statement)
            }
        }
    }

    private func step<T>(_ cached: Statement, bind: (inout StatementParameters) throws -> Void, _ body: (SQLiteStatement, CInt) throws -> T) throws -> T {
        let statement = cached.sqliteStatement
        // GRDB resets a statement before it runs it, not after: one of its reads may have left it
        // mid-way. Reset again afterwards, whatever happens, so that it holds no read open.
        sqlite3_reset(statement)
        defer { sqlite3_reset(statement) }
        var parameters = StatementParameters(statement)
        try bind(&parameters)
        try checkBound(Int(parameters.next - 1), cached)
        guard parameters.failure == SQLITE_OK else {
            throw stepError(parameters.failure, statement)
        }
        return try body(statement, sqlite3_step(statement))
    }

    /// The values `bind` binds, as GRDB's arguments (the fast paths off); throws as ``step`` does
    /// when they are more or fewer than the statement's parameters.
    private func plainArguments(_ cached: Statement, bind: (inout StatementParameters) throws -> Void) throws -> StatementArguments {
        var parameters = StatementParameters(cached.sqliteStatement, keepingValues: true)
        try bind(&parameters)
        let values = parameters.values ?? []
        try checkBound(values.count, cached)
        return StatementArguments(values.map(\.databaseValue))
    }

    /// A row GRDB read, as columns (the fast paths off).
    private static func columns(of row: Row) -> StatementColumns {
        StatementColumns(values: row.databaseValues.map(SQLValue.init), names: Array(row.columnNames))
    }

    /// Throws SQLITE_MISUSE when `count` parameters were bound and the statement has another number.
    private func checkBound(_ count: Int, _ cached: Statement) throws {
        let expected = Int(sqlite3_bind_parameter_count(cached.sqliteStatement))
        guard count == expected else {
            throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "\(count) parameters bound, the statement has \(expected)", sql: cached.sql)
        }
    }

    private func stepError(_ code: CInt, _ statement: SQLiteStatement) -> DatabaseError {
        let connection = sqlite3_db_handle(statement)
        return DatabaseError(resultCode: ResultCode(rawValue: code), message: connection.map { String(cString: sqlite3_errmsg($0)) }, sql: String(cString: sqlite3_sql(statement)))
    }
}
