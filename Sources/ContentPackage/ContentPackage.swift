import Crypto
import Foundation

/// A product's hosted content as one package, the bytes a download transfers: the content folder's
/// files in a POSIX ustar archive, in the catalog's order, with fixed metadata (mode 0644, owner 0,
/// time 0, no user or group names), so that the same files always make the same bytes, the same
/// length and the same SHA-256, and any `tar -x` unpacks them. A package's length follows from the
/// files' lengths alone (``archiveLength(fileLengths:)``), which is how the catalog announces it
/// before any byte is read.
public enum ContentPackage {
    /// One file to pack: its path inside the package, where it is read from, and what the catalog
    /// says of it (a length, and a SHA-256 when the catalog gives one).
    public struct File: Sendable {
        public var path: String
        public var source: URL
        public var length: Int64
        public var sha256: String?

        public init(path: String, source: URL, length: Int64, sha256: String? = nil) {
            self.path = path
            self.source = source
            self.length = length
            self.sha256 = sha256
        }
    }

    /// Why a package could not be made.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    static let block = 512

    /// Whether `version` is a content version: dot-separated integers (`1`, `1.0`, `2.10.3`), as
    /// SKDownload.contentVersion compares.
    public static func isVersion(_ version: String) -> Bool {
        version.split(separator: ".", omittingEmptySubsequences: false)
            .allSatisfy { !$0.isEmpty && $0.utf8.count <= 9 && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }
    }

    /// The length of the archive of files of `fileLengths`: a header block each, their bytes
    /// rounded up to whole blocks, and two zero blocks at the end.
    public static func archiveLength(fileLengths: [Int64]) -> Int64 {
        fileLengths.reduce(Int64(2 * block)) { $0 + Int64(block) + ($1 + Int64(block) - 1) / Int64(block) * Int64(block) }
    }

    /// Writes the archive of `files` to `destination` (through a temporary file and a rename, so a
    /// package on disk is always whole), reading each file in 1 MiB pieces: memory stays bounded
    /// whatever the sizes. Throws when a file is missing, has another length than the catalog says,
    /// or another SHA-256. Returns the package's length and SHA-256 (lowercase hex).
    public static func write(_ files: [File], to destination: URL) throws -> (length: Int64, sha256: String) {
        let made = try write(files, to: destination, pieceBytes: nil)
        return (made.length, made.sha256)
    }

