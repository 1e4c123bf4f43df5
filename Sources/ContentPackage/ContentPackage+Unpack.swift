import Foundation

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
        let input = try FileHandle(forReadingFrom: archive)
        defer { try? input.close() }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false)
        func read(_ count: Int) throws -> [UInt8] {
            var bytes: [UInt8] = []
            while bytes.count < count {
                guard let piece = try input.read(upToCount: count - bytes.count), !piece.isEmpty else {
                    throw Failure("\(archive.lastPathComponent) ends in the middle of an entry")
                }
                bytes += piece
            }
            return bytes
        }
        var folders: Set<String> = [folder.path]
        while true {
            let header = try read(block)
            if header.allSatisfy({ $0 == 0 }) {
                if durable {
                    // Deepest first: a folder's entry in its parent is synced after its own names.
                    for path in folders.sorted(by: { $0.count > $1.count }) { try syncFolder(URL(fileURLWithPath: path)) }
                }
                return
            }
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
            guard FileManager.default.createFile(atPath: target.path, contents: nil) else { throw Failure("cannot create \(target.path)") }
            let output = try FileHandle(forWritingTo: target)
            defer { try? output.close() }
            var left = length
            if inKernel {
                var offset = Int(try input.offset())
                while left > 0 {
                    let sent = sendfile(output.fileDescriptor, input.fileDescriptor, &offset, Int(min(left, 1 << 30)))
                    if sent < 0 && errno == EINTR { continue }
                    guard sent > 0 else { break }
                    left -= Int64(sent)
                }
                // sendfile moved `offset`, not the archive's own position; the output's moved with
                // what it wrote, so the loop below goes on from where the kernel stopped, if it did.
                try input.seek(toOffset: UInt64(offset))
            }
            while left > 0 {
                let piece = try read(Int(min(left, 1 << 20)))
                try output.write(contentsOf: piece)
                left -= Int64(piece.count)
            }
            if durable { try output.synchronize() }
            let padding = Int((Int64(block) - length % Int64(block)) % Int64(block))
            if padding > 0 { _ = try read(padding) }
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
