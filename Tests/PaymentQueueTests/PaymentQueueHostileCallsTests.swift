import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

@Suite("Hostile calls straight to the payment queue process")
struct PaymentQueueHostileCallsTests {
    @Test(
        "every hostile value in every field of every payment queue, admin, event log, health and diagnostics method, then 1,500 calls with several changes or broken JSON, with no principal, the account's, another account's or a mangled one: each is answered once, never with INTERNAL or UNKNOWN; the process keeps running and a purchase works after"
    )
    func hostileCalls() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let peer = try RawPeer(endpoint: fixture.rpcEndpoint)
        let templates = HostileCalls.templates(
            account: "hostile",
            services: [
                Storebus_PaymentQueue_V1_PaymentQueue.serviceName, Storebus_PaymentQueue_V1_PaymentQueueAdmin.serviceName,
                Storebus_Eventlog_V1_EventLog.serviceName, Storebus_Health_V1_Health.serviceName, Storebus_Diagnostics_V1_Diagnostics.serviceName
            ])
        #expect(templates.count == Storebus_PaymentQueue_V1_PaymentQueue.methods.count + Storebus_PaymentQueue_V1_PaymentQueueAdmin.methods.count + 4)
        // Client methods as the gateway forwards them (with the account's principal), the rest as
        // the deployment's own callers make them (none).
        let principal = ["\(Principal.appKey): \(puzzle)", "\(Principal.accountKey): hostile", "\(Principal.deviceKey): d"]
        let systematic = HostileCalls.everyValueInEveryField(templates) { path in
            path.hasPrefix("/\(Storebus_PaymentQueue_V1_PaymentQueue.serviceName)/") ? principal : []
        }
        let changed = HostileCalls.randomlyChanged(templates, count: 1_500, seed: 0x9A7_4E47) { random, _ in
            switch Int.random(in: 0..<6, using: &random) {
            case 0: []
            case 1: ["\(Principal.appKey): \(puzzle)", "\(Principal.accountKey): someone-else", "\(Principal.deviceKey): d"]
            case 2: ["\(Principal.appKey): \(String(repeating: "é", count: 2_000))", "\(Principal.accountKey): ", "\(Principal.deviceKey): d"]
            case 3: ["\(Principal.accountKey): hostile"]
            default: principal
            }
        }
        #expect(systematic.count > 1_500)
        let answers = try await HostileCalls.send(systematic + changed, over: peer)

        // Then every call was answered exactly once, never with INTERNAL or UNKNOWN
        #expect(answers.stray == 0)
        #expect(answers.unanswered.isEmpty, "unanswered calls: \(answers.unanswered.prefix(10))")
        #expect(answers.repeated.isEmpty, "calls answered more than once: \(answers.repeated.prefix(10))")
        let byCode = answers.byCode
        #expect(byCode[.internalError] == nil && byCode[.unknown] == nil, "\(byCode)")
        // And the calls reached the handlers: many were refused for their content, many served, and
        // some refused as another account's
        #expect(byCode[.invalidArgument, default: 0] > 300, "\(byCode)")
        #expect(byCode[.ok, default: 0] > 300, "\(byCode)")
        #expect(byCode[.permissionDenied, default: 0] > 10, "\(byCode)")
        #expect(fixture.queue.isRunning, "\(fixture.queue.output)")
        #expect(fixture.catalog.isRunning, "\(fixture.catalog.output)")

        // And a purchase still goes through: purchased, finished, gone from the queue
        let queue = queueRef(account: "after-hostile")
        let added = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
            .with {
                $0.queue = queue
                $0.payment = .with {
                    $0.productIdentifier = coins; $0.quantity = 1
                }
            }
        ).transaction
        #expect(
            await waitUntil {
                (try? await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.first?.transactionState) == .purchased
            })
        _ = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction,
            .with {
                $0.queue = queue; $0.transactionIdentifier = added.transactionIdentifier
            })
        #expect(try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = queue }).transactions.isEmpty)
        await client.shutdown()
        await fixture.stop()
    }
}