    /// ``write(_:to:)``, and with `pieceBytes` the SHA-256 of each `pieceBytes` of the package in
    /// turn (the last may be shorter), worked out from the same bytes as they are written.
    public static func write(_ files: [File], to destination: URL, pieceBytes: Int?) throws -> (length: Int64, sha256: String, pieceSHA256: [String]) {
        let temporary = destination.deletingLastPathComponent().appendingPathComponent(".\(destination.lastPathComponent).partial")
        try? FileManager.default.removeItem(at: temporary)
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil) else { throw Failure("cannot create \(temporary.path)") }
        let output = try FileHandle(forWritingTo: temporary)
        var packageHash = SHA256()
        var length: Int64 = 0
        var pieceHash = SHA256()
        var pieceFill = 0
        var pieces: [String] = []
        func emit(_ bytes: Data) throws {
            try output.write(contentsOf: bytes)
            packageHash.update(data: bytes)
            length += Int64(bytes.count)
            guard let pieceBytes else { return }
            var at = bytes.startIndex
            while at < bytes.endIndex {
                let take = min(pieceBytes - pieceFill, bytes.endIndex - at)
                pieceHash.update(data: bytes[at..<(at + take)])
                pieceFill += take
                at += take
                if pieceFill == pieceBytes {
                    pieces.append(hex(pieceHash.finalize()))
                    pieceHash = SHA256()
                    pieceFill = 0
                }
            }
        }
        do {
            for file in files {
                try emit(Data(try header(for: file)))
                guard let input = FileHandle(forReadingAtPath: file.source.path) else { throw Failure("\(file.path): no such file at \(file.source.path)") }
                defer { try? input.close() }
                var fileHash = SHA256()
                var read: Int64 = 0
                while true {
                    let piece = try input.read(upToCount: 1 << 20) ?? Data()
                    if piece.isEmpty { break }
                    read += Int64(piece.count)
                    guard read <= file.length else { throw Failure("\(file.path) is longer than the catalog's \(file.length) bytes") }
                    fileHash.update(data: piece)
                    try emit(piece)
                }
                guard read == file.length else { throw Failure("\(file.path) has \(read) bytes, the catalog says \(file.length)") }
                let digest = hex(fileHash.finalize())
                if let expected = file.sha256, !expected.isEmpty, expected.lowercased() != digest {
                    throw Failure("\(file.path) has SHA-256 \(digest), the catalog says \(expected.lowercased())")
                }
                let padding = Int((Int64(block) - read % Int64(block)) % Int64(block))
                if padding > 0 { try emit(Data(count: padding)) }
            }
            try emit(Data(count: 2 * block))
            if pieceFill > 0 { pieces.append(hex(pieceHash.finalize())) }
            try output.synchronize()
            try output.close()
        } catch {
            try? output.close()
            try? FileManager.default.removeItem(at: temporary)
            throw error
        }
        guard rename(temporary.path, destination.path) == 0 else {
            throw Failure("cannot rename \(temporary.path) to \(destination.path): \(String(cString: strerror(errno)))")
        }
        return (length, hex(packageHash.finalize()), pieces)
    }

    /// The ustar header block of `file`.
    static func header(for file: File) throws -> [UInt8] {
        var header = [UInt8](repeating: 0, count: block)
        let (prefix, name) = try split(file.path)
        put(Array(name.utf8), at: 0, in: &header)
        put(octal(0o644, width: 8), at: 100, in: &header)
        put(octal(0, width: 8), at: 108, in: &header)
        put(octal(0, width: 8), at: 116, in: &header)
        put(size(file.length), at: 124, in: &header)
        put(octal(0, width: 12), at: 136, in: &header)
        header[156] = UInt8(ascii: "0") // a regular file
        put(Array("ustar\u{0}00".utf8), at: 257, in: &header)
        put(Array(prefix.utf8), at: 345, in: &header)
        // The checksum counts its own field as eight spaces.
        put([UInt8](repeating: 0x20, count: 8), at: 148, in: &header)
        let sum = header.reduce(0) { $0 + Int($1) }
        put(octal(sum, width: 7) + [0x20], at: 148, in: &header)
        return header
    }

    /// A path as ustar keeps it: a name of at most 100 bytes, and a prefix of at most 155 before a `/`.
    static func split(_ path: String) throws -> (prefix: String, name: String) {
        let bytes = Array(path.utf8)
        if bytes.count <= 100 { return ("", path) }
        for (index, byte) in bytes.enumerated().reversed() where byte == UInt8(ascii: "/") {
            if index <= 155 && bytes.count - index - 1 <= 100 && bytes.count - index - 1 > 0 {
                return (String(decoding: bytes[..<index], as: UTF8.self), String(decoding: bytes[(index + 1)...], as: UTF8.self))
            }
        }
        throw Failure("\(path): a path of a package must split into at most 155 and 100 bytes at a /")
    }

    /// An octal field of `width` bytes: digits, then NUL.
    static func octal(_ value: Int, width: Int) -> [UInt8] {
        let digits = String(value, radix: 8)
        return Array((String(repeating: "0", count: max(0, width - 1 - digits.count)) + digits).utf8) + [0]
    }

    /// The size field: octal up to 8 GiB, beyond it base-256 (the high bit set), as GNU tar and
    /// POSIX pax readers take it.
    static func size(_ length: Int64) -> [UInt8] {
        if length < 1 << 33 { return octal(Int(length), width: 12) }
        var field = [UInt8](repeating: 0, count: 12)
        var value = UInt64(length)
        for index in stride(from: 11, through: 1, by: -1) {
            field[index] = UInt8(value & 0xff)
            value >>= 8
        }
        field[0] = 0x80
        return field
    }

    static func put(_ bytes: [UInt8], at offset: Int, in header: inout [UInt8]) {
        header.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
    }

    /// The size of the pieces a host keeps the digests of and gives ``PiecesDigest`` for
    /// (Download.ReadChunk's `piece_bytes`).
    public static let pieceBytes = 256 * 1024

    /// The digest of a package's pieces (Download.ReadChunk's `pieces_sha256`): the SHA-256 of the
    /// pieces' SHA-256 digests in lowercase hex, 64 characters each, one after another. A reader that
    /// checks each chunk it reads (each one piece, in order) by its digest and adds that digest here
    /// has checked the whole package when the two match, without hashing its bytes a second time.
    public struct PiecesDigest: Sendable {
        private var hash = SHA256()

        public init() {}

        /// The digest of `digests`, each a piece's lowercase hex SHA-256, in order.
        public init(_ digests: [String]) {
            for digest in digests { add(digest) }
        }

        /// Adds the next piece's digest (lowercase hex).
        public mutating func add(_ digest: String) {
            var digest = digest
            digest.withUTF8 { hash.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        }

        /// Lowercase hex of the digest of the pieces added.
        public func finalize() -> String { ContentPackage.hex(hash.finalize()) }
    }

    /// Lowercase hex of a digest's bytes.
    public static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in digest {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
