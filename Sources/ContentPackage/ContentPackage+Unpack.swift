import Foundation

/// write(2), which ``ContentPackage``'s own `write` hides inside its extensions.
private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}

extension ContentPackage {
    /// Unpacks a package made by ``write(_:to:)`` into `folder` (made; it must not exist). Only
    /// what such packages hold is taken: regular files under relative paths without `..`; anything
    /// else throws, and so does a truncated archive.
    ///
    /// With `inKernel` each file's bytes are copied by the kernel from the archive to the file
    /// (`sendfile`: one copy, none through this process); without, or where the kernel cannot,
    /// they are read and written in 1 MiB pieces. Both make the same files.
    ///
    /// With `durable`, each file is synced once written, and so is every folder made (the names in
    /// them), before this returns: what it made survives a power loss. The folder that holds
    /// `folder` is the caller's to sync (``syncFolder(_:)``), once the content is where it stays.
    public static func unpack(_ archive: URL, into folder: URL, inKernel: Bool = true, durable: Bool = false) throws {
        try Unpacker(archive, into: folder, inKernel: inKernel, durable: durable).finish()
    }

    /// Unpacks a package while it is still being written, front to back: ``advance(to:)`` takes
    /// whatever lies before a given length of the archive (a header once its whole block is there,
    /// a file's bytes as far as they go), so a download can unpack what it has while the rest
    /// arrives, and ``finish()`` takes the rest once the archive is whole. What it makes is what
    /// ``ContentPackage/unpack(_:into:inKernel:durable:)`` (which runs one over a whole archive) makes,
    /// with the same checks; with `durable`, a file's bytes are also synced every 16 MiB as they
    /// are copied, so that little is left to write back when it ends.
    ///
    /// Not for use from two threads at once.
    public final class Unpacker {
        private let archive: Int32
        private let name: String
        private let folder: URL
        private let inKernel: Bool
        private let durable: Bool
        /// The next byte of the archive to take.
        public private(set) var position: Int64 = 0
        /// The file being written, its bytes still to come, the zeros after them, and its bytes
        /// copied since it was last synced.
        private var entry: (output: Int32, path: String, left: Int64, padding: Int64, unsynced: Int64)?
        /// Whether the archive's end (a zero block) was read.
        public private(set) var ended = false
        private var folders: Set<String>
        static let syncEvery: Int64 = 16 << 20

        /// Opens `archive` (it may still be short) and makes `folder` (it must not exist).
        public init(_ archive: URL, into folder: URL, inKernel: Bool = true, durable: Bool = false) throws {
            let descriptor = open(archive.path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw Failure("cannot open \(archive.path): \(String(cString: strerror(errno)))") }
            do {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
            } catch {
                close(descriptor)
                throw error
            }
            self.archive = descriptor
            self.name = archive.lastPathComponent
            self.folder = folder
            self.inKernel = inKernel
            self.durable = durable
            self.folders = [folder.path]
        }

        deinit {
            if let entry, entry.output >= 0 { close(entry.output) }
            close(archive)
        }

        /// Takes what the archive holds before `available` (its length so far).
        public func advance(to available: Int64) throws {
            while !ended {
                if var current = entry {
                    if current.left > 0 {
                        let count = min(current.left, available - position)
                        guard count > 0 else { return }
                        try copy(count, to: current.output, path: current.path)
                        current.left -= count
                        current.unsynced += count
                        if durable && (current.left == 0 || current.unsynced >= Self.syncEvery) {
                            guard fsync(current.output) == 0 else { throw Failure("cannot sync \(current.path): \(String(cString: strerror(errno)))") }
                            current.unsynced = 0
                        }
                        if current.left == 0 {
                            close(current.output)
                            current.output = -1
                        }
                        entry = current
                        continue
                    }
                    guard available - position >= current.padding else { return }
                    position += current.padding
                    entry = nil
                    continue
                }
                guard available - position >= Int64(block) else { return }
                let header = try read(block)
                position += Int64(block)
                if header.allSatisfy({ $0 == 0 }) {
                    ended = true
                    return
                }
                try begin(header)
            }
        }

