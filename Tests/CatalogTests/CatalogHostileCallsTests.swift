import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

@Suite("Hostile calls straight to the catalog process")
struct CatalogHostileCallsTests {
    @Test(
        "every hostile value in every field of every catalog, health and diagnostics method, then 1,000 calls with several changes or broken JSON: each is answered once, never with INTERNAL or UNKNOWN; the process keeps running and still answers a products request"
    )
    func hostileCalls() async throws {
        let catalog = try CatalogFixture()
        try await catalog.start()
        let peer = try RawPeer(endpoint: catalog.endpoint)
        let templates = HostileCalls.templates(
            account: "hostile",
            services: [
                Storebus_Catalog_V1_Catalog.serviceName, Storebus_Health_V1_Health.serviceName, Storebus_Diagnostics_V1_Diagnostics.serviceName
            ])
        #expect(templates.count == Storebus_Catalog_V1_Catalog.methods.count + 3)
        let systematic = HostileCalls.everyValueInEveryField(templates) { _ in [] }
        let changed = HostileCalls.randomlyChanged(templates, count: 1_000, seed: 0xCA7_A106) { _, _ in [] }
        #expect(systematic.count > 300)
        let answers = try await HostileCalls.send(systematic + changed, over: peer)

        // Then every call was answered exactly once, never with INTERNAL or UNKNOWN
        #expect(answers.stray == 0)
        #expect(answers.unanswered.isEmpty, "unanswered calls: \(answers.unanswered.prefix(10))")
        #expect(answers.repeated.isEmpty, "calls answered more than once: \(answers.repeated.prefix(10))")
        let byCode = answers.byCode
        #expect(byCode[.internalError] == nil && byCode[.unknown] == nil, "\(byCode)")
        #expect(byCode[.invalidArgument, default: 0] > 100, "\(byCode)")
        #expect(byCode[.ok, default: 0] > 100, "\(byCode)")
        #expect(catalog.process.isRunning, "\(catalog.process.output)")

        // And it still answers a products request as before
        let client = try catalog.client()
        let products = try await client.call(
            Storebus_Catalog_V1_Catalog.fetchProducts,
            .with {
                $0.appBundleID = puzzle
                $0.productIdentifiers = [coins, "nope"]
            })
        #expect(products.products.map(\.productIdentifier) == [coins])
        #expect(products.invalidProductIdentifiers == ["nope"])
        await client.shutdown()
        await catalog.stop()
    }
}
