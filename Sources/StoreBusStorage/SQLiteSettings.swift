import CSQLiteSettings
import StoreBus

/// SQLite settings for the whole process, made once, before the first ``StoreDatabase`` opens.
enum SQLiteSettings {
    /// Whether each setting took: memory statistics off (false when SQLite had already initialized,
    /// a connection opened elsewhere first, which leaves them on), and WAL writes gathered.
    ///
    /// With statistics on (SQLite's default), each of its allocations and frees takes a mutex for
    /// the whole process to count it, and Debian's build has no lookaside memory, so statements
    /// allocate often: about 220 allocations per purchase flow in the payment queue. StoreBus reads
    /// no statistics and sets no soft heap limit, which are what they serve.
    ///
    /// The WAL shim (see storebus_sqlite.h) writes each commit's frames to the WAL in one system
    /// call rather than two per frame. It is registered after the statistics are turned off: finding
    /// the default VFS initializes SQLite.
    static let applied: (memoryStatisticsOff: Bool, walWritesGathered: Bool) = {
        let statisticsOff = storebus_sqlite3_stop_memory_statistics() == SQLITE_OK
        // A fast path: with them off, SQLite's own VFS writes the WAL (see FastPaths).
        guard FastPaths.enabled else { return (statisticsOff, false) }
        return (statisticsOff, storebus_sqlite3_register_wal_coalescing() == SQLITE_OK)
    }()
}