        /// Ends the unpacking of a whole archive: takes what the archive holds now past
        /// ``position``, throws unless its end was reached, and with `durable` syncs every folder made.
        public func finish() throws {
            var status = stat()
            guard fstat(archive, &status) == 0 else { throw Failure("cannot read the length of \(name): \(String(cString: strerror(errno)))") }
            try advance(to: Int64(status.st_size))
            guard ended else { throw Failure("\(name) ends in the middle of an entry") }
            if durable {
                // Deepest first: a folder's entry in its parent is synced after its own names.
                for path in folders.sorted(by: { $0.count > $1.count }) { try syncFolder(URL(fileURLWithPath: path)) }
            }
        }

        /// Makes the file a header announces, and its folders.
        private func begin(_ header: [UInt8]) throws {
            let name = field(header, 0, 100)
            let prefix = field(header, 345, 155)
            let path = prefix.isEmpty ? name : "\(prefix)/\(name)"
            guard header[156] == UInt8(ascii: "0") || header[156] == 0 else { throw Failure("\(path): only regular files are unpacked") }
            guard !path.isEmpty, !path.hasPrefix("/"), !path.split(separator: "/").contains("..") else {
                throw Failure("\(path): not a relative path inside the package")
            }
            guard let length = entrySize(header) else { throw Failure("\(path): the size field is not a number") }
            let target = folder.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            if durable {
                var made = target.deletingLastPathComponent()
                while made.path.count > folder.path.count, folders.insert(made.path).inserted { made.deleteLastPathComponent() }
            }
            let output = open(target.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard output >= 0 else { throw Failure("cannot create \(target.path): \(String(cString: strerror(errno)))") }
            let padding = (Int64(block) - length % Int64(block)) % Int64(block)
            entry = (output, path, length, padding, 0)
            if length == 0 && durable {
                guard fsync(output) == 0 else { throw Failure("cannot sync \(path): \(String(cString: strerror(errno)))") }
            }
            if length == 0 {
                close(output)
                entry?.output = -1
            }
        }

        /// Copies the archive's next `count` bytes to the end of `output`.
        private func copy(_ count: Int64, to output: Int32, path: String) throws {
            var left = count
            if inKernel {
                var offset = off_t(position)
                while left > 0 {
                    let sent = sendfile(output, archive, &offset, Int(min(left, 1 << 30)))
                    if sent < 0 && errno == EINTR { continue }
                    guard sent > 0 else { break }
                    left -= Int64(sent)
                }
                position = Int64(offset)
            }
            // Without the kernel's copy, or from where it stopped (the output's position moved with
            // what it wrote).
            while left > 0 {
                let piece = try read(Int(min(left, 1 << 20)))
                var written = 0
                while written < piece.count {
                    let count = piece.withUnsafeBytes { systemWrite(output, $0.baseAddress! + written, piece.count - written) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { throw Failure("cannot write \(path): \(String(cString: strerror(errno)))") }
                    written += count
                }
                position += Int64(piece.count)
                left -= Int64(piece.count)
            }
        }

        /// The archive's `count` bytes at ``position`` (which it leaves alone).
        private func read(_ count: Int) throws -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            var done = 0
            while done < count {
                let got = bytes.withUnsafeMutableBytes { pread(archive, $0.baseAddress! + done, count - done, off_t(position) + off_t(done)) }
                if got < 0 && errno == EINTR { continue }
                guard got > 0 else { throw Failure("\(name) ends in the middle of an entry") }
                done += got
            }
            return bytes
        }
    }

    /// Syncs a folder's names (its entries: files made, renamed into or out of it) to the disk.
    public static func syncFolder(_ folder: URL) throws {
        let descriptor = open(folder.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure("cannot open \(folder.path) to sync it: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw Failure("cannot sync \(folder.path): \(String(cString: strerror(errno)))") }
    }

    /// A NUL-terminated text field of a header.
    static func field(_ header: [UInt8], _ offset: Int, _ width: Int) -> String {
        let bytes = header[offset..<(offset + width)]
        return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// The size field, octal or base-256 (see ``size(_:)``).
    static func entrySize(_ header: [UInt8]) -> Int64? {
        let bytes = header[124..<136]
        if bytes.first! & 0x80 != 0 {
            return bytes.dropFirst().reduce(Int64(0)) { $0 << 8 | Int64($1) }
        }
        let digits = String(decoding: bytes.prefix { $0 != 0 && $0 != 0x20 }, as: UTF8.self)
        return Int64(digits, radix: 8)
    }
}
