import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

/// What a client written from proto-schemas/ alone meets: ids it leaves out, an idempotency key in
/// two places, a quantity left out.
@Suite("The contract's defaults through the gateway")
struct ContractDefaultsTests {
    private static let account = "defaults"

    private static func call(_ peer: RawPeer, _ path: String, body: String, metadata: [String] = []) async throws -> (code: StatusCode, body: [UInt8]) {
        let header = (["SB1Q", "1", "10000", path] + metadata).joined(separator: "\n")
        try peer.send([[], Array(header.utf8), Array(body.utf8)])
        let message = try #require(try await peer.receive(timeout: .seconds(20)), "\(path) was not answered")
        let answer = try #require(Frames.parseAtClient(message.frames))
        return (answer.code, answer.body)
    }

    private static func error(_ body: [UInt8]) -> Storebus_Common_V1_ErrorStatus? {
        try? JSONCodec.decode(Storebus_Common_V1_ErrorStatus.self, from: body)
    }

    @Test("a request through the gateway that leaves out its queue, app or account acts on the session's own; straight to the service without a principal it is INVALID_ARGUMENT naming the field")
    func leftOutIDsAreTheSessions() async throws {
        let store = try StoreCluster()
        try await store.start()
        let peer = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let auth = try await Self.call(peer, Storebus_Gateway_V1_Gateway.authenticate.path,
                                       body: "{\"apiKey\":\"\(appKey)\",\"appBundleId\":\"\(puzzle)\",\"accountId\":\"\(Self.account)\",\"deviceId\":\"d\"}")
        let session = "session: \(try JSONCodec.decode(Storebus_Gateway_V1_AuthenticateResponse.self, from: auth.body).sessionID)"

        // When calls name no queue, app or account
        let products = try await Self.call(peer, Storebus_Catalog_V1_Catalog.fetchProducts.path, body: "{\"productIdentifiers\":[\"\(coins)\"]}", metadata: [session])
        #expect(products.code == .ok, "\(Self.error(products.body)?.message ?? "")")
        #expect(try JSONCodec.decode(Storebus_Catalog_V1_FetchProductsResponse.self, from: products.body).products.map(\.productIdentifier) == [coins])
        let can = try await Self.call(peer, Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments.path, body: "{}", metadata: [session])
        #expect(can.code == .ok, "\(Self.error(can.body)?.message ?? "")")
        // A payment without a queue or a quantity: the session's queue, one item
        let added = try await Self.call(peer, Storebus_PaymentQueue_V1_PaymentQueue.addPayment.path, body: "{\"payment\":{\"productIdentifier\":\"\(coins)\"}}", metadata: [session])
        #expect(added.code == .ok, "\(Self.error(added.body)?.message ?? "")")
        let transaction = try JSONCodec.decode(Storebus_PaymentQueue_V1_AddPaymentResponse.self, from: added.body).transaction
        #expect(transaction.payment.quantity == 1)
        // Then they acted on the session's own queue
        let listed = try await Self.call(peer, Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path, body: "{}", metadata: [session])
        #expect(listed.code == .ok)
        let list = try JSONCodec.decode(Storebus_PaymentQueue_V1_ListTransactionsResponse.self, from: listed.body)
        #expect(list.queueKey == "\(puzzle)|\(Self.account)|d", "\(list.queueKey)")
        #expect(list.transactions.map(\.transactionIdentifier) == [transaction.transactionIdentifier])

        // And straight to the payment queue, with no session to take them from, they are missing fields
        let direct = try RawPeer(endpoint: store.directory.ipcEndpoint("pq"))
        let bare = try await Self.call(direct, Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path, body: "{}")
        #expect(bare.code == .invalidArgument && Self.error(bare.body)?.fieldViolations.first?.field.hasPrefix("queue.") == true, "\(Self.error(bare.body)?.message ?? "")")
        await store.stop()
    }

    @Test("an idempotency key in the body and a different one in the metadata is INVALID_ARGUMENT; the same key in both, or either alone, is one payment")
    func idempotencyKeyInTwoPlaces() async throws {
        let store = try StoreCluster()
        try await store.start()
        let peer = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let auth = try await Self.call(peer, Storebus_Gateway_V1_Gateway.authenticate.path,
                                       body: "{\"apiKey\":\"\(appKey)\",\"appBundleId\":\"\(puzzle)\",\"accountId\":\"\(Self.account)\",\"deviceId\":\"d\"}")
        let session = "session: \(try JSONCodec.decode(Storebus_Gateway_V1_AuthenticateResponse.self, from: auth.body).sessionID)"
        func add(body key: String?, metadata: String?) async throws -> (code: StatusCode, body: [UInt8]) {
            let field = key.map { ",\"idempotencyKey\":\"\($0)\"" } ?? ""
            return try await Self.call(
                peer, Storebus_PaymentQueue_V1_PaymentQueue.addPayment.path, body: "{\"payment\":{\"productIdentifier\":\"\(coins)\"}\(field)}",
                metadata: [session] + (metadata.map { ["idempotency-key: \($0)"] } ?? [])
            )
        }
        func id(_ answer: (code: StatusCode, body: [UInt8])) throws -> String {
            try JSONCodec.decode(Storebus_PaymentQueue_V1_AddPaymentResponse.self, from: answer.body).transaction.transactionIdentifier
        }
        let differing = try await add(body: "key-a", metadata: "key-b")
        #expect(differing.code == .invalidArgument && Self.error(differing.body)?.fieldViolations.first?.field == "idempotencyKey")
        let both = try await add(body: "key-a", metadata: "key-a")
        #expect(both.code == .ok)
        #expect(try id(try await add(body: "key-a", metadata: nil)) == id(both), "the body's key alone: the same payment")
        #expect(try id(try await add(body: nil, metadata: "key-a")) == id(both), "the metadata's key alone: the same payment")
        #expect(try id(try await add(body: "key-c", metadata: nil)) != id(both))
        await store.stop()
    }
}
