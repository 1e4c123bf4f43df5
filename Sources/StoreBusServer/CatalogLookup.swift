import StoreBus
import StoreSchema
import Synchronization

/// Asks the catalog service about products (type, sale status, price in a storefront).
///
/// Answers are kept for `maxAge` (one second by default), so payments for the same product ask the
/// catalog about once per `maxAge` (lookups that miss at the same moment each ask; the answers are
/// the same): a reloaded catalog's prices and sale status apply to payments from at most `maxAge`
/// after the reload. An answer from another catalog version (a reload seen by
/// another lookup) drops every answer kept before it. Errors (an unknown app or storefront) are never kept.
public struct CatalogLookup: Sendable {
    let catalog: Storebus_Catalog_V1_Catalog.Client
    let maxAge: Duration
    private let cache = CacheBox()

    /// Most answers kept; when full, the cache starts over.
    static let capacity = 4096

    /// The names' bytes: String keys would take canonically equivalent spellings for one name (the
    /// Kelvin sign for K), which the catalog, comparing bytes, answers apart.
    private struct Key: Hashable {
        let app: [UInt8]
        let identifier: [UInt8]
        let storefront: [UInt8]
    }

    private struct Entry {
        let record: Storebus_Catalog_V1_ProductRecord?
        let storefront: String
        let expires: ContinuousClock.Instant
    }

    private struct Cache {
        var entries: [Key: Entry] = [:]
        var version: UInt64 = 0
    }

    private final class CacheBox: Sendable {
        let state = Mutex(Cache())
    }

    /// A lookup through `client`, connected to the catalog's RPC endpoints, keeping answers for
    /// `maxAge` (zero: ask every time).
    public init(client: RPCClient, maxAge: Duration = .seconds(1)) {
        catalog = .init(client)
        self.maxAge = maxAge
    }

    /// The product's record in the storefront, or nil when the catalog does not know it. The
    /// catalog's NOT_FOUND (unknown app) and INVALID_ARGUMENT (unknown storefront) pass through.
    public func product(app: String, identifier: String, storefront: String) async throws(RPCError) -> (record: Storebus_Catalog_V1_ProductRecord?, storefront: String) {
        let key = Key(app: Array(app.utf8), identifier: Array(identifier.utf8), storefront: Array(storefront.utf8))
        let now = ContinuousClock.now
        if maxAge > .zero, let kept = cache.state.withLock({ $0.entries[key] }), kept.expires > now {
            return (kept.record, kept.storefront)
        }
        let response = try await catalog.lookupProducts(
            .with {
                $0.appBundleID = app
                $0.productIdentifiers = [identifier]
                $0.storefront = storefront
            }, options: CallOptions(timeout: .seconds(5)))
        let record = response.products.first
        if maxAge > .zero {
            cache.state.withLock { cache in
                // Versions are content hashes: any other version means the catalog was reloaded.
                if response.catalogVersion != cache.version {
                    cache.entries.removeAll()
                    cache.version = response.catalogVersion
                }
                if cache.entries.count >= Self.capacity { cache.entries.removeAll() }
                cache.entries[key] = Entry(record: record, storefront: response.storefront, expires: now + maxAge)
            }
        }
        return (record, response.storefront)
    }

    /// Throws NOT_FOUND when the catalog does not know the app.
    public func checkApp(_ app: String) async throws(RPCError) {
        _ = try await catalog.lookupProducts(.with { $0.appBundleID = app }, options: CallOptions(timeout: .seconds(5)))
    }
}
