import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

/// Error answers stay small and say the right thing whatever the request, through the gateway and
/// straight to the services; forwarded calls can be traced; an outage is told at once.
@Suite("Error answers through the gateway")
struct ErrorAnswersTests {
    private static let account = "errors"

    @Test(
        "a string of 4 MiB less a little in every string field that reaches a handler, and in a field of every service reachable through the gateway, is answered with the code that says what is wrong, in an error body under 8 KiB, never RESOURCE_EXHAUSTED"
    )
    func hugeStringsGetSmallPreciseAnswers() async throws {
        let store = try StoreCluster()
        try await store.start()
        let peer = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let user = try await peer.authenticate(key: appKey, account: Self.account)
        let admin = try await peer.authenticate(key: adminKey, account: Self.account)
        let reachable = admin.methods.union([Storebus_Gateway_V1_Gateway.authenticate.path, Storebus_Health_V1_Health.check.path])
        let templates = HostileCalls.templates(account: Self.account, apiKey: appKey).filter { reachable.contains($0.path) }
        #expect(Set(templates.map(\.path)) == reachable, "a template for each method")

        // Given a string that leaves room in the 4 MiB message for the rest of the request, and one
        // of 64 KiB. Decoding 4 MiB takes a debug build of swift-protobuf about two seconds. A field
        // the contract's interceptors refuse at 64 KiB, before any handler runs (INVALID_ARGUMENT
        // naming it, or PERMISSION_DENIED for another principal's), is refused at 4 MiB on the same
        // path; so every field a handler sees gets the 4 MiB string, and one field of each service
        // (the gateway forwards every method of a service alike), the others 64 KiB.
        let huge = String(repeating: "h", count: Int(WireProtocol.defaultMaxMessageBytes) - 8 * 1024)
        let large = String(repeating: "l", count: 64 * 1024)
        var calls = 0, hugeCalls = 0
        var servicesSentHuge = Set<String>()
        var handlerFields: [String] = []
        for template in templates {
            let service = String(template.path.split(separator: "/").first ?? "")
            for leaf in template.body.leaves {
                var node = template.body
                var names: [String] = []
                for index in leaf {
                    if case .object(let members) = node {
                        names.append(members[index].0)
                        node = members[index].1
                    }
                }
                guard case .value(let text) = node else { continue }
                // A string, or an array of strings, in the template
                func body(_ string: String) -> String? {
                    if text.hasPrefix("\"") { return template.body.replacing(leaf[...], with: "\"\(string)\"").json }
                    if text.hasPrefix("[\"") { return template.body.replacing(leaf[...], with: "[\"\(string)\"]").json }
                    return nil
                }
                guard let largeBody = body(large), let hugeBody = body(huge) else { continue }
                let session = user.methods.contains(template.path) ? user.token : admin.token
                let field = names.joined(separator: ".")
                var sizes = [largeBody]
                let first = servicesSentHuge.insert(service).inserted
                if first { sizes.append(hugeBody) }
                var index = 0
                while index < sizes.count {
                    // When it is sent in that field
                    let answer = try await peer.call(template.path, body: sizes[index], metadata: ["session: \(session)"])
                    calls += 1
                    if sizes[index].utf8.count > 1 << 20 { hugeCalls += 1 }
                    // Then the answer names the problem in a small body
                    #expect(answer.code != .resourceExhausted, "\(template.path) \(field): \(answer.status?.message ?? "")")
                    #expect(answer.code == .ok || answer.body.count < 8 * 1024, "\(template.path) \(field): \(answer.code.name), \(answer.body.count) bytes")
                    // And a field no rule refused at 64 KiB reached a handler: it gets 4 MiB too.
                    let refusedByRule =
                        answer.code == .invalidArgument && (answer.status?.fieldViolations.contains { $0.field.hasPrefix(field) } ?? false)
                        || answer.code == .permissionDenied && (answer.status?.info.reason.hasPrefix("OTHER_") ?? false)
                    if index == 0, !refusedByRule, !first {
                        sizes.append(hugeBody)
                        handlerFields.append("\(template.path) \(field)")
                    }
                    index += 1
                }
            }
        }
        #expect(calls > 40)
        #expect(servicesSentHuge.count >= 6 && hugeCalls >= servicesSentHuge.count)
        print("huge strings: \(calls) calls, \(hugeCalls) of 4 MiB: a field of each of \(servicesSentHuge.sorted()), and fields no rule refused: \(handlerFields)")
        // And a Health/Check naming a huge service, the first example found, is NOT_FOUND with the name
        // shortened and its length given
        let health = try await peer.call(Storebus_Health_V1_Health.check.path, body: "{\"service\":\"\(huge)\"}")
        #expect(health.code == .notFound && health.body.count < 8 * 1024)
        #expect(health.status?.message.contains("(\(huge.utf8.count) bytes)") == true, "\(health.status?.message ?? "")")
        for process in [store.catalog, store.queue] + store.gateways {
            #expect(process.isRunning, "\(process.output)")
        }
        await store.stop()
    }

