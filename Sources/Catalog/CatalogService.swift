import CatalogFormat
import Foundation
import ServiceLifecycle
import StoreBus
import StoreBusHost
import StoreSchema

/// The catalog's own settings: the config file's `service` section for `storebus-catalog`. Every
/// setting has its default here; a config file names only what it changes.
public struct CatalogConfiguration: Sendable, Equatable, Decodable {
    /// The catalog file (JSON, see deploy/README.md). Relative to the config file when read from one,
    /// else to the working directory. Default `deploy/catalog/catalog.json`.
    public var catalogFile = "deploy/catalog/catalog.json"

    /// Where and how the process serves by default: RPC on `tcp://127.0.0.1:7301`, no event log
    /// (``ServiceRegistry/catalog``).
    public static let defaultHost = ServiceRegistry.catalog.defaultHost

    /// The defaults.
    public init() {}

    enum CodingKeys: String, CodingKey { case catalogFile }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        // Only a path the file gives is the file's, relative to its folder; the default stays the
        // working directory's.
        if let path = try container.decodeIfPresent(String.self, forKey: .catalogFile) { catalogFile = decoder.configPath(path) }
    }
}

/// `storebus-catalog` as a service: the Catalog methods over the catalog file, reloaded on SIGHUP (in
/// its own process) and by ReloadCatalog. Its executable, a test or any program runs it the same way.
public struct CatalogService: Service {
    /// The executable's name, in logs and Health answers.
    public static let process = "storebus-catalog"

    let host: HostConfiguration
    let configuration: CatalogConfiguration

    /// A catalog serving as `host` says, with `configuration`.
    public init(host: HostConfiguration, configuration: CatalogConfiguration) {
        self.host = host
        self.configuration = configuration
    }

    /// Loads the catalog file, then serves until graceful shutdown (SIGINT or SIGTERM in its own
    /// process). Throws ``StartupError`` when the file is rejected.
    public func run() async throws {
        let host = try ServiceHost(process: Self.process, configuration: host)
        let store: CatalogStore
        do {
            store = try CatalogStore(path: configuration.catalogFile, logger: host.logger)
        } catch {
            throw StartupError("the catalog file was rejected:\n\(error.description)")
        }
        try await host.serve(
            router: CatalogHandlers(store: store).router,
            services: [Storebus_Catalog_V1_Catalog.serviceName],
            background: host.configuration.handlesSignals ? [await CatalogReloadOnHangup(store: store, logger: host.logger)] : []
        )
    }
}
