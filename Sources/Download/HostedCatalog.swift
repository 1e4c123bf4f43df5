import Foundation
import Logging
import StoreBus
import StoreSchema

/// What the catalog says is hosted: every downloadable product of every app, with its files, read
/// at start (the catalog's admin methods, called from inside the deployment).
enum HostedCatalog {
    /// The content specs of every downloadable product, waiting up to `wait` for the catalog to answer.
    static func specs(catalog: RPCClient, wait: Duration, logger: Logger) async throws -> (specs: [ContentStore.Spec], version: UInt64) {
        let deadline = ContinuousClock.now + wait
        var said = false
        while true {
            do {
                return try await read(catalog)
            } catch let error as RPCError where error.code == .unavailable || error.code == .deadlineExceeded {
                guard ContinuousClock.now < deadline else {
                    throw StartupError("the catalog did not answer within \(wait): \(error.message)")
                }
                if !said {
                    logger.info("Waiting for the catalog", metadata: ["error": "\(error.message)"])
                    said = true
                }
                try await Task.sleep(for: .milliseconds(250))
            }
        }
    }

    static func read(_ rpc: RPCClient) async throws -> (specs: [ContentStore.Spec], version: UInt64) {
        let catalog = Storebus_Catalog_V1_Catalog.Client(rpc)
        let options = CallOptions(timeout: .seconds(10))
        let info = try await catalog.getCatalogInfo(.init(), options: options)
        var specs: [ContentStore.Spec] = []
        for app in info.apps {
            var identifiers: [String] = []
            var token = ""
            repeat {
                let page = try await catalog.listProducts(
                    .with {
                        $0.appBundleID = app.bundleID
                        $0.pageToken = token
                    }, options: options)
                identifiers += page.products.map(\.productIdentifier)
                token = page.nextPageToken
            } while !token.isEmpty
            for start in stride(from: 0, to: identifiers.count, by: 1000) {
                let records = try await catalog.lookupProducts(
                    .with {
                        $0.appBundleID = app.bundleID
                        $0.productIdentifiers = Array(identifiers[start..<min(start + 1000, identifiers.count)])
                    }, options: options)
                for product in records.products where !product.hostedContent.isEmpty {
                    // Files product by product: a package can list thousands.
                    let detailed = try await catalog.lookupProducts(
                        .with {
                            $0.appBundleID = app.bundleID
                            $0.productIdentifiers = [product.productIdentifier]
                            $0.includeFiles = true
                        }, options: options)
                    for content in detailed.products.first?.hostedContent ?? [] {
                        specs.append(
                            ContentStore.Spec(
                                app: app.bundleID, productID: product.productIdentifier, contentID: content.contentIdentifier,
                                version: content.version, location: content.location,
                                files: content.files.map { (path: $0.path, length: $0.length, sha256: $0.sha256) },
                                announcedLength: content.contentLength
                            ))
                    }
                }
            }
        }
        return (specs, info.catalogVersion)
    }
}
