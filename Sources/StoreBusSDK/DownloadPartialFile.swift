import ContentPackage
import Crypto
import Dispatch
import Foundation
import StoreBus
import Synchronization

extension DownloadEngine {
    /// A package being written: the partial file, its sidecar (what it is, the bytes kept), and the
    /// check of the bytes in order so far. Chunks may arrive out of order (a window of reads is in
    /// flight); they are written where they belong at once, and counted in order as the gap before
    /// them fills, so that the bytes kept are always a prefix of the package, synced before the
    /// sidecar says so.
    ///
    /// The whole package is checked one of two ways. When the service gives the digest of its
    /// pieces' digests and the device's chunks are those pieces (a fast path, ``FastPaths``), each
    /// chunk's digest, worked out once to check the chunk, is added to a ``ContentPackage/PiecesDigest``
    /// in order: every byte is hashed once. Otherwise (the plain twin) the bytes in order are hashed
    /// again into the package's SHA-256.
    final class PartialFile {
        private let descriptor: Int32
        private let sidecarURL: URL
        /// What the file is, and the bytes kept (synced) as of the last ``keep()``.
        private(set) var sidecar: Sidecar
        /// Bytes from the start written, in order.
        private(set) var contiguous: Int64
        private var synced: Int64
        /// The size of the chunks the device reads.
        private let chunkBytes: Int64
        /// Whether the pieces' digests may check the package (``FastPaths``).
        private let piecesAllowed: Bool
        /// How the bytes in order so far are checked; nil until the package is identified.
        private var check: Check?
        /// Chunks written past the bytes in order, and their digests, kept until those before them
        /// come (a window at most).
        private var waiting: [Int64: (data: ReadChunkJSON.ChunkData, digest: String)] = [:]
        /// The sync ``keepSoon()`` runs on a thread of its own, and how the last one ended.
        private let background = BackgroundSync()

        /// The check of the bytes in order: their SHA-256, or the digest of their pieces' digests.
        enum Check {
            case whole(SHA256)
            case pieces(ContentPackage.PiecesDigest)

            /// Adds the next chunk in order, whose SHA-256 is `digest`.
            mutating func add(_ chunk: ReadChunkJSON.ChunkData, digest: String) {
                switch self {
                case .whole(var hash):
                    chunk.withUnsafeBytes { hash.update(bufferPointer: $0) }
                    self = .whole(hash)
                case .pieces(var pieces):
                    pieces.add(digest)
                    self = .pieces(pieces)
                }
            }

            /// Adds the next chunk in order, read back from the file.
            mutating func add(_ chunk: ArraySlice<UInt8>) {
                switch self {
                case .whole(var hash):
                    hash.update(data: chunk)
                    self = .whole(hash)
                case .pieces(var pieces):
                    pieces.add(ContentPackage.hex(SHA256.hash(data: chunk)))
                    self = .pieces(pieces)
                }
            }
        }

        private init(descriptor: Int32, sidecarURL: URL, sidecar: Sidecar, chunkBytes: Int64, piecesAllowed: Bool, check: Check?) {
            self.descriptor = descriptor
            self.sidecarURL = sidecarURL
            self.sidecar = sidecar
            contiguous = sidecar.kept
            synced = sidecar.kept
            self.chunkBytes = chunkBytes
            self.piecesAllowed = piecesAllowed
            self.check = check
        }

        deinit {
            close(descriptor)
        }

