import Foundation
import GRDB
import StoreBusStorage
import StoreBusTesting
import Testing

@Suite("Direct statements (SQLite's C API on GRDB's cached statements)")
struct DirectStatementsTests {
    private static func database() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, s TEXT, n INTEGER, b BLOB, f INTEGER, UNIQUE (s))")
        }
        return queue
    }

    private static let insert = "INSERT INTO t (id, s, n, b, f) VALUES (?, ?, ?, ?, ?)"

    @Test(
        "values bound directly are stored as GRDB stores them and read back the same, directly and through GRDB's rows: accents and emoji, empty text and blobs (not NULL), NULLs, the integer extremes; text with NUL whole"
    )
    func roundTrip() throws {
        let queue = try Self.database()
        let texts: [String?] = ["", "plain", "a\u{0}b", "é中😀", String(repeating: "x", count: 10_000), nil]
        let numbers: [Int64?] = [0, 1, -1, Int64.max, Int64.min, nil]
        let blobs: [Data] = [Data(), Data([0]), Data([0, 255, 1]), Data(repeating: 7, count: 5000)]
        try queue.write { db in
            for (index, text) in texts.enumerated() {
                let number = numbers[index % numbers.count]
                let blob = blobs[index % blobs.count]
                try db.execute(cached: Self.insert) {
                    $0.int(index)
                    $0.text(text)
                    $0.int(number)
                    $0.blob(blob)
                    $0.bool(index % 2 == 1)
                }
                let row = try #require(try Row.fetchOne(db, sql: "SELECT s, n, b, f, typeof(s), typeof(b), hex(s) FROM t WHERE id = ?", arguments: [index]))
                // GRDB reads text up to a NUL (a C string): compare the bytes stored.
                #expect(row[6] as String == (text ?? "").utf8.map { String(format: "%02X", $0) }.joined())
                if text?.utf8.contains(0) != true { #expect(row[0] as String? == text) }
                #expect(row[1] as Int64? == number)
                #expect(row[2] as Data? == blob, "row \(index)")
                #expect(row[3] as Bool == (index % 2 == 1))
                #expect(row[4] as String == (text == nil ? "null" : "text"))
                #expect(row[5] as String == "blob", "an empty blob stays a blob")
                let direct = try db.fetchFirst(cached: "SELECT s, n, b, f FROM t WHERE id = ?", bind: { $0.int(index) }) { columns in
                    (columns.optionalText(0), columns.optionalInt64(1), columns.data(2), columns.bool(3), columns.isNull(0))
                }
                let read = try #require(direct)
                #expect(read.0 == text && read.1 == number && read.2 == blob && read.3 == (index % 2 == 1) && read.4 == (text == nil))
            }
        }
    }

    @Test("every row, read in place one after another, is GRDB's row: blobs as byte arrays (empty and NULL as none), text, integers; no row, no call")
    func forEachRow() throws {
        let queue = try Self.database()
        try queue.write { db in
            for index in 0..<300 {
                try db.execute(cached: Self.insert) {
                    $0.int(index)
                    $0.text(index % 7 == 0 ? nil : "row \(index) é😀")
                    $0.int(Int64(index) * 1_000_003)
                    $0.blob(Data((0..<(index % 50)).map { UInt8(($0 * 31 + index) & 0xff) }))
                    $0.bool(index % 2 == 0)
                }
            }
            try db.execute(sql: "UPDATE t SET b = NULL WHERE id % 11 = 0")
            let all: CachedSQL = "SELECT s, n, b FROM t WHERE id >= ? ORDER BY id"
            var direct: [(String?, Int64, [UInt8])] = []
            try db.forEachRow(cached: all, bind: { $0.int(0) }) { direct.append(($0.optionalText(0), $0.int64(1), $0.bytes(2))) }
            let rows = try Row.fetchAll(db, sql: "SELECT s, n, b FROM t ORDER BY id")
            #expect(direct.count == rows.count && rows.count == 300)
            for (read, row) in zip(direct, rows) {
                #expect(read.0 == row[0] && read.1 == row[1] && read.2 == [UInt8]((row[2] as Data?) ?? Data()))
            }
            var calls = 0
            try db.forEachRow(cached: all, bind: { $0.int(1_000) }) { _ in calls += 1 }
            #expect(calls == 0)
        }
    }

    @Test("a row with no match is nil; RETURNING hands its row over once the change is made; execute steps a statement that returns rows to its end")
    func rowsAndReturning() throws {
        let queue = try Self.database()
        try queue.write { db in
            #expect(try db.fetchFirst(cached: "SELECT id FROM t WHERE id = ?", bind: { $0.int(1) }) { $0.int(0) } == nil)
            let id = try db.fetchFirst(cached: "INSERT INTO t (s) VALUES (?) RETURNING id", bind: { $0.text("r") }) { $0.int64(0) }
            #expect(id == 1)
            try db.execute(cached: "UPDATE t SET n = n + 1 WHERE id IN (?, ?) RETURNING id") {
                $0.int(1)
                $0.int(2)
            }
            try db.execute(cached: "INSERT INTO t (s) VALUES ('a'), ('b') RETURNING id")
            #expect(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") == 3)
        }
    }

    @Test("binding more or fewer parameters than the statement has is refused before it runs, and the statement works afterwards")
    func parameterCount() throws {
        let queue = try Self.database()
        try queue.write { db in
            for count in [4, 6] {
                let error = #expect(throws: DatabaseError.self) {
                    try db.execute(cached: Self.insert) { parameters in
                        for index in 0..<count { parameters.int(index) }
                    }
                }
                #expect(error?.resultCode == .SQLITE_MISUSE)
                #expect(error?.message?.contains("\(count) parameters bound, the statement has 5") == true, "\(String(describing: error))")
            }
            #expect(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") == 0)
            try db.execute(cached: Self.insert) {
                $0.int(1)
                $0.text("one")
                $0.int(1)
                $0.blob(Data())
                $0.bool(true)
            }
            #expect(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") == 1)
        }
    }

    @Test("a statement SQLite refuses throws its result code and message, undoes nothing else of the transaction, and runs again afterwards")
    func refusedStatement() throws {
        let queue = try Self.database()
        try queue.write { db in
            try db.execute(sql: "INSERT INTO t (id, s) VALUES (1, 'taken')")
            let error = #expect(throws: DatabaseError.self) {
                try db.execute(cached: "INSERT INTO t (id, s) VALUES (?, ?)") {
                    $0.int(2)
                    $0.text("taken")
                }
            }
            #expect(error?.resultCode == .SQLITE_CONSTRAINT)
            #expect(error?.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE)
            #expect(error?.message?.contains("UNIQUE") == true, "\(String(describing: error))")
            #expect(error?.sql == "INSERT INTO t (id, s) VALUES (?, ?)")
            try db.execute(cached: "INSERT INTO t (id, s) VALUES (?, ?)") {
                $0.int(2)
                $0.text("free")
            }
            #expect(try String.fetchAll(db, sql: "SELECT s FROM t ORDER BY id") == ["taken", "free"])
        }
    }

    @Test("reading the first row of several leaves no read open on the table: it can be dropped at once")
    func firstRowLeavesNoReadOpen() throws {
        let queue = try Self.database()
        try queue.write { db in
            try db.execute(sql: "INSERT INTO t (s) VALUES ('a'), ('b'), ('c')")
            let first = try db.fetchFirst(cached: "SELECT s FROM t ORDER BY id") { $0.text(0) }
            #expect(first == "a")
            // An unfinished statement on t makes SQLite refuse this (database table is locked).
            try db.execute(sql: "DROP TABLE t")
        }
    }

    @Test("SQL that remembers its statement: the right one on each of two connections used in turn, none kept from closing, and a connection opened after a close gets a statement of its own")
    func cachedSQL() throws {
        let directory = try TemporaryDirectory(prefix: "cached-sql")
        defer { directory.remove() }
        let path = directory.path("cached.sqlite")
        let insert: CachedSQL = "INSERT INTO t (s) VALUES (?)"
        let count: CachedSQL = "SELECT COUNT(*) FROM t"
        let first = try DatabaseQueue(path: path)
        try first.write { db in try db.execute(sql: "CREATE TABLE t (s TEXT)") }
        let second = try DatabaseQueue(path: path)
        for round in 1...3 {
            try first.write { db in try db.execute(cached: insert) { $0.text("first \(round)") } }
            try second.write { db in try db.execute(cached: insert) { $0.text("second \(round)") } }
            #expect(try first.read { db in try db.fetchFirst(cached: count) { $0.int(0) } } == 2 * round)
        }
        // Closing finalizes the statements GRDB cached; one still held would make the close fail.
        try first.close()
        try second.close()
        let third = try DatabaseQueue(path: path)
        try third.write { db in try db.execute(cached: insert) { $0.text("third") } }
        #expect(try third.read { db in try db.fetchFirst(cached: count) { $0.int(0) } } == 7)
        #expect(try third.read { db in try String.fetchAll(db, sql: "SELECT s FROM t ORDER BY rowid").last } == "third")
    }
}
