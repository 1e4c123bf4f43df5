import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

@Suite("Hostile calls through the gateway")
struct HostileCallsTests {
    private static let account = "hostile"

    @Test(
        "every hostile value in every field of every method a user or an admin session may call, then 1,500 calls with several changes, broken JSON or a missing or forged session, through a gateway to the catalog and payment queue processes: each is answered once with a status code other than INTERNAL, no process stops, and a purchase works after"
    )
    func hostileCalls() async throws {
        let store = try StoreCluster()
        try await store.start()
        let peer = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let user = try await peer.authenticate(key: appKey, account: Self.account)
        let admin = try await peer.authenticate(key: adminKey, account: Self.account)
        let open = Storebus_Gateway_V1_Gateway.authenticate.path
        let templates = HostileCalls.templates(account: Self.account, apiKey: appKey).filter {
            $0.path == open || user.methods.contains($0.path) || admin.methods.contains($0.path)
        }
        #expect(Set(templates.map(\.path)) == admin.methods.union(user.methods).union([open]), "a template for each method a session may call")

        // Each hostile value in each field, with a session that may call the method; then calls
        // with one to three changes anywhere (one in ten with broken JSON), with a user session, an
        // admin one, none or a forged one.
        let systematic = HostileCalls.everyValueInEveryField(templates) { path in
            ["session: \(user.methods.contains(path) ? user.token : admin.token)"]
        }
        let forged = String(user.token.dropLast()) + (user.token.last == "A" ? "B" : "A")
        let changed = HostileCalls.randomlyChanged(templates, count: 1_500, seed: 0x40_571_1E) { random, _ in
            switch Int.random(in: 0..<20, using: &random) {
            case 0: []
            case 1: ["session: \(forged)"]
            case 2..<10: ["session: \(user.token)"]
            default: ["session: \(admin.token)"]
            }
        }
        #expect(systematic.count > 2_000)
        let answers = try await HostileCalls.send(systematic + changed, over: peer)

        // Then every call was answered exactly once, never with INTERNAL or UNKNOWN: bad input is
        // named as such
        #expect(answers.stray == 0)
        #expect(answers.unanswered.isEmpty, "unanswered calls: \(answers.unanswered.prefix(10))")
        #expect(answers.repeated.isEmpty, "calls answered more than once: \(answers.repeated.prefix(10))")
        let byCode = answers.byCode
        #expect(byCode[.internalError] == nil && byCode[.unknown] == nil, "\(byCode)")
        // And the calls reached the services' handlers: many were refused for their content, and
        // many were served
        #expect(byCode[.invalidArgument, default: 0] > 300, "\(byCode)")
        #expect(byCode[.ok, default: 0] > 200, "\(byCode)")
        #expect(byCode[.unauthenticated, default: 0] > 50, "\(byCode)")
        // And every process is still running
        for process in [store.catalog, store.queue] + store.gateways {
            #expect(process.isRunning, "\(process.output)")
        }
        // And a device still buys and finishes as usual
        let (client, recorder) = try await store.launch(account: "after-hostile")
        try await completedPurchase(client, recorder)
        recorder.cancel()
        await client.close()
        await store.stop()
    }
}
