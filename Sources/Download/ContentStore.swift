import ContentPackage
import Crypto
import Foundation
import NIOPosix
import StoreBus

/// The hosted content a download service serves: every downloadable product's package, made at
/// start from the files under the content root and checked against what the catalog announces.
///
/// A product's files are read from `<contentRoot>/<location>` (the catalog's HostedContent
/// location: the content folder's name). Each package is kept in `directory` under a name drawn
/// from what makes it (content id, version, every file's path, length, SHA-256, size and time of
/// change), so a restart with unchanged files reuses it, and a changed file makes a new one.
public final class ContentStore: Sendable {
    /// What the catalog says of one product's hosted content.
    public struct Spec: Sendable {
        /// The app the product belongs to.
        public var app: String
        public var productID: String
        public var contentID: String
        /// Dot-separated integers, such as `1.0.2`.
        public var version: String
        /// The content folder, relative to the content root.
        public var location: String
        public var files: [(path: String, length: Int64, sha256: String)]
        /// The package length the catalog announces (downloadContentLengths).
        public var announcedLength: Int64

        public init(app: String, productID: String, contentID: String, version: String, location: String, files: [(path: String, length: Int64, sha256: String)], announcedLength: Int64) {
            self.app = app
            self.productID = productID
            self.contentID = contentID
            self.version = version
            self.location = location
            self.files = files
            self.announcedLength = announcedLength
        }
    }

    /// A package ready to serve.
    public struct Package: Sendable, Equatable {
        public var app: String
        public var productID: String
        public var contentID: String
        public var version: String
        public var file: URL
        public var length: Int64
        /// Lowercase hex SHA-256 of the whole package.
        public var sha256: String
        /// Lowercase hex SHA-256 of each ``ContentStore/digestGrid`` bytes of the package in turn
        /// (the last piece may be shorter): the digests of the chunks a reader asks for at the
        /// default size, worked out once when the package is made.
        public var chunkSHA256: [String]
        /// The digest of those pieces' digests (``ContentPackage/PiecesDigest``): a reader whose
        /// chunks are the pieces checks the whole package by it.
        public var piecesSHA256: String

        /// The kept digest of the `count` bytes at `offset`, when they are one piece of the grid.
        public func keptDigest(offset: Int64, count: Int) -> String? {
            let grid = Int64(ContentStore.digestGrid)
            guard offset >= 0, offset % grid == 0, count == Int(min(grid, length - offset)) else { return nil }
            let index = Int(offset / grid)
            return index < chunkSHA256.count ? chunkSHA256[index] : nil
        }
    }

    /// The size of the pieces whose digests are kept: the size of chunk ReadChunk gives when asked
    /// for none, and the SDK's.
    public static let digestGrid = ContentPackage.pieceBytes

    private let packages: [String: Package]