        /// Opens (or makes) the partial file at `url`, cut to the bytes its sidecar (at
        /// `sidecarURL`) says were kept, those read back once for the check. A new file is of a
        /// package `length` bytes long whose version is not known yet; the device reads chunks of
        /// `chunkBytes`.
        static func opening(_ url: URL, sidecar sidecarURL: URL, length: Int64, chunkBytes: Int64, piecesAllowed: Bool = FastPaths.enabled) throws(StoreKitError) -> PartialFile {
            let sidecar = DownloadEngine.loadSidecar(sidecarURL) ?? Sidecar(version: "", sha256: "", length: length, kept: 0)
            let descriptor = open(url.path, O_RDWR | O_CREAT, 0o644)
            guard descriptor >= 0 else { throw DownloadEngine.writeError(errno) }
            var check = sidecar.version.isEmpty ? nil : Self.check(sidecar, chunkBytes: chunkBytes, piecesAllowed: piecesAllowed)
            var failure: Int32?
            if ftruncate(descriptor, off_t(sidecar.kept)) != 0 { failure = errno }
            // Read back in chunks, so that each is one piece when the pieces check.
            var buffer = [UInt8](repeating: 0, count: Int(chunkBytes))
            var read: Int64 = 0
            while failure == nil && read < sidecar.kept {
                let want = Int(min(chunkBytes, sidecar.kept - read))
                var got = 0
                while got < want {
                    let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + got, want - got, off_t(read) + off_t(got)) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else {
                        failure = count < 0 ? errno : EIO
                        break
                    }
                    got += count
                }
                guard failure == nil else { break }
                check?.add(buffer[0..<want])
                read += Int64(want)
            }
            if let failure {
                close(descriptor)
                throw DownloadEngine.writeError(failure)
            }
            return PartialFile(descriptor: descriptor, sidecarURL: sidecarURL, sidecar: sidecar, chunkBytes: chunkBytes, piecesAllowed: piecesAllowed, check: check)
        }

        /// How a package `sidecar` tells of is checked: by its pieces when the service gave their
        /// digest, they are the device's chunks, and the bytes kept are whole pieces (or all).
        private static func check(_ sidecar: Sidecar, chunkBytes: Int64, piecesAllowed: Bool) -> Check {
            if piecesAllowed, let pieces = sidecar.piecesSHA256, !pieces.isEmpty, sidecar.pieceBytes == chunkBytes,
                sidecar.kept % chunkBytes == 0 || sidecar.kept == sidecar.length
            {
                return .pieces(ContentPackage.PiecesDigest())
            }
            return .whole(SHA256())
        }

        /// Whether the package's version and digest are known (a first chunk has told them).
        var identified: Bool { !sidecar.version.isEmpty }

        /// Whether the package is checked by its pieces' digests (else by hashing it again).
        var checksPieces: Bool {
            if case .pieces = check { return true }
            return false
        }

        /// Takes the version, digest and length a first chunk tells, and the digest of the
        /// package's pieces and their size when it tells them.
        func identify(version: String, sha256: String, length: Int64, pieces: (sha256: String, bytes: Int64)?) {
            sidecar = Sidecar(version: version, sha256: sha256, length: length, kept: sidecar.kept, piecesSHA256: pieces?.sha256, pieceBytes: pieces?.bytes)
            check = Self.check(sidecar, chunkBytes: chunkBytes, piecesAllowed: piecesAllowed)
        }

        /// Whether a chunk's answer is of the package this file holds.
        func holds(version: String, sha256: String) -> Bool {
            version == sidecar.version && sha256 == sidecar.sha256
        }

