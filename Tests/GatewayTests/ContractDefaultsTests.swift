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

    @Test("a request through the gateway that leaves out its queue, app or account acts on the session's own; straight to the service without a principal it is INVALID_ARGUMENT naming the field")
    func leftOutIDsAreTheSessions() async throws {
        let store = try StoreCluster()
        try await store.start()
        let peer = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let session = try await peer.authenticate(key: appKey, account: Self.account).metadata

        // When calls name no queue, app or account
        let products = try await peer.call(Storebus_Catalog_V1_Catalog.fetchProducts.path, body: "{\"productIdentifiers\":[\"\(coins)\"]}", metadata: [session])
        #expect(products.code == .ok, "\(products.status?.message ?? "")")
        #expect(try JSONCodec.decode(Storebus_Catalog_V1_FetchProductsResponse.self, from: products.body).products.map(\.productIdentifier) == [coins])
        let can = try await peer.call(Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments.path, body: "{}", metadata: [session])
        #expect(can.code == .ok, "\(can.status?.message ?? "")")
        // A payment without a queue or a quantity: the session's queue, one item
        let added = try await peer.call(Storebus_PaymentQueue_V1_PaymentQueue.addPayment.path, body: "{\"payment\":{\"productIdentifier\":\"\(coins)\"}}", metadata: [session])
        #expect(added.code == .ok, "\(added.status?.message ?? "")")
        let transaction = try JSONCodec.decode(Storebus_PaymentQueue_V1_AddPaymentResponse.self, from: added.body).transaction
        #expect(transaction.payment.quantity == 1)
        // Then they acted on the session's own queue
        let listed = try await peer.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path, body: "{}", metadata: [session])
        #expect(listed.code == .ok)
        let list = try JSONCodec.decode(Storebus_PaymentQueue_V1_ListTransactionsResponse.self, from: listed.body)
        #expect(list.queueKey == "\(puzzle)|\(Self.account)|d", "\(list.queueKey)")
        #expect(list.transactions.map(\.transactionIdentifier) == [transaction.transactionIdentifier])

        // And straight to the payment queue, with no session to take them from, they are missing fields
        let direct = try RawPeer(endpoint: store.directory.ipcEndpoint("pq"))
        let bare = try await direct.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions.path, body: "{}")
        #expect(bare.code == .invalidArgument && bare.status?.fieldViolations.first?.field.hasPrefix("queue.") == true, "\(bare.status?.message ?? "")")
        await store.stop()
    }

    @Test("an idempotency key in the body and a different one in the metadata is INVALID_ARGUMENT; the same key in both, or either alone, is one payment")
    func idempotencyKeyInTwoPlaces() async throws {
        let store = try StoreCluster()
        try await store.start()
        let peer = try RawPeer(endpoint: store.gatewayEndpoints[0])
        let session = try await peer.authenticate(key: appKey, account: Self.account).metadata
        func add(body key: String?, metadata: String?) async throws -> RawPeer.Answer {
            let field = key.map { ",\"idempotencyKey\":\"\($0)\"" } ?? ""
            return try await peer.call(
                Storebus_PaymentQueue_V1_PaymentQueue.addPayment.path, body: "{\"payment\":{\"productIdentifier\":\"\(coins)\"}\(field)}",
                metadata: [session] + (metadata.map { ["idempotency-key: \($0)"] } ?? [])
            )
        }
        func id(_ answer: RawPeer.Answer) throws -> String {
            try JSONCodec.decode(Storebus_PaymentQueue_V1_AddPaymentResponse.self, from: answer.body).transaction.transactionIdentifier
        }
        let differing = try await add(body: "key-a", metadata: "key-b")
        #expect(differing.code == .invalidArgument && differing.status?.fieldViolations.first?.field == "idempotencyKey")
        let both = try await add(body: "key-a", metadata: "key-a")
        #expect(both.code == .ok)
        #expect(try id(try await add(body: "key-a", metadata: nil)) == id(both), "the body's key alone: the same payment")
        #expect(try id(try await add(body: nil, metadata: "key-a")) == id(both), "the metadata's key alone: the same payment")
        #expect(try id(try await add(body: "key-c", metadata: nil)) != id(both))
        await store.stop()
    }
}
