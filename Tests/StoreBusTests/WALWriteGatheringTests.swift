import CSQLiteSettings
import Foundation
import GRDB
import StoreBusServer
import StoreBusTesting
import Testing

@Suite("SQLite's WAL writes gathered (the VFS shim)")
struct WALWriteGatheringTests {
    /// The WAL file's bytes.
    static func walBytes(_ path: String) throws -> [UInt8] {
        try Array(Data(contentsOf: URL(fileURLWithPath: path + "-wal")))
    }

    static func bigEndian(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    @Test(
        "commits of every size, from one frame to more than the shim gathers at once, are in the WAL file when they return and are read by another connection, whether the commit syncs or not",
        arguments: ["FULL", "NORMAL"])
    func commitsReachTheFile(synchronous: String) throws {
        #expect(storebus_sqlite3_register_wal_coalescing() == SQLITE_OK)
        let vfs = try #require(sqlite3_vfs_find(nil))
        #expect(String(cString: vfs.pointee.zName) == "storebus-wal-coalescing")

        let directory = try TemporaryDirectory(prefix: "wal-gather")
        defer { directory.remove() }
        let path = directory.path("gather.sqlite")
        var configuration = Configuration()
        // No checkpoint: the WAL only grows, so its last frame is the last commit's. With NORMAL a
        // commit does not sync (as the services' writers, whose commits a thread of their own syncs):
        // no sync writes the gathered bytes out for it.
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
        }
        let writer = try DatabaseQueue(path: path, configuration: configuration)
        try writer.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "CREATE TABLE blob (id INTEGER PRIMARY KEY, bytes BLOB NOT NULL)")
        }
        var readOnly = Configuration()
        readOnly.readonly = true
        let reader = try DatabaseQueue(path: path, configuration: readOnly)
        let pageSize = try writer.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } ?? 0
        #expect(pageSize > 0)

        // One page, a few, past the 128 KiB the unix VFS takes in one write, past the 1 MiB gathered.
        for (id, size) in [10, 5_000, 300_000, 3_000_000, 10].enumerated() {
            let bytes = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ id) })
            try writer.write { db in try db.execute(sql: "INSERT INTO blob (id, bytes) VALUES (?, ?)", arguments: [id, bytes]) }

            let wal = try Self.walBytes(path)
            let frameBytes = 24 + pageSize
            #expect(wal.count > 32 && (wal.count - 32) % frameBytes == 0, "a whole number of frames after commit \(id): \(wal.count) bytes")
            let last = 32 + (wal.count - 32) / frameBytes * frameBytes - frameBytes
            #expect(last >= 32)
            if last >= 32 {
                // The commit frame: it holds the database size, and the WAL's salts.
                #expect(Self.bigEndian(wal, last + 4) != 0, "the file ends with a commit frame after commit \(id)")
                #expect(wal[last + 8..<last + 16] == wal[16..<24], "the commit frame is of this WAL after commit \(id)")
            }
            let read = try reader.read { db in try Row.fetchOne(db, sql: "SELECT length(bytes) AS length, bytes FROM blob WHERE id = ?", arguments: [id]) }
            #expect(read?["length"] as Int? == size, "commit \(id) is seen by another connection")
            #expect(read?["bytes"] as Data? == bytes)
        }
        try reader.close()
        try writer.close()
    }
}
