import ContentPackage
import Crypto
import Foundation
import StoreBusSDK

/// A content root and a catalog for download tests and benchmarks: the demo catalog and its level
/// pack, plus non-consumables whose hosted content is one large file of deterministic bytes each.
public struct HostedContentFixture: Sendable {
    /// One large product.
    public struct Pack: Sendable {
        public var productID: String
        public var megabytes: Int
        public var version: String
        public var seed: UInt8

        public init(productID: String, megabytes: Int, version: String = "1.0", seed: UInt8 = 7) {
            self.productID = productID
            self.megabytes = megabytes
            self.version = version
            self.seed = seed
        }

        /// The folder of its content under the content root, and its one file.
        public var folder: String { productID.split(separator: ".").last.map(String.init) ?? productID }
        public var fileName: String { "big.bin" }
        public var fileLength: Int64 { Int64(megabytes) << 20 }
        public var packageLength: Int64 { ContentPackage.archiveLength(fileLengths: [fileLength]) }
    }

    public let directory: TemporaryDirectory
    public let contentRoot: URL
    public let catalogPath: String

    /// Makes the content of `packs` and a catalog naming them, in a new temporary directory.
    public init(packs: [Pack]) throws {
        directory = try TemporaryDirectory(prefix: "dl")
        contentRoot = directory.url.appendingPathComponent("content")
        try FileManager.default.createDirectory(at: contentRoot, withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: deployDirectory.appendingPathComponent("content/puzzle-levelpack1"), to: contentRoot.appendingPathComponent("puzzle-levelpack1")
        )
        catalogPath = directory.path("catalog.json")
        try write(packs)
    }

    /// The file of `pack` under the content root.
    public func file(of pack: Pack) -> URL {
        contentRoot.appendingPathComponent(pack.folder).appendingPathComponent(pack.fileName)
    }

    /// (Re)writes the packs' files and the catalog: a changed version or seed changes the content.
    public func write(_ packs: [Pack]) throws {
        var hashes: [String] = []
        for pack in packs { hashes.append(try Self.writeBytes(file(of: pack), length: pack.fileLength, seed: pack.seed)) }
        let source = deployDirectory.appendingPathComponent("catalog/catalog.json")
        var catalog = try JSONSerialization.jsonObject(with: Data(contentsOf: source)) as! [String: Any]
        var apps = catalog["apps"] as! [[String: Any]]
        var products = apps[0]["products"] as! [[String: Any]]
        for (pack, sha256) in zip(packs, hashes) {
            products.append([
                "productId": pack.productID, "referenceName": "Pack \(pack.folder)", "type": "nonConsumable",
                "prices": ["USA": "4.99", "FRA": "4.99", "JPN": "600"],
                "localizations": ["en_US": ["title": "Pack \(pack.folder)", "description": "A large download."]],
                "hostedContent": [
                    "contentId": pack.productID, "version": pack.version, "root": pack.folder,
                    "files": [["path": pack.fileName, "length": pack.fileLength, "sha256": sha256]]
                ]
            ])
        }
        apps[0]["products"] = products
        catalog["apps"] = apps
        try JSONSerialization.data(withJSONObject: catalog).write(to: URL(fileURLWithPath: catalogPath), options: .atomic)
    }

    /// Writes `length` bytes in 1 MiB pieces: one block of a simple generator, each piece marked with
    /// its number so that no two are alike. Returns their SHA-256.
    static func writeBytes(_ file: URL, length: Int64, seed: UInt8) throws -> String {
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        var hash = SHA256()
        var state = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 | 1
        var block = [UInt8](repeating: 0, count: 1 << 20)
        block.withUnsafeMutableBytes { bytes in
            let words = bytes.bindMemory(to: UInt64.self)
            for index in words.indices {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                words[index] = state
            }
        }
        var left = length
        var number: UInt64 = 0
        while left > 0 {
            let count = Int(min(left, 1 << 20))
            withUnsafeBytes(of: number) { block.replaceSubrange(0..<8, with: $0) }
            let piece = block[0..<count]
            hash.update(data: piece)
            try handle.write(contentsOf: piece)
            left -= Int64(count)
            number += 1
        }
        return ContentPackage.hex(hash.finalize())
    }

    /// The SHA-256 of a file, read in 1 MiB pieces.
    public static func sha256(of file: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        var hash = SHA256()
        while let piece = try handle.read(upToCount: 1 << 20), !piece.isEmpty { hash.update(data: piece) }
        return ContentPackage.hex(hash.finalize())
    }

    /// A cluster serving this fixture.
    public func cluster(logLevel: String = "warning", gatewayCount: Int = 2) throws -> StoreCluster {
        try StoreCluster(logLevel: logLevel, gatewayCount: gatewayCount, catalogPath: catalogPath, contentRoot: contentRoot.path)
    }
}

extension StoreCluster {
    /// The package the download service made of `productID`'s hosted content.
    public func packageFile(of productID: String) throws -> URL {
        let packages = URL(fileURLWithPath: directory.path("download-data")).appendingPathComponent("packages")
        guard
            let name = try FileManager.default.contentsOfDirectory(atPath: packages.path)
                .first(where: { $0.hasPrefix(productID + "-") && $0.hasSuffix(".tar") })
        else { throw ClusterFailure(description: "no package of \(productID)") }
        return packages.appendingPathComponent(name)
    }

    /// A device of `account` with its own download directory, launched (observer attached).
    public func device(_ account: String, device: String = "phone", downloads: URL, gateways: [Int]? = nil, window: Int = 4) async throws -> (PaymentQueue, Recorder) {
        var configuration = configuration(account: account, device: device, gateways: gateways)
        configuration.downloadDirectory = downloads
        configuration.downloadWindow = window
        let queue = try PaymentQueue(configuration: configuration)
        let recorder = Recorder(queue)
        guard await recorder.attached() else { throw ClusterFailure(description: "\(account)'s launch replay did not end") }
        return (queue, recorder)
    }

    /// Buys `product` and waits until it is purchased; returns the transaction as the callbacks have it.
    public func buy(_ product: String, _ queue: PaymentQueue, _ recorder: Recorder) async throws -> PaymentTransaction {
        let added = try await queue.addPayment(Payment(productIdentifier: product))
        guard await recorder.purchased(added.id) else { throw ClusterFailure(description: "\(added.id) was not reported purchased") }
        guard let bought = queue.transactions.first(where: { $0.id == added.id }) else {
            throw ClusterFailure(description: "\(added.id) is not among the queue's transactions")
        }
        return bought
    }
}
