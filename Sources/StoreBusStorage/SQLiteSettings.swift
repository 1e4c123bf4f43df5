import CSQLiteSettings

/// SQLite settings for the whole process, made once, before the first ``StoreDatabase`` opens.
enum SQLiteSettings {
    /// Turns SQLite's memory statistics off; false when SQLite had already initialized (a
    /// connection opened elsewhere first), which leaves them on and changes nothing else.
    ///
    /// With statistics on (SQLite's default), each of its allocations and frees takes a mutex for
    /// the whole process to count it, and Debian's build has no lookaside memory, so statements
    /// allocate often: about 220 allocations per purchase flow in the payment queue. StoreBus reads
    /// no statistics and sets no soft heap limit, which are what they serve.
    static let applied: Bool = storebus_sqlite3_stop_memory_statistics() == SQLITE_OK
}
