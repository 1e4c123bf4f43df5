import Foundation
import Metrics
import StoreBus
import StoreBusServer
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Makes a database's commits durable on a thread of its own (``StoreDatabase``'s `syncThread`).
///
/// The writer connection commits with `synchronous=NORMAL`: SQLite appends the transaction's frames
/// to the WAL and returns without waiting for the disk. This thread then calls `fdatasync` on the
/// WAL, which makes every frame written before the call durable, and only after that lets the
/// writes be answered. While one `fdatasync` runs, the writer goes on committing the next writes
/// (SQLite's own `synchronous=FULL` blocks it for the whole of each: about a quarter of the payment
/// queue's commit thread's time); one `fdatasync` then covers all those that ended meanwhile.
///
/// The rule that keeps this as durable as `FULL`: nothing a commit wrote is shown to anyone until
/// an `fdatasync` that started after the commit has returned.
/// - A write is numbered (``begin()``) before its transaction starts, and reported (``end(_:lastSeq:then:)``)
///   once it has ended; its answer runs after the first sync that started after that.
/// - A read may see any write that began before the read ended: ``afterBegun(_:)`` holds the answer
///   until every write begun so far has ended and been synced. When every one already is (no write
///   since the last sync), the answer goes at once.
/// - Reads that cannot wait (event log pages, served on an RPC loop) leave out the events past
///   ``durableSeq``, the last event position that is durable.
///
/// A failed `fdatasync` ends the process: the kernel may have dropped the pages it could not write,
/// so no later sync could vouch for them, and answering would claim a durability the disk denied.
/// SQLite's recovery at the next start finds what did reach the disk.
public final class WALSyncer: @unchecked Sendable {
    // Invariant for @unchecked Sendable: the variables from `begun` to `thread` are read and written
    // with `condition` locked; `walFile` and `walIdentity` only on the syncer's thread (and in init,
    // before it starts; syncs made on other threads open the WAL themselves); the paths are
    // immutable; `durable` is atomic.
    private let walPath: String
    private let directoryPath: String
    private let durable: Atomic<UInt64>
    private let condition = NSCondition()
    /// Writes numbered so far.
    private var begun: UInt64 = 0
    /// Writes ended so far, in all.
    private var ended: UInt64 = 0
    /// Every write numbered up to this one has ended.
    private var endedThrough: UInt64 = 0
    /// Writes that ended before one numbered lower did (reported from another thread).
    private var endedEarly: Set<UInt64> = []
    /// The largest event position an ended write appended. The next sync makes it durable whatever
    /// else has ended: commit order is position order, so every event before it committed before it.
    private var endedSeq: UInt64
    /// `ended` as of the start of the last sync: when it equals `ended`, no write awaits one.
    private var syncedEnded: UInt64 = 0
    /// Every write numbered up to this one is durable.
    private var durableThrough: UInt64 = 0
    /// Work held until the write numbered `mark` (and every one before it) is durable, in the order given.
    private var waiting: [(mark: UInt64, run: @Sendable () -> Void)] = []
    private var stopping = false
    private var finished = false
    /// While set, no sync starts (tests hold them, to see what waits for one).
    private var held = false
    /// The sync thread, once it runs (to tell when `stop()` is called from it).
    private var thread: pthread_t?
    private var walFile: Int32 = -1
    private var walIdentity: (device: UInt64, inode: UInt64) = (0, 0)

    /// Syncs what is already in the files (a process that crashed may have left commits that never
    /// were: they become durable before anything is served), then starts the thread. `durableSeq` is
    /// the log's last event position, now durable.
    init(databasePath: String, durableSeq: UInt64) {
        walPath = databasePath + "-wal"
        directoryPath = (databasePath as NSString).deletingLastPathComponent
        endedSeq = durableSeq
        durable = Atomic(durableSeq)
        Self.syncPath(databasePath)
        syncWAL()
        let thread = Thread { [self] in
            nameCurrentThread("storebus-sync")
            run()
        }
        thread.name = "storebus-sync"
        thread.start()
    }

    /// The last event position that is durable: events past it are not to be shown yet.
    var durableSeq: UInt64 {
        durable.load(ordering: .acquiring)
    }

