import Foundation
import Logging
import NIOCore
import PostgresNIO
import StoreBus
import StoreBusStorage

/// One PostgreSQL connection as a store's ``SQLConnection``: each statement is sent with its
/// parameters numbered as PostgreSQL takes them (``CachedSQL/numbered``) and its values bound as
/// they were kept, and its answer awaited on the caller's thread. Used from one thread at a time,
/// never an event loop's: the writer's committer, a worker of ``PostgresDatabase``.
final class PostgresSession: SQLConnection {
    let connection: PostgresConnection
    let logger: Logger
    /// Longest wait for an answer (``PostgresSettings/answerTimeoutSeconds``).
    let answerTimeout: Duration
    private(set) var changesCount = 0

    init(connection: PostgresConnection, answerTimeout: Duration, logger: Logger) {
        self.connection = connection
        self.answerTimeout = answerTimeout
        self.logger = logger
    }

    var engine: SQLEngine { .postgres }

    func execute(cached sql: CachedSQL, bind: (inout StatementParameters) throws -> Void) throws {
        _ = try run(sql, bind: bind)
    }

    func fetchFirst<T>(cached sql: CachedSQL, bind: (inout StatementParameters) throws -> Void, read: (StatementColumns) throws -> T) throws -> T? {
        guard let row = try run(sql, bind: bind).rows.first else { return nil }
        return try read(try Self.columns(row))
    }

    func forEachRow(cached sql: CachedSQL, bind: (inout StatementParameters) throws -> Void, read: (StatementColumns) throws -> Void) throws {
        for row in try run(sql, bind: bind).rows { try read(try Self.columns(row)) }
    }

    /// Runs SQL of its own (a transaction's BEGIN, a schema's statements), without parameters.
    func run(_ sql: String) throws {
        _ = try query(PostgresQuery(unsafeSQL: sql))
    }

    private func run(_ sql: CachedSQL, bind: (inout StatementParameters) throws -> Void) throws -> PostgresQueryResult {
        var parameters = StatementParameters.keepingValues()
        try bind(&parameters)
        let values = parameters.values ?? []
        var binds = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .null: binds.appendNull()
            case .integer(let value): binds.append(value)
            case .real(let value): binds.append(value)
            case .text(let value): binds.append(value)
            case .blob(let value): binds.append(ByteBuffer(bytes: value))
            }
        }
        let result = try query(PostgresQuery(unsafeSQL: sql.numbered, binds: binds))
        changesCount = result.metadata.rows ?? 0
        return result
    }

    private func query(_ query: PostgresQuery) throws -> PostgresQueryResult {
        let answer = connection.query(query, logger: logger)
        let answered = DispatchSemaphore(value: 0)
        answer.whenComplete { _ in answered.signal() }
        if answered.wait(timeout: .now() + .milliseconds(Int(answerTimeout / .milliseconds(1)))) == .timedOut {
            // Seen when a primary was killed and its pg_auto_failover keeper with it: the query's
            // answer never came, nor an error, with the connection's socket gone.
            let closing: EventLoopFuture<Void> = connection.close()
            _ = closing
            throw PostgresFailure(connectionLost: "no answer in \(answerTimeout): the connection is given up")
        }
        do {
            return try answer.wait()
        } catch let error as PSQLError {
            throw PostgresFailure(error)
        }
    }

    /// A row PostgreSQL sent, as columns.
    static func columns(_ row: PostgresRow) throws -> StatementColumns {
        var values: [SQLValue] = []
        var names: [String] = []
        for cell in row {
            values.append(try value(cell))
            names.append(cell.columnName)
        }
        return StatementColumns(values: values, names: names)
    }

    /// A cell as a value: integers and booleans as integers (as SQLite keeps them), floating-point
    /// numbers, numerics (an aggregate's) as integers when whole, bytea as bytes, the rest as text.
    static func value(_ cell: PostgresCell) throws -> SQLValue {
        guard cell.bytes != nil else { return .null }
        switch cell.dataType {
        case .int2, .int4, .int8: return .integer(try cell.decode(Int64.self))
        case .bool: return .integer(try cell.decode(Bool.self) ? 1 : 0)
        case .float4, .float8: return .real(try cell.decode(Double.self))
        case .bytea: return .blob(try cell.decode(Data.self))
        case .numeric:
            let number = try cell.decode(Decimal.self)
            let whole = NSDecimalNumber(decimal: number)
            if let exact = Int64(exactly: whole.doubleValue), Decimal(exact) == number { return .integer(exact) }
            return .real(whole.doubleValue)
        default: return .text(try cell.decode(String.self))
        }
    }
}

/// An error PostgreSQL or the connection to it gave, with what the server said.
public struct PostgresFailure: Error, CustomStringConvertible {
    /// The SQLSTATE, when the server answered with one (`23505`: a unique key taken; `40001`: a
    /// serialization failure).
    public let sqlState: String?
    /// Whether the connection is gone (closed, refused, cut): the next use connects again.
    public let connectionLost: Bool
    public let description: String

    init(_ error: PSQLError) {
        sqlState = error.serverInfo?[.sqlState]
        switch error.code {
        case .serverClosedConnection, .connectionError, .uncleanShutdown, .clientClosedConnection: connectionLost = true
        // The server shutting down or not yet up (57P01-57P03), or a standby now, as a demoted
        // primary is (25006, a read-only transaction): the primary is elsewhere; connect again.
        default: connectionLost = ["57P01", "57P02", "57P03", "25006"].contains(sqlState ?? "")
        }
        let message = error.serverInfo?[.message] ?? "\(error.code)"
        let detail = error.serverInfo?[.detail].map { " (\($0))" } ?? ""
        description = "PostgreSQL: \(message)\(detail)\(sqlState.map { " [SQLSTATE \($0)]" } ?? "")"
    }

    init(connectionLost message: String) {
        sqlState = nil
        connectionLost = true
        description = "PostgreSQL: \(message)"
    }
}
