import StoreBus
import StoreSchema

/// Asks the store for products (SKProductsRequest).
///
/// ```swift
/// let response = try await ProductsRequest(productIdentifiers: ["com.example.gems100"], connection: connection).start()
/// for product in response.products { print(product.localizedTitle, product.formattedPrice) }
/// ```
public struct ProductsRequest: Sendable {
    /// The identifiers asked for, in order.
    public var productIdentifiers: [String]
    /// ISO 3166-1 alpha-3 storefront such as `FRA`; nil for the app's default storefront.
    public var storefront: String?
    private let connection: StoreConnection

    /// A request for `productIdentifiers` (answered in this order, repeats once).
    public init(productIdentifiers: [String], storefront: String? = nil, connection: StoreConnection) {
        self.productIdentifiers = productIdentifiers
        self.storefront = storefront
        self.connection = connection
    }

    /// A request for a set of identifiers (answered in sorted order).
    public init(productIdentifiers: Set<String>, storefront: String? = nil, connection: StoreConnection) {
        self.init(productIdentifiers: productIdentifiers.sorted(), storefront: storefront, connection: connection)
    }

    /// Sends the request and tells `delegate` the answer, as SKProductsRequest does: then
    /// `requestDidFinish`, or `request(_:didFailWithError:)` alone. Returns at once.
    public func start(delegate: any ProductsRequestDelegate) {
        Task {
            do {
                let response = try await start()
                delegate.productsRequest(self, didReceive: response)
                delegate.requestDidFinish(self)
            } catch {
                delegate.request(self, didFailWithError: error)
            }
        }
    }

    /// Sends the request.
    public func start() async throws -> ProductsResponse {
        let response = try await connection.call(
            Storebus_Catalog_V1_Catalog.fetchProducts,
            .with {
                $0.appBundleID = connection.configuration.appBundleID
                $0.productIdentifiers = productIdentifiers
                $0.storefront = storefront ?? ""
            })
        return ProductsResponse(
            products: response.products.map(Product.init),
            invalidProductIdentifiers: response.invalidProductIdentifiers,
            storefront: response.storefront
        )
    }
}

/// Receives a ``ProductsRequest``'s answer (SKProductsRequestDelegate), from a task of the SDK's.
public protocol ProductsRequestDelegate: AnyObject, Sendable {
    /// The store answered.
    func productsRequest(_ request: ProductsRequest, didReceive response: ProductsResponse)
    /// The request failed (a ``StoreError``); nothing else follows.
    func request(_ request: ProductsRequest, didFailWithError error: any Error)
    /// The request is over, after its answer.
    func requestDidFinish(_ request: ProductsRequest)
}

/// The callbacks other than the answer are optional, as in StoreKit: these do nothing.
extension ProductsRequestDelegate {
    /// Does nothing.
    public func request(_ request: ProductsRequest, didFailWithError error: any Error) {}
    /// Does nothing.
    public func requestDidFinish(_ request: ProductsRequest) {}
}

/// The store's answer to a ``ProductsRequest`` (SKProductsResponse).
public struct ProductsResponse: Sendable, Equatable {
    /// Products for sale in the storefront, in the order asked.
    public var products: [Product]
    /// Identifiers that are not for sale here: unknown, not cleared for sale, or without a price in
    /// the storefront.
    public var invalidProductIdentifiers: [String]
    /// The storefront the answer is for.
    public var storefront: String
}
