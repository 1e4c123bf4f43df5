import Foundation
import GRDB

/// How durable commits are: SQLite's `synchronous` setting in WAL mode.
public enum Durability: String, Sendable, Codable {
    /// `synchronous=FULL`: a commit is on disk when the call returns, even across power loss.
    case full
    /// `synchronous=NORMAL`: a commit survives a crash of the process, not always a power loss.
    case normal
}

/// A service's own SQLite database: one file in its data directory, WAL mode, opened through GRDB.
///
/// Only the owning service ever opens it; other services ask over the bus. Every change a service
/// makes is written with the events that describe it in one transaction (see ``EventLogWriter``).
public final class StoreDatabase: Sendable {
    /// The GRDB pool: one writer, concurrent readers (WAL).
    public let pool: DatabasePool
    /// The database file.
    public let path: String

    /// Opens (creating if needed) `<directory>/<name>.sqlite` and runs `migrator`.
    ///
    /// The event log's tables are added to every database by ``EventLog/registerMigrations(_:)``,
    /// which the caller's migrator should include.
    public init(directory: URL, name: String, durability: Durability = .full, migrator: DatabaseMigrator) throws {
        path = directory.appendingPathComponent("\(name).sqlite").path
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(durability == .full ? "FULL" : "NORMAL")")
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        try migrator.migrate(pool)
    }

    /// A read-only connection of its own, for one thread that reads small pages synchronously (an RPC
    /// server's loop). In WAL mode it never waits for the writer, and a connection used by one thread
    /// only never waits for another: its reads run on the calling thread, without the pool's hops.
    public func makeReadOnlyConnection() throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        configuration.label = "storebus.reader"
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    /// Waits for running statements and closes every connection.
    public func close() throws {
        try pool.close()
    }
}
