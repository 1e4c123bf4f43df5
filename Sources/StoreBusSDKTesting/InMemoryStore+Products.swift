import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

// The store in memory's catalog: its products, in the one storefront it has (USA, en_US).
extension InMemoryStore {
    /// FetchProducts: the products asked for, once each, in the order asked; unknown identifiers
    /// listed as invalid.
    func fetchProducts(_ request: Storebus_Catalog_V1_FetchProductsRequest) -> Storebus_Catalog_V1_FetchProductsResponse {
        let products = state.withLock { $0.products }
        var seen = Set<String>()
        var response = Storebus_Catalog_V1_FetchProductsResponse()
        response.storefront = "USA"
        for id in request.productIdentifiers where seen.insert(id).inserted {
            guard let product = products[id] else {
                response.invalidProductIdentifiers.append(id)
                continue
            }
            response.products.append(
                .with {
                    $0.productIdentifier = product.id
                    $0.localizedTitle = product.title
                    $0.price = product.price
                    $0.priceLocale = "en_US"
                    $0.currencyCode = "USD"
                    $0.formattedPrice = "$\(product.price)"
                    $0.productType = product.type
                    if let period = product.period {
                        $0.subscriptionPeriod = .with {
                            $0.numberOfUnits = Int32(period.numberOfUnits)
                            switch period.unit {
                            case .day: $0.unit = .day
                            case .week: $0.unit = .week
                            case .month: $0.unit = .month
                            case .year: $0.unit = .year
                            }
                        }
                    }
                    $0.subscriptionGroupIdentifier = product.group ?? ""
                })
        }
        return response
    }
}
