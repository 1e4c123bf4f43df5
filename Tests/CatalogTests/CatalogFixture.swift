import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema

/// A real `storebus-catalog` process serving a copy of the sample catalog from a temporary directory.
final class CatalogFixture: Sendable {
    let directory: TemporaryDirectory
    let endpoint: String
    let catalogPath: String
    let process: ServiceProcess

    init() throws {
        directory = try TemporaryDirectory(prefix: "catalog")
        endpoint = directory.ipcEndpoint("catalog")
        catalogPath = directory.path("catalog.json")
        try FileManager.default.copyItem(atPath: deployDirectory.appendingPathComponent("catalog/catalog.json").path, toPath: catalogPath)
        process = ServiceProcess(
            name: "storebus-catalog",
            arguments: ["--rpc-endpoint", endpoint, "--catalog", catalogPath, "--log-level", "warning"],
            logFile: directory.url.appendingPathComponent("catalog.log")
        )
    }

    func start() async throws {
        try process.start()
        try await process.waitUntilServing(endpoint: endpoint)
    }

    func client() throws -> RPCClient {
        try RPCClient(configuration: ClientConfiguration(endpoints: [endpoint]))
    }

    /// Rewrites the catalog file through a JSON object edit.
    func editCatalog(_ edit: (inout [String: Any]) -> Void) throws {
        var object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: catalogPath))) as! [String: Any]
        edit(&object)
        try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted]).write(to: URL(fileURLWithPath: catalogPath), options: .atomic)
    }

    func stop() async {
        await process.stop()
        directory.remove()
    }
}

/// Helpers to edit the sample catalog's JSON.
extension Dictionary where Key == String, Value == Any {
    mutating func editProduct(app: Int, id: String, _ edit: (inout [String: Any]) -> Void) {
        var apps = self["apps"] as! [[String: Any]]
        var products = apps[app]["products"] as! [[String: Any]]
        let index = products.firstIndex { $0["productId"] as? String == id }!
        edit(&products[index])
        apps[app]["products"] = products
        self["apps"] = apps
    }
}

let monthly = "com.storebus.demo.puzzle.premium.monthly"
let yearly = "com.storebus.demo.puzzle.premium.yearly"
let seasonPass = "com.storebus.demo.puzzle.seasonpass"
let retired = "com.storebus.demo.puzzle.retired"
let usOnly = "com.storebus.demo.puzzle.usonly"