    /// Makes (or finds) the package of every spec. Throws a ``StartupError`` naming the product when
    /// its version is not dot-separated integers, a file is missing or differs from the catalog, or
    /// the package would not be as long as the catalog announces.
    public init(contentRoot: URL, directory: URL, specs: [Spec]) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var packages: [String: Package] = [:]
        for spec in specs {
            guard ContentPackage.isVersion(spec.version) else {
                throw StartupError("hosted content of \(spec.productID): version \(RPCError.echo(spec.version)) is not dot-separated integers, such as 1.0.2")
            }
            guard !spec.location.isEmpty, !spec.location.hasPrefix("/"), !spec.location.split(separator: "/").contains("..") else {
                throw StartupError("hosted content of \(spec.productID): location \(RPCError.echo(spec.location)) must be a folder inside the content root")
            }
            let folder = contentRoot.appendingPathComponent(spec.location)
            let files = spec.files.map { ContentPackage.File(path: $0.path, source: folder.appendingPathComponent($0.path), length: $0.length, sha256: $0.sha256) }
            let length = ContentPackage.archiveLength(fileLengths: spec.files.map(\.length))
            guard length == spec.announcedLength else {
                throw StartupError("hosted content of \(spec.productID): the catalog announces \(spec.announcedLength) bytes, its files make a package of \(length)")
            }
            let name = try Self.fingerprint(spec, files: files)
            let file = directory.appendingPathComponent("\(name).tar")
            let digestFile = directory.appendingPathComponent("\(name).sha256")
            let chunkFile = directory.appendingPathComponent("\(name).chunks")
            let made: (length: Int64, sha256: String)
            // The pieces' digests: worked out while a package is made, else read back from beside a
            // kept one (and worked out from its bytes when that file is missing or damaged).
            var chunkSHA256: [String] = []
            if let kept = try? String(contentsOf: digestFile, encoding: .utf8), kept.count == 64,
                let size = (try? FileManager.default.attributesOfItem(atPath: file.path))?[.size] as? Int64, size == length
            {
                made = (size, kept)
                if let kept = try? String(contentsOf: chunkFile, encoding: .utf8), case let digests = kept.split(separator: "\n").map(String.init),
                    digests.count == Self.pieces(made.length), digests.allSatisfy({ $0.utf8.count == 64 })
                {
                    chunkSHA256 = digests
                } else {
                    do {
                        chunkSHA256 = try Self.pieceDigests(of: file, length: made.length)
                    } catch {
                        throw StartupError("hosted content of \(spec.productID): the package \(file.path) cannot be read: \(error)")
                    }
                    try Data(chunkSHA256.joined(separator: "\n").utf8).write(to: chunkFile, options: .atomic)
                }
            } else {
                try? FileManager.default.removeItem(at: chunkFile)
                do {
                    let written = try ContentPackage.write(files, to: file, pieceBytes: Self.digestGrid)
                    made = (written.length, written.sha256)
                    chunkSHA256 = written.pieceSHA256
                } catch {
                    throw StartupError("hosted content of \(spec.productID) in \(folder.path): \(error)")
                }
                try Data(made.sha256.utf8).write(to: digestFile, options: .atomic)
                try Data(chunkSHA256.joined(separator: "\n").utf8).write(to: chunkFile, options: .atomic)
            }
            guard packages[Self.key(app: spec.app, contentID: spec.contentID)] == nil else {
                throw StartupError("hosted content of \(spec.productID): content identifier \(spec.contentID) is used twice in \(spec.app)")
            }
            packages[Self.key(app: spec.app, contentID: spec.contentID)] = Package(
                app: spec.app, productID: spec.productID, contentID: spec.contentID, version: spec.version, file: file, length: made.length, sha256: made.sha256,
                chunkSHA256: chunkSHA256, piecesSHA256: ContentPackage.PiecesDigest(chunkSHA256).finalize())
        }
        self.packages = packages
    }

    /// The package of a content identifier of `app`.
    public func package(app: String, contentID: String) -> Package? { packages[Self.key(app: app, contentID: contentID)] }

    /// Every package, by app and content identifier.
    public var all: [Package] { packages.values.sorted { ($0.app, $0.contentID) < ($1.app, $1.contentID) } }

    /// A package's key: app bundle ids compare without case, as queue names do.
    static func key(app: String, contentID: String) -> String { "\(app.lowercased())|\(contentID)" }

    /// At most `maxBytes` of `package` from `offset` (fewer at its end; none past it).
    public func read(_ package: Package, offset: Int64, maxBytes: Int) throws -> Data {
        guard offset >= 0, offset <= package.length else {
            throw RPCError(.outOfRange, "offset \(offset) is past the package's \(package.length) bytes")
        }
        let count = Int(min(Int64(maxBytes), package.length - offset))
        guard count > 0 else { return Data() }
        let descriptor = open(package.file.path, O_RDONLY)
        guard descriptor >= 0 else { throw RPCError(.unavailable, "the package of \(package.contentID) cannot be opened: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        // Read into a buffer the answer's Data then owns as it is: not zeroed first, nor copied
        // into the answer (a chunk is up to 1 MiB).
        guard let buffer = malloc(count) else { throw RPCError(.resourceExhausted, "no memory for a chunk of \(count) bytes") }
        var done = 0
        while done < count {
            let got = pread(descriptor, buffer + done, count - done, off_t(offset) + off_t(done))
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else {
                free(buffer)
                throw RPCError(.dataLoss, "the package of \(package.contentID) ended early at byte \(offset + Int64(done))")
            }
            done += got
        }
        return Data(bytesNoCopy: buffer, count: count, deallocator: .free)
    }

    /// ``read(_:offset:maxBytes:)`` and the chunk's SHA-256 (lowercase hex), on a thread of
    /// NIO's blocking-I/O pool: a read from a cold disk never holds up a thread of Swift's
    /// cooperative pool, nor the RPC server's reactor. With `keptDigests` (``FastPaths``) a chunk
    /// of the grid takes its kept digest (``Package/keptDigest(offset:count:)``), any other is
    /// hashed; without, every chunk is. Should the package's bytes change on disk after it was
    /// made, a reader finds such a chunk damaged.
    public func readChunk(_ package: Package, offset: Int64, maxBytes: Int, keptDigests: Bool = FastPaths.enabled) async throws -> (bytes: Data, sha256: String) {
        try await NIOThreadPool.singleton.runIfActive { [self] in
            let bytes = try read(package, offset: offset, maxBytes: maxBytes)
            if keptDigests, let kept = package.keptDigest(offset: offset, count: bytes.count) { return (bytes, kept) }
            return (bytes, ContentPackage.hex(SHA256.hash(data: bytes)))
        }
    }

    /// How many pieces of the grid a package of `length` bytes has.
    static func pieces(_ length: Int64) -> Int {
        Int((length + Int64(digestGrid) - 1) / Int64(digestGrid))
    }

    /// The SHA-256 of each piece of the grid of the file, read in turn.
    static func pieceDigests(of file: URL, length: Int64) throws -> [String] {
        let input = try FileHandle(forReadingFrom: file)
        defer { try? input.close() }
        var digests: [String] = []
        digests.reserveCapacity(pieces(length))
        var read: Int64 = 0
        while read < length {
            let want = Int(min(Int64(digestGrid), length - read))
            var piece = Data()
            while piece.count < want {
                guard let more = try input.read(upToCount: want - piece.count), !more.isEmpty else {
                    throw StartupError("it ends at byte \(read + Int64(piece.count)), before its \(length)")
                }
                piece += more
            }
            digests.append(ContentPackage.hex(SHA256.hash(data: piece)))
            read += Int64(want)
        }
        return digests
    }

    /// A name for the package that changes with anything that makes it.
    static func fingerprint(_ spec: Spec, files: [ContentPackage.File]) throws -> String {
        var hash = SHA256()
        func add(_ text: String) { hash.update(data: Data((text + "\n").utf8)) }
        add(spec.app.lowercased())
        add(spec.contentID)
        add(spec.version)
        for file in files {
            let attributes = try? FileManager.default.attributesOfItem(atPath: file.source.path)
            let size = (attributes?[.size] as? NSNumber)?.int64Value ?? -1
            let changed = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
            add("\(file.path)\t\(file.length)\t\(file.sha256 ?? "")\t\(size)\t\(changed)")
        }
        let digest = hash.finalize().prefix(12).map { String(format: "%02x", $0) }.joined()
        let safe = spec.contentID.unicodeScalars.map { CharacterSet.alphanumerics.contains($0) || $0 == "." || $0 == "-" ? String($0) : "_" }.joined()
        return "\(safe.prefix(80))-\(spec.version)-\(digest)"
    }
}