        /// Writes a chunk (whose SHA-256 is `digest`, lowercase hex) where it belongs, and counts
        /// every chunk now in order. On a write error (a full disk, among others) nothing is counted.
        func write(_ data: ReadChunkJSON.ChunkData, at offset: Int64, digest: String) throws(StoreKitError) {
            let written = data.withUnsafeBytes { buffer -> Int in
                var done = 0
                while done < buffer.count {
                    let count = pwrite(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
                    if count < 0 {
                        if errno == EINTR { continue }
                        return -Int(errno)
                    }
                    done += count
                }
                return done
            }
            if written < 0 { throw DownloadEngine.writeError(Int32(-written)) }
            waiting[offset] = (data, digest)
            while let next = waiting.removeValue(forKey: contiguous) {
                check?.add(next.data, digest: next.digest)
                contiguous += Int64(next.data.count)
            }
        }

        /// Bytes written in order and not yet synced (or being synced).
        var unsynced: Int64 { contiguous - synced }

        /// Starts syncing the bytes in order so far and then recording them in the sidecar, on a
        /// thread of the file's own, while chunks go on arriving (the disk's writing back overlaps
        /// the transfer; one sync at a time, none started while one runs); with `inBackground`
        /// false (``FastPaths`` off), ``keep()`` now. Throws what an earlier one met.
        func keepSoon(inBackground: Bool = FastPaths.enabled) throws(StoreKitError) {
            guard inBackground else { return try keep() }
            if let failure = background.failure { throw failure }
            guard !background.running else { return }
            let copy = dup(descriptor)
            guard copy >= 0 else { return try keep() }
            var record = sidecar
            record.kept = contiguous
            synced = contiguous
            background.start(descriptor: copy, record: record, to: sidecarURL)
        }

        /// Syncs the file and records the bytes kept in the sidecar (nothing when nothing changed),
        /// after a sync ``keepSoon()`` started has ended.
        func keep() throws(StoreKitError) {
            background.waitUntilIdle()
            if let failure = background.failure { throw failure }
            guard contiguous != synced || sidecar.kept != contiguous else { return }
            if fsync(descriptor) != 0 { throw DownloadEngine.writeError(errno) }
            sidecar.kept = contiguous
            do {
                try JSONEncoder().encode(sidecar).write(to: sidecarURL, options: .atomic)
            } catch {
                throw DownloadEngine.writeError(error)
            }
            synced = contiguous
        }

        /// Whether every byte is written in order and the whole checks: the digest of its pieces'
        /// digests is the one the service gave, or its SHA-256 is the package's. Call once, at the end.
        func isWholeAndIntact() -> Bool {
            guard identified, contiguous >= sidecar.length else { return false }
            switch check {
            case .pieces(let pieces): return pieces.finalize() == sidecar.piecesSHA256
            case .whole(let hash): return ContentPackage.hex(hash.finalize()) == sidecar.sha256
            case nil: return false
            }
        }
    }

    /// One partial file's syncs off the transfer's task: each `fsync`s a duplicate of the file's
    /// descriptor (closed after it, so it outlives nothing) and then writes the sidecar, on a
    /// serial queue of its own (a thread outside Swift's cooperative pool, which a sync would block).
    final class BackgroundSync: Sendable {
        private struct State {
            var running = false
            var failure: StoreKitError?
        }

        private let queue = DispatchQueue(label: "storebus.sdk.download-sync")
        private let state = Mutex(State())

        var running: Bool { state.withLock { $0.running } }
        var failure: StoreKitError? { state.withLock { $0.failure } }

        /// Syncs `descriptor` (and closes it), then writes `record` to `url`.
        func start(descriptor: Int32, record: Sidecar, to url: URL) {
            state.withLock { $0.running = true }
            queue.async { [self] in
                var failure: StoreKitError?
                if fsync(descriptor) != 0 { failure = DownloadEngine.writeError(errno) }
                close(descriptor)
                if failure == nil {
                    do {
                        try JSONEncoder().encode(record).write(to: url, options: .atomic)
                    } catch {
                        failure = DownloadEngine.writeError(error)
                    }
                }
                state.withLock {
                    $0.running = false
                    if $0.failure == nil { $0.failure = failure }
                }
            }
        }

        /// Returns when no sync runs (blocking: at the end of a transfer only).
        func waitUntilIdle() {
            queue.sync {}
        }
    }

    /// The package unpacked into the hidden folder that is renamed into place once the whole
    /// package checked: while it downloads (a fast path: ``advance(to:)`` after each chunk
    /// in order, a ``ContentPackage/Unpacker`` following the partial file on a serial queue of its
    /// own, since its kernel copies and syncs block and must not on Swift's cooperative pool), or
    /// all of it in ``finish()`` once every byte is in (the plain twin, with fast paths off). A
    /// transfer that stops or fails removes what it made; a resume starts it again from the first
    /// byte (the copies are the kernel's, from the page cache).
    final class BackgroundUnpack: Sendable {
        private struct State {
            /// How far the partial file's bytes in order go, as last told.
            var target: Int64 = 0
            var running = false
            var abandoned = false
            var failure: (any Error)?
        }

