import CatalogFormat
import StoreBus
import StoreBusServer
import StoreSchema

/// The handlers of `storebus.catalog.v1.Catalog`, answered from a ``CatalogStore``.
public struct CatalogHandlers: Storebus_Catalog_V1_Catalog.Handlers {
    let store: CatalogStore

    /// Handlers answering from `store`.
    public init(store: CatalogStore) {
        self.store = store
    }

    /// A router answering every Catalog method.
    public var router: RPCRouter {
        var router = RPCRouter()
        router.register(self)
        return router
    }

    /// Answers from the catalog in memory; a reload reads a file, off the loop.
    public var loopSafe: LoopSafeMethods {
        .all(of: Storebus_Catalog_V1_Catalog.self, except: [Storebus_Catalog_V1_Catalog.reloadCatalog.erased])
    }

    public func fetchProducts(_ request: Storebus_Catalog_V1_FetchProductsRequest, context: ServerContext) async throws -> Storebus_Catalog_V1_FetchProductsResponse {
        try store.catalog.fetchProducts(request)
    }

    public func lookupProducts(_ request: Storebus_Catalog_V1_LookupProductsRequest, context: ServerContext) async throws -> Storebus_Catalog_V1_LookupProductsResponse {
        try store.catalog.lookupProducts(request)
    }

    public func listProducts(_ request: Storebus_Catalog_V1_ListProductsRequest, context: ServerContext) async throws -> Storebus_Catalog_V1_ListProductsResponse {
        try store.catalog.listProducts(request)
    }

    public func getCatalogInfo(_ request: Storebus_Catalog_V1_GetCatalogInfoRequest, context: ServerContext) async throws -> Storebus_Catalog_V1_GetCatalogInfoResponse {
        store.catalog.info
    }

    public func reloadCatalog(_ request: Storebus_Catalog_V1_ReloadCatalogRequest, context: ServerContext) async throws -> Storebus_Catalog_V1_ReloadCatalogResponse {
        // Reading and validating a file is slow next to a query: do it off the RPC reactor.
        try await Task.detached { [store] in try Self.reload(store: store, request: request) }.value
    }

    /// ReloadCatalog: a changed valid file replaces the catalog; a dry run reports problems as its
    /// answer; a rejected file is FAILED_PRECONDITION naming the first problems, with problems as
    /// field violations. However many problems a file has and however long the values they quote,
    /// an answer lists only what fits well under the message limit, and says how many more there are.
    static func reload(store: CatalogStore, request: Storebus_Catalog_V1_ReloadCatalogRequest) throws(RPCError) -> Storebus_Catalog_V1_ReloadCatalogResponse {
        let reloaded: (catalog: Catalog, previousVersion: UInt64)
        do {
            reloaded = try store.reload(dryRun: request.dryRun)
        } catch {
            let (problems, more) = error.reported()
            if request.dryRun {
                var response = Storebus_Catalog_V1_ReloadCatalogResponse()
                response.catalogVersion = store.catalog.version
                response.problems = problems.map { problem in
                    .with {
                        $0.location = problem.field; $0.message = problem.reason; $0.fatal = true
                    }
                }
                if more > 0 {
                    response.problems.append(
                        .with {
                            $0.message = "\(more) more problems not listed; fix these and check again"; $0.fatal = true
                        })
                }
                return response
            }
            var details = Storebus_Common_V1_ErrorStatus()
            details.fieldViolations = problems.map { problem in
                .with {
                    $0.field = problem.field; $0.description_p = problem.reason
                }
            }
            details.info.reason = "CATALOG_INVALID"
            details.info.domain = "storebus.catalog"
            details.info.metadata["file"] = store.path
            details.info.metadata["problems"] = String(error.problems.count)
            throw RPCError(.failedPrecondition, "the catalog file was rejected; the previous catalog keeps serving: \(error.summary)", details: details)
        }
        var response = Storebus_Catalog_V1_ReloadCatalogResponse()
        response.catalogVersion = request.dryRun ? reloaded.previousVersion : reloaded.catalog.version
        response.changed = !request.dryRun && reloaded.catalog.version != reloaded.previousVersion
        return response
    }
}
