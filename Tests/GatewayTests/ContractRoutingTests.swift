import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

/// The gateway forwards what the contract's `access` option says, and nothing it lists itself.
@Suite("Gateway: routing by the contract")
struct ContractRoutingTests {
    private static let account = "contract"

    @Test(
        "every client and admin method of the services the gateway routes reaches its service, sessions are told exactly those methods, admin methods need an admin session, and every internal method of the contract is refused with PERMISSION_DENIED"
    )
    func routesFollowTheContract() async throws {
        let store = try StoreCluster()
        try await store.start()
        let peer = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let user = try await peer.authenticate(key: appKey, account: Self.account)
        let admin = try await peer.authenticate(key: adminKey, account: Self.account)
        let server = try await peer.authenticate(key: serverKey, account: "")

        // Given the methods the contract declares for the services a default gateway routes
        let routed = Set(ServiceRegistry.all.filter { $0.name != ServiceRegistry.gateway.name }.flatMap(\.services))
        #expect(routed.isSuperset(of: ["storebus.catalog.v1.Catalog", "storebus.payment_queue.v1.PaymentQueue", "storebus.receipt.v1.Receipt"]))
        let clientMethods = StoreBusContract.methods.filter { routed.contains(String($0.service)) && $0.access == .client }
        let adminMethods = StoreBusContract.methods.filter { routed.contains(String($0.service)) && $0.access == .admin }
        let serverMethods = StoreBusContract.methods.filter { routed.contains(String($0.service)) && $0.access == .server }
        #expect(serverMethods.contains { $0.path == Storebus_Notifications_V1_Notifications.readNotifications.path })
        #expect(clientMethods.count >= 6 && adminMethods.count >= 13, "the contract marks the methods it has")
        let own = Storebus_Gateway_V1_Gateway.methods.map(\.path)

        // Then Authenticate lists exactly those a session may call
        #expect(user.methods == Set(own + clientMethods.map(\.path)))
        #expect(admin.methods == Set(own + clientMethods.map(\.path) + serverMethods.map(\.path) + adminMethods.map(\.path)))
        // A server session (an app's backend): the server methods and the gateway's own but Observe
        #expect(server.methods == Set(own.filter { $0 != Storebus_Gateway_V1_Gateway.observe.path } + serverMethods.map(\.path)))

        // When each is called with a valid body by a session allowed to, it reaches its service: the
        // answer is the service's (OK or a refusal of the request's content), never the gateway's
        // refusal of the method
        let templates = Dictionary(uniqueKeysWithValues: HostileCalls.templates(account: Self.account, apiKey: appKey).map { ($0.path, $0.body) })
        for method in clientMethods + serverMethods + adminMethods {
            let body = try #require(templates[method.path], "a template for \(method.path)")
            let session = method.access == .admin ? admin.token : method.access == .server ? server.token : user.token
            let answer = try await peer.call(method.path, body: body.json, metadata: ["session: \(session)"])
            #expect(![.unimplemented, .permissionDenied, .unauthenticated, .internalError, .unavailable].contains(answer.code), "\(method.path): \(answer.code.name) \(answer.status?.message ?? "")")
        }

        // And an admin method called by a user session is refused by the gateway
        for method in adminMethods {
            let answer = try await peer.call(method.path, body: "{}", metadata: [user.metadata])
            #expect(answer.code == .permissionDenied && answer.status?.info.reason == "ADMIN_REQUIRED", "\(method.path): \(answer.code.name)")
        }

        // And a server method called by a device's session is refused by the gateway, and a device's
        // method called by a server session
        for method in serverMethods {
            let answer = try await peer.call(method.path, body: "{}", metadata: [user.metadata])
            #expect(answer.code == .permissionDenied && answer.status?.info.reason == "SERVER_REQUIRED", "\(method.path): \(answer.code.name)")
        }
        for method in clientMethods {
            let answer = try await peer.call(method.path, body: "{}", metadata: [server.metadata])
            #expect(answer.code == .permissionDenied && answer.status?.info.reason == "DEVICE_SESSION_REQUIRED", "\(method.path): \(answer.code.name)")
        }

        // And every internal method of every service the gateway does not answer itself is refused,
        // even to an admin session, before its body is read
        let answeredByTheGateway = [Storebus_Gateway_V1_Gateway.serviceName, Storebus_Health_V1_Health.serviceName]
        let internalMethods = StoreBusContract.methods.filter { !answeredByTheGateway.contains(String($0.service)) && $0.access == .internal }
        #expect(internalMethods.contains { $0.path == Storebus_Eventlog_V1_EventLog.readEvents.path })
        #expect(internalMethods.contains { $0.path == Storebus_PaymentQueue_V1_PaymentQueue.snapshotQueue.path })
        #expect(internalMethods.contains { $0.path == Storebus_PaymentQueue_V1_PaymentQueue.updateDownloads.path })
        for method in internalMethods {
            let answer = try await peer.call(method.path, body: "not json", metadata: [admin.metadata])
            #expect(answer.code == .permissionDenied && answer.status?.info.reason == "INTERNAL_METHOD", "\(method.path): \(answer.code.name)")
        }
        await store.stop()
    }
}