        private let queue = DispatchQueue(label: "storebus.sdk.download-unpack")
        private let state = Mutex(State())
        private let unpacker: Mutex<ContentPackage.Unpacker>
        private let folder: URL
        /// The most one step takes before it looks whether the transfer was abandoned.
        static let step: Int64 = 8 << 20

        /// Makes `folder` afresh (what an earlier transfer left goes) and unpacks into its `Contents`,
        /// each file's bytes copied by the kernel with `inKernel`.
        init(partial: URL, into folder: URL, inKernel: Bool = true) throws {
            try? FileManager.default.removeItem(at: folder)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            self.folder = folder
            unpacker = Mutex(try ContentPackage.Unpacker(partial, into: folder.appendingPathComponent("Contents"), inKernel: inKernel, durable: true))
        }

        /// The partial file holds its first `contiguous` bytes: unpack them, soon.
        func advance(to contiguous: Int64) {
            let start = state.withLock { state -> Bool in
                state.target = max(state.target, contiguous)
                guard !state.running, !state.abandoned, state.failure == nil else { return false }
                state.running = true
                return true
            }
            guard start else { return }
            queue.async { [self] in
                var done = unpacker.withLock { $0.position }
                while true {
                    // Read and cleared under one lock with `advance`'s check: no target is missed.
                    let goal = state.withLock { state -> Int64? in
                        guard !state.abandoned, state.failure == nil, state.target > done else {
                            state.running = false
                            return nil
                        }
                        return min(state.target, done + Self.step)
                    }
                    guard let goal else { return }
                    do {
                        try unpacker.withLock { try $0.advance(to: goal) }
                    } catch {
                        state.withLock { $0.failure = error }
                    }
                    done = goal
                }
            }
        }

        /// Every byte is in and intact: unpacks what is left and ends (the folders synced). Throws
        /// what the unpacking met, on the way or now.
        func finish() throws {
            queue.sync {}
            if let failure = state.withLock({ $0.failure }) { throw failure }
            try unpacker.withLock { try $0.finish() }
        }

        /// The transfer stopped or failed: the unpacking stops and what it made goes.
        func abandon() {
            state.withLock { $0.abandoned = true }
            queue.sync {}
            try? FileManager.default.removeItem(at: folder)
        }
    }

    /// Which chunks to read next: one until the package is identified, then up to `window` in
    /// flight, in order of offset, never past the package's end, and never more than `window` chunks
    /// past the bytes kept: while the first chunk missing is asked again (its answer damaged, or the
    /// service not ready), the others wait rather than run on ahead of it, so that what a pause or a
    /// crash leaves beyond the bytes kept (read again by a resume) stays under a window.
    struct ChunkWindow {
        let chunk: Int64
        let window: Int
        /// The next offset not yet asked for.
        private(set) var next: Int64
        private(set) var inFlight = 0

        init(chunk: Int64, window: Int, from offset: Int64) {
            self.chunk = chunk
            self.window = max(1, window)
            next = offset
        }

        /// The offsets to ask for now (each counted in flight).
        mutating func offsetsToRead(identified: Bool, length: Int64, kept: Int64) -> [Int64] {
            var offsets: [Int64] = []
            let credit = identified ? window : 1
            let limit = identified ? min(length, kept + Int64(window) * chunk) : next + 1
            while inFlight < credit && next < limit {
                offsets.append(next)
                next += chunk
                inFlight += 1
            }
            return offsets
        }

        /// A read asked again (its answer was damaged, or failed for a while).
        mutating func retrying() {
            inFlight += 1
        }

        /// A read answered.
        mutating func answered() {
            inFlight -= 1
        }
    }
}
