import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting

/// The download tests' content: the demo catalog plus a non-consumable whose hosted content is one
/// large file (``HostedContentFixture``).
struct DownloadFixture {
    static let bigPack = "com.storebus.demo.puzzle.bigpack"
    static let levelPack = "com.storebus.demo.puzzle.levelpack1"

    let content: HostedContentFixture
    let pack: HostedContentFixture.Pack

    /// A fixture whose big pack is `megabytes` MiB, at content `version`.
    init(megabytes: Int, version: String = "1.0", seed: UInt8 = 7) throws {
        pack = .init(productID: Self.bigPack, megabytes: megabytes, version: version, seed: seed)
        content = try HostedContentFixture(packs: [pack])
    }

    var directory: TemporaryDirectory { content.directory }
    var contentRoot: URL { content.contentRoot }
    var bigFileLength: Int64 { pack.fileLength }
    var packageLength: Int64 { pack.packageLength }

    func cluster(gatewayCount: Int = 2) throws -> StoreCluster { try content.cluster(gatewayCount: gatewayCount) }

    static func sha256(of file: URL) throws -> String { try HostedContentFixture.sha256(of: file) }
}
