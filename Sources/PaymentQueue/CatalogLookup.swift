import StoreBus
import StoreSchema

/// Asks the catalog service about products (type, sale status, price in a storefront).
public struct CatalogLookup: Sendable {
    let client: RPCClient

    /// A lookup through `client`, connected to the catalog's RPC endpoints.
    public init(client: RPCClient) {
        self.client = client
    }

    /// The product's record in the storefront, or nil when the catalog does not know it. The
    /// catalog's NOT_FOUND (unknown app) and INVALID_ARGUMENT (unknown storefront) pass through.
    public func product(app: String, identifier: String, storefront: String) async throws(RPCError) -> (record: Storebus_Catalog_V1_ProductRecord?, storefront: String) {
        let response = try await client.call(Storebus_Catalog_V1_Catalog.lookupProducts, .with {
            $0.appBundleID = app
            $0.productIdentifiers = [identifier]
            $0.storefront = storefront
        }, options: CallOptions(timeout: .seconds(5)))
        return (response.products.first, response.storefront)
    }

    /// Throws NOT_FOUND when the catalog does not know the app.
    public func checkApp(_ app: String) async throws(RPCError) {
        _ = try await client.call(Storebus_Catalog_V1_Catalog.lookupProducts, .with { $0.appBundleID = app }, options: CallOptions(timeout: .seconds(5)))
    }
}
