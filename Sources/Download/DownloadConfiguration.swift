import Foundation
import StoreBus
import StoreBusHost
import StoreBusPostgres
import StoreBusStorage

/// The download service's own settings: the config file's `service` section for
/// `storebus-download`. Every setting has its default here; a config file names only what it
/// changes.
public struct DownloadConfiguration: Sendable, Equatable, Decodable {
    /// The folder holding every product's hosted content: a product's files are read from
    /// `<contentRoot>/<location>`, the location its catalog entry names (`hostedContent.root`).
    /// Relative to the config file when given in one. Default `deploy/content`.
    public var contentRoot = "deploy/content"
    /// RPC endpoints of storebus-catalog, which names the hosted content. Default `tcp://127.0.0.1:7301`.
    public var catalogEndpoints = [ServiceRegistry.catalog.rpcEndpoint]
    /// RPC endpoints of storebus-payment-queue, which keeps the download states. Default
    /// `tcp://127.0.0.1:7302`.
    public var paymentQueueEndpoints = [ServiceRegistry.paymentQueue.rpcEndpoint]
    /// Doorbell endpoints of storebus-payment-queue (none: poll). Default `tcp://127.0.0.1:7312`.
    public var paymentQueueEventEndpoints = ServiceRegistry.paymentQueue.eventEndpoint.map { [$0] } ?? []
    /// RPC endpoints of storebus-receipt, whose receipts prove what an account owns. Default
    /// `tcp://127.0.0.1:7303`.
    public var receiptEndpoints = [ServiceRegistry.receipt.rpcEndpoint]
    /// SQLite durability: `full` or `normal`. Default `full`.
    public var durability = Durability.full
    /// How long the service waits at start for the catalog to answer, in seconds (1 to 3600).
    /// Default 60.
    public var catalogWaitSeconds = 60
    /// Where the downloads' ledger is kept: `sqlite` (a file in the data directory, the default) or
    /// `postgres` (the database `postgres` names, a database of the download service's own, for
    /// several instances of the service, each serving the accounts of the shards it holds).
    public var storage = SQLEngine.sqlite
    /// With `storage` `postgres`: the servers, role and database.
    public var postgres: PostgresSettings?

    /// Where and how the process serves by default: RPC on `tcp://127.0.0.1:7304`, data in
    /// `data/download`.
    public static let defaultHost = ServiceRegistry.download.defaultHost

    /// The defaults.
    public init() {}

    enum CodingKeys: String, CodingKey {
        case contentRoot, catalogEndpoints, paymentQueueEndpoints, paymentQueueEventEndpoints, receiptEndpoints, durability, catalogWaitSeconds, storage, postgres
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = Self()
        contentRoot = try container.value(.contentRoot, default: defaults.contentRoot)
        catalogEndpoints = try container.value(.catalogEndpoints, default: defaults.catalogEndpoints)
        paymentQueueEndpoints = try container.value(.paymentQueueEndpoints, default: defaults.paymentQueueEndpoints)
        paymentQueueEventEndpoints = try container.value(.paymentQueueEventEndpoints, default: defaults.paymentQueueEventEndpoints)
        receiptEndpoints = try container.value(.receiptEndpoints, default: defaults.receiptEndpoints)
        durability = try container.value(.durability, default: defaults.durability)
        catalogWaitSeconds = try container.value(.catalogWaitSeconds, default: defaults.catalogWaitSeconds)
        storage = try container.value(.storage, default: defaults.storage)
        postgres = try container.decodeIfPresent(PostgresSettings.self, forKey: .postgres)
    }

    /// Throws a ``StartupError`` naming the first setting that cannot work.
    public func validate() throws {
        let lists: [(String, [String])] = [
            ("catalogEndpoints", catalogEndpoints), ("paymentQueueEndpoints", paymentQueueEndpoints), ("receiptEndpoints", receiptEndpoints)
        ]
        for (name, list) in lists where list.isEmpty {
            throw StartupError("service.\(name) is an empty list: name at least one endpoint, or leave the key out for the default")
        }
        guard !contentRoot.isEmpty else { throw StartupError("service.contentRoot must name the folder holding the hosted content") }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: contentRoot, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw StartupError("service.contentRoot \(contentRoot) is not a folder")
        }
        guard (1...3600).contains(catalogWaitSeconds) else { throw StartupError("service.catalogWaitSeconds must be from 1 to 3600") }
        _ = try PostgresSettings.forStorage(storage, postgres)
    }
}
