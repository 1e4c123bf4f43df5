import ContentPackage
import Crypto
import Foundation

extension DownloadEngine {
    /// A package being written: the partial file, its sidecar (what it is, the bytes kept), and the
    /// digest of the bytes in order so far. Chunks may arrive out of order (a window of reads is in
    /// flight); they are written where they belong at once, and counted in order as the gap before
    /// them fills, so that the bytes kept are always a prefix of the package, synced before the
    /// sidecar says so.
    final class PartialFile {
        private let descriptor: Int32
        private let sidecarURL: URL
        /// What the file is, and the bytes kept (synced) as of the last ``keep()``.
        private(set) var sidecar: Sidecar
        /// Bytes from the start written, in order.
        private(set) var contiguous: Int64
        private var synced: Int64
        private var hash: SHA256
        /// Chunks written past the bytes in order, kept until those before them come (a window at most).
        private var waiting: [Int64: [UInt8]] = [:]

        private init(descriptor: Int32, sidecarURL: URL, sidecar: Sidecar, hash: SHA256) {
            self.descriptor = descriptor
            self.sidecarURL = sidecarURL
            self.sidecar = sidecar
            contiguous = sidecar.kept
            synced = sidecar.kept
            self.hash = hash
        }

        deinit {
            close(descriptor)
        }

        /// Opens (or makes) the partial file of `key`, cut to the bytes its sidecar says were kept,
        /// those read back once for the digest. A new file is of a package `length` bytes long
        /// whose version is not known yet.
        static func opening(_ engine: DownloadEngine, key: Key, length: Int64) throws(StoreKitError) -> PartialFile {
            let sidecar = engine.loadSidecar(key) ?? Sidecar(version: "", sha256: "", length: length, kept: 0)
            let descriptor = open(engine.partial(key).path, O_RDWR | O_CREAT, 0o644)
            guard descriptor >= 0 else { throw DownloadEngine.writeError(errno) }
            var hash = SHA256()
            var failure: Int32?
            if ftruncate(descriptor, off_t(sidecar.kept)) != 0 { failure = errno }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var read: Int64 = 0
            while failure == nil && read < sidecar.kept {
                let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, Int(min(Int64(1 << 20), sidecar.kept - read)), off_t(read)) }
                guard count > 0 else {
                    failure = count < 0 ? errno : EIO
                    break
                }
                hash.update(data: buffer[0..<count])
                read += Int64(count)
            }
            if let failure {
                close(descriptor)
                throw DownloadEngine.writeError(failure)
            }
            return PartialFile(descriptor: descriptor, sidecarURL: engine.sidecar(key), sidecar: sidecar, hash: hash)
        }

        /// Whether the package's version and digest are known (a first chunk has told them).
        var identified: Bool { !sidecar.version.isEmpty }

        /// Takes the version, digest and length a first chunk tells.
        func identify(version: String, sha256: String, length: Int64) {
            sidecar = Sidecar(version: version, sha256: sha256, length: length, kept: sidecar.kept)
        }

        /// Whether a chunk's answer is of the package this file holds.
        func holds(version: String, sha256: String) -> Bool {
            version == sidecar.version && sha256 == sidecar.sha256
        }

        /// Writes a chunk where it belongs, and counts every chunk now in order. On a write error
        /// (a full disk, among others) nothing is counted.
        func write(_ data: [UInt8], at offset: Int64) throws(StoreKitError) {
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
            waiting[offset] = data
            while let next = waiting.removeValue(forKey: contiguous) {
                hash.update(data: next)
                contiguous += Int64(next.count)
            }
        }

        /// Bytes written in order and not yet synced.
        var unsynced: Int64 { contiguous - synced }

        /// Syncs the file and records the bytes kept in the sidecar (nothing when nothing changed).
        func keep() throws(StoreKitError) {
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

        /// Whether every byte is written in order and the whole hashes to the package's SHA-256.
        /// Call once, at the end.
        func isWholeAndIntact() -> Bool {
            identified && contiguous >= sidecar.length && ContentPackage.hex(hash.finalize()) == sidecar.sha256
        }
    }

    /// Which chunks to read next: one until the package is identified, then up to `window` in
    /// flight, in order of offset, never past the package's end.
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
        mutating func offsetsToRead(identified: Bool, length: Int64) -> [Int64] {
            var offsets: [Int64] = []
            let credit = identified ? window : 1
            while inFlight < credit && next < (identified ? length : next + 1) {
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
