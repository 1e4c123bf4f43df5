import Catalog
import CatalogFormat
import Foundation
import PaymentQueue
import StoreBus
import StoreBusCommandLine
import StoreBusHost
import StoreBusTesting
import Testing

@testable import Gateway

/// The services' configurations as a config file gives them: defaults in the types, a file naming
/// only what it changes, errors naming the setting.
@Suite("Service configurations from config files")
struct ServiceConfigurationTests {
    /// `json` as the `service` section of a config file in `directory`, decoded as `type`.
    func decode<T: Decodable>(_ type: T.Type, _ json: String, in directory: TemporaryDirectory) throws -> T? {
        let file = directory.url.appendingPathComponent("config.json")
        try Data(#"{"service": \#(json)}"#.utf8).write(to: file)
        let host = try HostOptions.parse(["--config", file.path]).resolve(defaults: HostConfiguration(rpcEndpoints: ["ipc:///tmp/x"]), environment: [:])
        return try host.serviceSettings(type)
    }

    @Test("the gateway's routes: built-in ones kept, replaced by name or given endpoints, others added; the former cache key still read")
    func gatewayRoutes() throws {
        let directory = try TemporaryDirectory(prefix: "cfg")
        defer { directory.remove() }
        let empty = try #require(try decode(GatewayConfiguration.self, "{}", in: directory))
        #expect(empty.routes == GatewayConfiguration.defaultRoutes && empty.answerCacheMilliseconds == 1000 && empty.upstreamConnectionWaitMilliseconds == 1000)
        let configured = try #require(
            try decode(
                GatewayConfiguration.self,
                """
                {"catalogEndpoints": ["ipc:///tmp/c"], "catalogCacheMilliseconds": 0,
                 "routes": [{"name": "receipt", "process": "storebus-receipt", "services": ["storebus.receipt.v1.Receipt"], "endpoints": ["ipc:///tmp/r"]},
                            {"name": "payment-queue", "process": "pq", "services": ["storebus.payment_queue.v1.PaymentQueue"], "endpoints": ["ipc:///tmp/p"]}]}
                """, in: directory))
        #expect(configured.routes.map(\.name) == ["catalog", "payment-queue", "receipt", "download", "notifications"])
        #expect(configured.routes[0].endpoints == ["ipc:///tmp/c"])
        #expect(configured.routes[1].process == "pq" && configured.routes[1].services == ["storebus.payment_queue.v1.PaymentQueue"])
        #expect(configured.answerCacheMilliseconds == 0)
        try configured.validate()
    }

    @Test(
        "a gateway setting that cannot work is refused naming it",
        arguments: [
            (#"{"catalogEndpoints": []}"#, "service.catalogEndpoints"),
            (#"{"paymentQueueEventEndpoints": []}"#, "service.paymentQueueEventEndpoints"),
            (#"{"sessionLifetimeSeconds": 0}"#, "service.sessionLifetimeSeconds"),
            (#"{"upstreamConnectionWaitMilliseconds": -1}"#, "service.upstreamConnectionWaitMilliseconds"),
            (#"{"apiKeys": [{"name": "short", "key": "abc"}]}"#, "service.apiKeys[0]"),
            (#"{"apiKeys": [{"name": "backend", "key": "0123456789abcdef", "server": true}]}"#, "service.apiKeys[0]"),
            (
                #"{"routes": [{"name": "x", "process": "p", "services": ["a.B"], "endpoints": ["ipc:///a"]}, {"name": "x", "process": "p", "services": ["a.B"], "endpoints": ["ipc:///a"]}]}"#,
                "service.routes[1]"
            )
        ])
    func gatewayRefusals(json: String, setting: String) throws {
        let directory = try TemporaryDirectory(prefix: "cfg")
        defer { directory.remove() }
        let error = #expect(throws: StartupError.self) {
            let configuration = try decode(GatewayConfiguration.self, json, in: directory)
            try configuration?.validate()
        }
        #expect(error?.description.contains(setting) == true, "\(String(describing: error))")
    }

    @Test("a route to a service the contract does not have stops the gateway, naming it")
    func unknownService() async throws {
        var configuration = GatewayConfiguration()
        configuration.routes.append(RouteConfiguration(name: "nope", process: "p", services: ["storebus.nope.v1.Nope"], endpoints: ["ipc:///tmp/n"]))
        try configuration.validate()
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: ["ipc:///tmp/n"]))
        let upstreams = configuration.routes.map { GatewayUpstream(name: $0.name, process: $0.process, services: $0.services, client: client) }
        let error = #expect(throws: StartupError.self) { _ = try ForwardingTable(upstreams: upstreams) }
        // And the built-in routes alone make a table: every client and admin method of their services
        let table = try ForwardingTable(upstreams: Array(upstreams.dropLast()))
        #expect(table.routes.contains { $0.method.path == "/storebus.catalog.v1.Catalog/FetchProducts" && $0.upstream.name == "catalog" })
        #expect(!table.routes.contains { $0.method.access == .internal })
        await client.shutdown()
        #expect(error?.description.contains("storebus.nope.v1.Nope") == true, "\(String(describing: error))")
    }

    @Test("the catalog file and the payment queue's settings: defaults, a relative path from the config file's folder, a bad policy named")
    func catalogAndQueue() throws {
        let directory = try TemporaryDirectory(prefix: "cfg")
        defer { directory.remove() }
        #expect(try decode(CatalogConfiguration.self, "{}", in: directory)?.catalogFile == CatalogConfiguration().catalogFile)
        let relative = try decode(CatalogConfiguration.self, #"{"catalogFile": "catalogs/shop.json"}"#, in: directory)
        #expect(relative?.catalogFile == directory.url.appendingPathComponent("catalogs/shop.json").standardizedFileURL.path)
        let queue = try #require(try decode(PaymentQueueConfiguration.self, #"{"durability": "normal", "policies": [{"app": "a", "policy": {"purchasesRestricted": true}}]}"#, in: directory))
        #expect(queue.durability == .normal && queue.catalogEndpoints == PaymentQueueConfiguration().catalogEndpoints)
        #expect(queue.policies.first?.app == "a" && queue.policies.first?.account == "" && queue.policies.first?.policy.purchasesRestricted == true)
        let refused = #expect(throws: StartupError.self) {
            try decode(PaymentQueueConfiguration.self, #"{"policies": [{"app": "a", "policy": {"delayMs": 700000}}]}"#, in: directory)?.validate()
        }
        #expect(refused?.description.contains("service.policies[0].policy") == true, "\(String(describing: refused))")
    }
}