    /// Numbers a write about to start its transaction.
    func begin() -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        begun += 1
        return begun
    }

    /// The write numbered `mark` has ended (committed or rolled back), having appended events up to
    /// `lastSeq`. `then` runs on the syncer's thread once it, and every write numbered before it, is
    /// durable.
    func end(_ mark: UInt64, lastSeq: UInt64?, then: (@Sendable () -> Void)?) {
        condition.lock()
        ended += 1
        if mark == endedThrough + 1 {
            endedThrough = mark
            while endedEarly.remove(endedThrough + 1) != nil { endedThrough += 1 }
        } else {
            endedEarly.insert(mark)
        }
        if let lastSeq { endedSeq = max(endedSeq, lastSeq) }
        if let then {
            guard !stopping else {
                condition.unlock()
                return syncHereThen(then)
            }
            waiting.append((mark, then))
        }
        condition.unlock()
        condition.signal()
    }

    /// Runs `then` once every write begun so far is durable: at once, on the caller's thread, when
    /// it already is; otherwise on the syncer's thread.
    func afterBegun(_ then: @escaping @Sendable () -> Void) {
        condition.lock()
        let mark = begun
        guard mark > durableThrough else {
            condition.unlock()
            return then()
        }
        guard !stopping else {
            condition.unlock()
            return syncHereThen(then)
        }
        // No signal needed: a write begun but not ended signals as it ends, and one ended but not
        // synced has already woken the thread, which syncs until `ended` is covered.
        waiting.append((mark, then))
        condition.unlock()
    }

    /// Returns once every write begun so far is durable.
    func durableNow() async {
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            afterBegun { continuation.resume() }
        }
    }

    /// Holds syncs from starting (`true`) or lets them go again; for tests.
    func hold(_ hold: Bool) {
        condition.lock()
        held = hold
        condition.unlock()
        condition.signal()
    }

    /// Once the thread stops (or is stopping): a write or read that still comes to wait syncs the WAL
    /// on its own thread, then goes on. Late, but never answered unsynced, and never left hanging.
    private func syncHereThen(_ then: @Sendable () -> Void) {
        Self.syncPath(walPath)
        then()
    }

    /// Syncs what has ended, runs what waited for it, and ends the thread; waits for it, unless
    /// called from the thread itself (the last reference to the database released by work it ran),
    /// which then ends once that work is done. Writes and reads that come later sync on their own
    /// threads.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        if let thread, pthread_equal(thread, pthread_self()) != 0 {
            return condition.unlock()
        }
        while !finished { condition.wait() }
        condition.unlock()
    }

    private func run() {
        condition.lock()
        thread = pthread_self()
        condition.unlock()
        while true {
            condition.lock()
            while (ended == syncedEnded || held) && !stopping { condition.wait() }
            guard ended != syncedEnded else { break }
            syncedEnded = ended
            let through = endedThrough
            let seq = endedSeq
            condition.unlock()

            syncWAL()

            condition.lock()
            durableThrough = through
            durable.store(seq, ordering: .releasing)
            var ready: [@Sendable () -> Void] = []
            waiting.removeAll { entry in
                guard entry.mark <= through else { return false }
                ready.append(entry.run)
                return true
            }
            condition.unlock()
            for run in ready { run() }
        }
        // Stopping, with every ended write synced. Whatever still waits is a read that may have seen a
        // write still ending, or the answer of a write ended out of order behind it: one more sync
        // covers whatever they saw (a write that ends later syncs for itself), and they go on.
        let leftover = waiting.map(\.run)
        waiting.removeAll()
        condition.unlock()
        if !leftover.isEmpty { syncWAL() }
        for run in leftover { run() }
        if walFile >= 0 { close(walFile) }
        walFile = -1
        condition.lock()
        finished = true
        condition.broadcast()
        condition.unlock()
    }

    /// `fdatasync` on the WAL. SQLite keeps one WAL file while any connection is open and deletes it
    /// as the last closes (after copying it into the database, synced); a new one is opened when the
    /// path names another file, and its directory entry synced with it.
    private func syncWAL() {
        var onDisk = stat()
        guard stat(walPath, &onDisk) == 0 else {
            // No WAL: nothing was committed into one since the last connection closed.
            if errno == ENOENT { return }
            Self.fail("cannot stat \(walPath)")
        }
        let identity = (device: UInt64(onDisk.st_dev), inode: UInt64(onDisk.st_ino))
        if walFile < 0 || identity != walIdentity {
            if walFile >= 0 { close(walFile) }
            walFile = open(walPath, O_RDONLY | O_CLOEXEC)
            guard walFile >= 0 else {
                if errno == ENOENT { return }
                Self.fail("cannot open \(walPath)")
            }
            var opened = stat()
            guard fstat(walFile, &opened) == 0 else { Self.fail("cannot stat \(walPath)") }
            walIdentity = (UInt64(opened.st_dev), UInt64(opened.st_ino))
            // A new file's name is durable only once its directory is.
            Self.syncPath(directoryPath)
        }
        let started = ContinuousClock.now
        Self.sync(walFile, walPath)
        WALSyncMetrics.syncs.record(since: started)
    }

    /// Opens `path` and syncs it (a file or a directory).
    private static func syncPath(_ path: String) {
        let file = open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else {
            if errno == ENOENT { return }
            fail("cannot open \(path)")
        }
        defer { close(file) }
        sync(file, path)
    }

    private static func sync(_ file: Int32, _ path: String) {
        while fdatasync(file) != 0 {
            if errno != EINTR { fail("fdatasync of \(path) failed") }
        }
    }

    private static func fail(_ what: String) -> Never {
        let reason = String(cString: strerror(errno))
        fatalError("\(what): \(reason). Commits not yet synced cannot be made durable; ending the process (SQLite recovers what reached the disk at the next start)")
    }
}

/// The sync thread's metrics (made at first use, after the process set up swift-metrics).
enum WALSyncMetrics {
    /// `storebus_wal_sync_seconds`: each `fdatasync` of the write-ahead log (one per group commit
    /// or several groups together).
    static let syncs = Metrics.Timer(label: "storebus_wal_sync_seconds")
}
