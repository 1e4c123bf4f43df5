import ArgumentParser
import Catalog
import CatalogFormat
import Foundation
import StoreBus
import StoreBusCommandLine
import StoreBusHost

/// `storebus-catalog`: serves the product catalog (storebus.catalog.v1.Catalog) from a catalog file.
@main
struct CatalogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: CatalogService.process,
        abstract: "Serve products, storefronts and localized prices from a catalog file (SIGHUP reloads it)."
    )

    @OptionGroup var host: HostOptions

    @Option(name: .customLong("catalog"), help: "The catalog file (JSON). Also STOREBUS_CATALOG_FILE, or service.catalogFile in the config file.")
    var catalogFile: String?

    func run() async throws {
        let host = try self.host.resolve(defaults: CatalogConfiguration.defaultHost)
        ServiceHost.bootstrap(host)
        var configuration = try host.serviceSettings(CatalogConfiguration.self) ?? CatalogConfiguration()
        if let path = catalogFile ?? ProcessInfo.processInfo.environment["STOREBUS_CATALOG_FILE"] { configuration.catalogFile = path }
        if self.host.checkConfig {
            _ = try CatalogValidator.load(path: configuration.catalogFile)
            if self.host.checked(CatalogService.process, host) { return }
        }
        try await CatalogService(host: host, configuration: configuration).run()
    }
}
