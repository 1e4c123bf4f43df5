import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

@Suite("Hostile calls straight to the receipt service process")
struct ReceiptHostileCallsTests {
    @Test(
        "every hostile value in every field of every receipt, health and diagnostics method, then 800 calls with several changes or broken JSON, with no principal, the account's, another's or a mangled one: each answered once, never INTERNAL or UNKNOWN; the service keeps running and a purchase still reaches the receipt"
    )
    func hostileCalls() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let peer = try RawPeer(endpoint: cluster.receiptEndpoint)
            let templates = HostileCalls.templates(
                account: "hostile",
                services: [
                    Storebus_Receipt_V1_Receipt.serviceName, Storebus_Health_V1_Health.serviceName, Storebus_Diagnostics_V1_Diagnostics.serviceName
                ])
            #expect(templates.count == Storebus_Receipt_V1_Receipt.methods.count + 3)
            let principal = ["\(Principal.appKey): \(puzzle)", "\(Principal.accountKey): hostile", "\(Principal.deviceKey): d"]
            let systematic = HostileCalls.everyValueInEveryField(templates) { path in
                path.hasPrefix("/\(Storebus_Receipt_V1_Receipt.serviceName)/") ? principal : []
            }
            let changed = HostileCalls.randomlyChanged(templates, count: 800, seed: 0x3EC_E1B7) { random, _ in
                switch Int.random(in: 0..<5, using: &random) {
                case 0: []
                case 1: ["\(Principal.appKey): \(puzzle)", "\(Principal.accountKey): someone-else", "\(Principal.deviceKey): d"]
                case 2: ["\(Principal.appKey): \(String(repeating: "é", count: 2_000))", "\(Principal.accountKey): ", "\(Principal.deviceKey): d"]
                default: principal
                }
            }
            let answers = try await HostileCalls.send(systematic + changed, over: peer)
            #expect(answers.stray == 0)
            #expect(answers.unanswered.isEmpty, "unanswered calls: \(answers.unanswered.prefix(10))")
            #expect(answers.repeated.isEmpty, "calls answered more than once: \(answers.repeated.prefix(10))")
            let byCode = answers.byCode
            #expect(byCode[.internalError] == nil && byCode[.unknown] == nil, "\(byCode)")
            #expect(byCode[.invalidArgument, default: 0] > 100, "\(byCode)")
            #expect(byCode[.ok, default: 0] > 100, "\(byCode)")
            #expect(byCode[.permissionDenied, default: 0] > 10, "\(byCode)")
            #expect(cluster.receipt.isRunning, "\(cluster.receipt.output)")

            // And a purchase made afterwards reaches the account's receipt
            let (phone, recorder) = try await cluster.launch(account: "after-hostile")
            let bought = try await phone.addPayment(Payment(productIdentifier: coins))
            #expect(await recorder.purchased(bought.id))
            let connection = try StoreConnection(configuration: cluster.configuration(account: "after-hostile"))
            _ = try await ReceiptFlowTests.receipt(connection) { $0.inApp.map(\.transactionID) == [bought.id] }
            await connection.close()
            await phone.close()
        }
    }
}
