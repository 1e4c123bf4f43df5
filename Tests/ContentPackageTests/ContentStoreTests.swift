import ContentPackage
import Crypto
import Download
import Foundation
import StoreBus
import StoreBusTesting
import Testing

/// The download service's content store over the sample catalog's hosted content.
struct ContentStoreTests {
    /// The sample level pack as the catalog describes it (deploy/catalog/catalog.json).
    static func sampleSpec() throws -> ContentStore.Spec {
        let catalog = try JSONSerialization.jsonObject(with: Data(contentsOf: deployDirectory.appendingPathComponent("catalog/catalog.json"))) as? [String: Any]
        let products = ((catalog?["apps"] as? [[String: Any]])?.first?["products"] as? [[String: Any]]) ?? []
        let pack = try #require(products.first { $0["hostedContent"] != nil })
        let content = try #require(pack["hostedContent"] as? [String: Any])
        let files = try #require(content["files"] as? [[String: Any]]).map { file in
            (path: file["path"] as? String ?? "", length: (file["length"] as? NSNumber)?.int64Value ?? -1, sha256: file["sha256"] as? String ?? "")
        }
        return ContentStore.Spec(
            app: puzzle,
            productID: pack["productId"] as? String ?? "", contentID: content["contentId"] as? String ?? "", version: content["version"] as? String ?? "",
            location: content["root"] as? String ?? "", files: files,
            announcedLength: ContentPackage.archiveLength(fileLengths: files.map(\.length))
        )
    }

    @Test("the sample's package is made once, reused after a restart, and read back in chunks byte for byte")
    func sample() throws {
        let directory = try TemporaryDirectory(prefix: "store")
        defer { directory.remove() }
        let spec = try Self.sampleSpec()
        let root = deployDirectory.appendingPathComponent("content")
        let store = try ContentStore(contentRoot: root, directory: directory.url, specs: [spec])
        let package = try #require(store.package(app: spec.app, contentID: spec.contentID))
        #expect(package.length == 512 + 27136 + 512 + 57344 + 1024)
        #expect(package.version == "1.0" && package.sha256.count == 64)
        var assembled: [UInt8] = []
        var offset: Int64 = 0
        while true {
            let chunk = try store.read(package, offset: offset, maxBytes: 10_000)
            if chunk.isEmpty { break }
            assembled += chunk
            offset += Int64(chunk.count)
        }
        #expect(assembled == Array(try Data(contentsOf: package.file)))
        #expect(throws: RPCError.self) { _ = try store.read(package, offset: package.length + 1, maxBytes: 1) }
        // A restart with the same files reuses the package as it is
        let made = try FileManager.default.attributesOfItem(atPath: package.file.path)[.modificationDate] as? Date
        let again = try ContentStore(contentRoot: root, directory: directory.url, specs: [spec])
        #expect(again.package(app: spec.app, contentID: spec.contentID) == package)
        #expect(try FileManager.default.attributesOfItem(atPath: package.file.path)[.modificationDate] as? Date == made)
    }

    @Test("a version that is not dot-separated integers, a length other than announced, a changed file or a location outside the root stop the store, naming the product")
    func disagreements() throws {
        let directory = try TemporaryDirectory(prefix: "store")
        defer { directory.remove() }
        let spec = try Self.sampleSpec()
        let root = directory.url.appendingPathComponent("content")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: deployDirectory.appendingPathComponent("content/\(spec.location)"), to: root.appendingPathComponent(spec.location))
        var version = spec; version.version = "1.0-beta"
        var length = spec; length.announcedLength += 1
        var outside = spec; outside.location = "../elsewhere"
        for (candidate, expected) in [(version, "is not dot-separated integers"), (length, "the catalog announces"), (outside, "must be a folder inside the content root")] {
            do {
                _ = try ContentStore(contentRoot: root, directory: directory.url.appendingPathComponent("packages"), specs: [candidate])
                Issue.record("accepted: \(expected)")
            } catch {
                #expect("\(error)".contains(spec.productID) && "\(error)".contains(expected), "\(error)")
            }
        }
        // One byte of a file changed on disk: its SHA-256 no longer matches the catalog
        let file = root.appendingPathComponent(spec.location).appendingPathComponent(spec.files[0].path)
        var bytes = try Data(contentsOf: file)
        bytes[0] ^= 1
        try bytes.write(to: file)
        do {
            _ = try ContentStore(contentRoot: root, directory: directory.url.appendingPathComponent("packages"), specs: [spec])
            Issue.record("a changed file was packed")
        } catch {
            #expect("\(error)".contains(spec.productID) && "\(error)".contains("SHA-256"), "\(error)")
        }
        #expect(ContentPackage.isVersion("2.10.3") && ContentPackage.isVersion("1") && !ContentPackage.isVersion("1.") && !ContentPackage.isVersion("v1"))
    }

    @Test(
        "each 256 KiB piece's digest is worked out once when the package is made and kept beside it; a chunk of the grid takes it (the fast path), any other is hashed, and both give what hashing every chunk gives (the plain twin); damaged kept digests are made again"
    )
    func keptChunkDigests() async throws {
        let directory = try TemporaryDirectory(prefix: "store")
        defer { directory.remove() }
        let sources = try ContentPackageTests.files([300_000, 400_000, 100_001], in: directory, seed: 7)
        let root = directory.url.appendingPathComponent("source")
        let spec = ContentStore.Spec(
            app: puzzle, productID: "com.example.pack", contentID: "com.example.pack", version: "1.2", location: ".",
            files: sources.map { (path: $0.path, length: $0.length, sha256: $0.sha256 ?? "") },
            announcedLength: ContentPackage.archiveLength(fileLengths: sources.map(\.length)))
        let packages = directory.url.appendingPathComponent("packages")
        let store = try ContentStore(contentRoot: root, directory: packages, specs: [spec])
        let package = try #require(store.package(app: puzzle, contentID: spec.contentID))
        let grid = ContentStore.digestGrid
        let whole = [UInt8](try Data(contentsOf: package.file))
        #expect(package.chunkSHA256.count == (whole.count + grid - 1) / grid && package.chunkSHA256.count == 4)
        for (index, kept) in package.chunkSHA256.enumerated() {
            let piece = whole[(index * grid)..<min(whole.count, (index + 1) * grid)]
            #expect(kept == ContentPackage.hex(SHA256.hash(data: Array(piece))), "piece \(index)")
        }
        // Reads of the grid, across it, short and past the end, both ways
        let reads: [(Int64, Int)] = [
            (0, grid), (Int64(grid), grid), (Int64(3 * grid), grid), (Int64(3 * grid), whole.count - 3 * grid), (0, grid - 1), (1, grid), (Int64(grid), 2 * grid), (Int64(whole.count - 10), grid),
            (Int64(whole.count), grid)
        ]
        for (offset, count) in reads {
            let fast = try await store.readChunk(package, offset: offset, maxBytes: count, keptDigests: true)
            let plain = try await store.readChunk(package, offset: offset, maxBytes: count, keptDigests: false)
            let expected = Array(whole[Int(offset)..<min(whole.count, Int(offset) + count)])
            #expect(Array(fast.bytes) == expected && Array(plain.bytes) == expected, "\(offset)+\(count)")
            #expect(fast.sha256 == plain.sha256 && plain.sha256 == ContentPackage.hex(SHA256.hash(data: expected)), "\(offset)+\(count)")
        }
        // A restart reads them back; a damaged file of them is made again
        #expect(try ContentStore(contentRoot: root, directory: packages, specs: [spec]).package(app: puzzle, contentID: spec.contentID) == package)
        let kept = try #require(try FileManager.default.contentsOfDirectory(at: packages, includingPropertiesForKeys: nil).first { $0.pathExtension == "chunks" })
        try Data("0123\n".utf8).write(to: kept)
        #expect(try ContentStore(contentRoot: root, directory: packages, specs: [spec]).package(app: puzzle, contentID: spec.contentID) == package)
        #expect(try String(contentsOf: kept, encoding: .utf8).split(separator: "\n").count == 4)
    }
}