    @Test(
        "permission is checked before the other fields on every path: a 300-byte device id is PERMISSION_DENIED through the gateway and straight to the payment queue with a principal, INVALID_ARGUMENT without one"
    )
    func permissionComesFirst() async throws {
        let store = try StoreCluster()
        try await store.start()
        let gateway = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let direct = try RawPeer(endpoint: store.directory.ipcEndpoint("pq"))
        let user = try await gateway.authenticate(key: appKey, account: Self.account)
        let longDevice = String(repeating: "h", count: 300)
        let queue = "{\"appBundleId\":\"\(puzzle)\",\"accountId\":\"\(Self.account)\",\"deviceId\":\"\(longDevice)\"}"
        let principal = ["principal-app: \(puzzle)", "principal-account: \(Self.account)", "principal-device: d"]
        let paths = [
            (Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path, "{\"queue\":\(queue)}"),
            (Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction.path, "{\"queue\":\(queue),\"transactionIdentifier\":\"1\"}"),
            (Storebus_PaymentQueue_V1_PaymentQueue.addPayment.path, "{\"queue\":\(queue),\"payment\":{\"productIdentifier\":\"\(coins)\",\"quantity\":1}}"),
            (Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions.path, "{\"queue\":\(queue)}")
        ]
        for (path, body) in paths {
            // Through the gateway, whose session acts for device d
            let through = try await gateway.call(path, body: body, metadata: ["session: \(user.token)"])
            #expect(through.code == .permissionDenied && through.status?.info.reason == "OTHER_DEVICE", "\(path): \(through.code.name)")
            #expect(through.status?.resource.resourceName.contains("(300 bytes)") == true, "the device named, shortened")
            // Straight to the payment queue with the same principal
            let withPrincipal = try await direct.call(path, body: body, metadata: principal)
            #expect(withPrincipal.code == .permissionDenied && withPrincipal.status?.info.reason == "OTHER_DEVICE", "\(path): \(withPrincipal.code.name)")
            // Straight to it without a principal (a service of the deployment, an admin): the field
            let trusted = try await direct.call(path, body: body)
            #expect(trusted.code == .invalidArgument && trusted.status?.fieldViolations.first?.field == "queue.deviceId", "\(path): \(trusted.code.name) \(trusted.status?.message ?? "")")
        }
        await store.stop()
    }

    @Test("a call forwarded while its service is down is answered UNAVAILABLE, not sent, with retry advice long before its deadline; once the service is back the call works")
    func outagesAnswerAtOnce() async throws {
        let store = try StoreCluster()
        try await store.start()
        let peer = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let user = try await peer.authenticate(key: appKey, account: Self.account)
        let list = Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path
        let body = "{\"queue\":{\"appBundleId\":\"\(puzzle)\",\"accountId\":\"\(Self.account)\",\"deviceId\":\"d\"}}"
        #expect(try await peer.call(list, body: body, metadata: ["session: \(user.token)"]).code == .ok)

        // Given the payment queue is down
        await store.queue.stop()
        // When a client calls it through the gateway with a minute to spare
        let started = ContinuousClock.now
        let answer = try await peer.call(list, body: body, metadata: ["session: \(user.token)"], timeoutMilliseconds: 60_000)
        // Then it hears UNAVAILABLE with retry advice, the call not sent, well within its minute (the
        // gateway waits a second for a connection)
        #expect(answer.code == .unavailable && answer.status?.info.reason == "NOT_SENT", "\(answer.code.name) \(answer.status?.message ?? "")")
        #expect((answer.status?.retry.retryDelayMs ?? 0) > 0)
        #expect(ContinuousClock.now - started < .seconds(30))

        // And once the payment queue is back, the same call works
        try store.queue.start()
        try await store.queue.waitUntilServing(endpoint: store.directory.ipcEndpoint("pq"))
        var back = false
        for _ in 0..<100 where !back {
            back = try await peer.call(list, body: body, metadata: ["session: \(user.token)"]).code == .ok
            if !back { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(back)
        await store.stop()
    }

    @Test("the caller's request id of a forwarded call appears in the gateway's log and, as caller.request.id, in the service's")
    func requestIDsAreTraceable() async throws {
        let store = try StoreCluster(logLevel: "debug")
        try await store.start()
        let peer = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let user = try await peer.authenticate(key: appKey, account: Self.account)
        let body = "{\"queue\":{\"appBundleId\":\"\(puzzle)\",\"accountId\":\"\(Self.account)\",\"deviceId\":\"d\"}}"
        let answer = try await peer.call(
            Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path, body: body, metadata: ["session: \(user.token)"], id: "trace-4711"
        )
        #expect(answer.code == .ok)
        let gatewayLog = store.gateways[0].output
        let queueLog = store.queue.output
        #expect(gatewayLog.split(separator: "\n").contains { $0.contains("Forwarding") && $0.contains("request.id=trace-4711") }, "\(gatewayLog.suffix(2000))")
        #expect(queueLog.split(separator: "\n").contains { $0.contains("caller.request.id=trace-4711") && $0.contains("ListTransactions") }, "\(queueLog.suffix(2000))")
        await store.stop()
    }
}
