import StoreBus
import StoreSchema

/// The handlers of `storebus.catalog.v1.Catalog`.
public enum CatalogService {
    /// A router answering every Catalog method from `store`.
    public static func router(store: CatalogStore) -> RPCRouter {
        var router = RPCRouter()
        router.register(Storebus_Catalog_V1_Catalog.fetchProducts) { request, context in
            try context.authorize(app: request.appBundleID)
            return try store.catalog.fetchProducts(request)
        }
        router.register(Storebus_Catalog_V1_Catalog.lookupProducts) { request, _ in
            try store.catalog.lookupProducts(request)
        }
        router.register(Storebus_Catalog_V1_Catalog.getCatalogInfo) { _, _ in
            store.catalog.info
        }
        router.register(Storebus_Catalog_V1_Catalog.reloadCatalog) { request, _ in
            // Reading and validating a file is slow next to a query: do it off the RPC reactor.
            try await Task.detached { try reload(store: store, request: request) }.value
        }
        return router
    }

    /// ReloadCatalog: a changed valid file replaces the catalog; a dry run reports problems as its
    /// answer; a rejected file is FAILED_PRECONDITION with each problem as a field violation.
    static func reload(store: CatalogStore, request: Storebus_Catalog_V1_ReloadCatalogRequest) throws(RPCError) -> Storebus_Catalog_V1_ReloadCatalogResponse {
        let before = store.catalog.version
        let loaded: Catalog
        do {
            loaded = try store.reload(dryRun: request.dryRun)
        } catch {
            if request.dryRun {
                var response = Storebus_Catalog_V1_ReloadCatalogResponse()
                response.catalogVersion = before
                response.problems = error.problems.map { problem in
                    .with { $0.location = problem.field; $0.message = problem.reason; $0.fatal = true }
                }
                return response
            }
            var details = Storebus_Common_V1_ErrorStatus()
            details.fieldViolations = error.problems.map { problem in
                .with { $0.field = problem.field; $0.description_p = problem.reason }
            }
            details.info.reason = "CATALOG_INVALID"
            details.info.domain = "storebus.catalog"
            details.info.metadata["file"] = store.path
            throw RPCError(.failedPrecondition, "the catalog file was rejected; the previous catalog keeps serving: \(error.description)", details: details)
        }
        var response = Storebus_Catalog_V1_ReloadCatalogResponse()
        response.catalogVersion = request.dryRun ? before : loaded.version
        response.changed = !request.dryRun && loaded.version != before
        return response
    }
}
