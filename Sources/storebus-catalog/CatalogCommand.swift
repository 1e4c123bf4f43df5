import ArgumentParser
import Catalog
import Foundation
import StoreBus
import StoreSchema

/// `storebus-catalog`: serves the product catalog (storebus.catalog.v1.Catalog) from a catalog file.
@main
struct CatalogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storebus-catalog",
        abstract: "Serve products, storefronts and localized prices from a catalog file (SIGHUP reloads it)."
    )

    @OptionGroup var host: HostOptions

    @Option(name: .customLong("catalog"), help: "The catalog file (JSON). Also STOREBUS_CATALOG_FILE, or service.catalogFile in the config file.")
    var catalogFile: String?

    /// The config file's `service` section.
    struct Settings: Decodable {
        var catalogFile: String?
    }

    func run() async throws {
        let configuration = try host.resolve(defaults: HostConfiguration(rpcEndpoints: ["tcp://127.0.0.1:7301"]))
        ServiceHost.bootstrapLogging(level: configuration.logLevel)
        let settings = try configuration.serviceSettings(Settings.self)
        let path = catalogFile
            ?? ProcessInfo.processInfo.environment["STOREBUS_CATALOG_FILE"]
            ?? settings?.catalogFile.map(configuration.resolvingConfigPath)
            ?? "deploy/catalog/catalog.json"
        let host = try ServiceHost(process: "storebus-catalog", configuration: configuration)
        let store: CatalogStore
        do {
            store = try CatalogStore(path: path, logger: host.logger)
        } catch {
            throw StartupError("the catalog file was rejected:\n\(error.description)")
        }
        try await host.serve(
            router: CatalogService.router(store: store),
            services: [Storebus_Catalog_V1_Catalog.serviceName],
            background: [await CatalogReloadOnHangup(store: store, logger: host.logger)]
        )
    }
}
