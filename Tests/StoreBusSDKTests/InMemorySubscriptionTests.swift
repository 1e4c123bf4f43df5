import Foundation
import StoreBus
import StoreBusSDK
import StoreBusSDKTesting
import StoreBusTesting
import Testing

/// The store in memory's virtual clock: months of renewals, expiry and billing retry in no wall time.
@Suite("Subscriptions in the store in memory, on its virtual clock")
struct InMemorySubscriptionTests {
    static let monthly = "com.example.premium.monthly"
    static let day: TimeInterval = 86_400

    func store() throws -> InMemoryStore {
        try InMemoryStore(products: [.init(id: Self.monthly, kind: .autoRenewable, price: "4.99", group: "premium")])
    }

    /// A launched device of `account`, its observer attached.
    func device(_ store: InMemoryStore, _ account: String, _ device: String) async throws -> (PaymentQueue, Recorder) {
        let queue = store.queue(account: account, device: device)
        let recorder = Recorder(queue)
        guard await recorder.attached() else { throw ClusterFailure(description: "the launch replay did not end") }
        return (queue, recorder)
    }

    func subscription(_ queue: PaymentQueue) async throws -> Subscription {
        try #require(try await queue.connection.subscriptions().first)
    }

    @Test("three months pass: three renewals, each from the last one's end, on both devices; auto-renew off then expires it")
    func renewals() async throws {
        let store = try store()
        let (phone, recorder) = try await device(store, "alice", "phone")
        let (tablet, tabletRecorder) = try await device(store, "alice", "tablet")
        let bought = try await phone.addPayment(Payment(productIdentifier: Self.monthly))
        #expect(await recorder.purchased(bought.id))
        store.advance(by: 92 * Self.day)
        #expect(await recorder.wait { $0.live.filter { $0.renewals.count > 0 }.count == 3 })
        let renewals = recorder.live.flatMap(\.renewals)
        var previous = try #require(phone.transactions.first { $0.id == bought.id })
        for renewal in renewals {
            #expect(renewal.transactionDate == previous.expirationDate, "a period starts where the last ended")
            #expect(renewal.subscriptionOriginalTransactionIdentifier == bought.id)
            previous = renewal
        }
        #expect(await tabletRecorder.wait { $0.live.flatMap(\.renewals).map(\.id) == renewals.map(\.id) })
        #expect(try await subscription(phone).renewalCount == 3)

        try await phone.connection.setAutoRenew(false, group: "premium")
        store.advance(by: 31 * Self.day)
        let expired = try await subscription(phone)
        #expect(expired.status == .expired && expired.expirationIntent == 1 && expired.renewalCount == 3)
        #expect(expired.expirationDate == previous.expirationDate)
        await phone.close()
        await tablet.close()
    }

    @Test("billing retry with grace: entitled in grace, then retrying, then recovered with a period from the retry that succeeded")
    func graceThenRecovery() async throws {
        let store = try store()
        let (phone, recorder) = try await device(store, "bob", "phone")
        let bought = try await phone.addPayment(Payment(productIdentifier: Self.monthly))
        #expect(await recorder.purchased(bought.id))
        let end = try #require(try await subscription(phone).expirationDate)
        store.setBillingControls(.init(billingRetryOnRenewal: true, gracePeriodEnabled: true))
        store.advance(by: 31 * Self.day)
        var current = try await subscription(phone)
        #expect(current.status == .inGracePeriod && current.isEntitled)
        #expect(current.gracePeriodExpirationDate == end.addingTimeInterval(16 * Self.day), "Apple's 16 days for a monthly subscription")
        store.advance(by: 20 * Self.day)
        current = try await subscription(phone)
        #expect(current.status == .inBillingRetryPeriod && !current.isEntitled)
        store.setBillingControls(.init())
        store.advance(by: Self.day)
        current = try await subscription(phone)
        #expect(current.status == .subscribed && current.renewalCount == 1)
        #expect(await recorder.wait { !$0.live.flatMap(\.renewals).isEmpty })
        let renewal = try #require(recorder.live.flatMap(\.renewals).first)
        #expect(renewal.transactionDate.map { $0 > end.addingTimeInterval(20 * Self.day) } == true, "the new period starts at the recovery")
        await phone.close()
    }

    @Test("billing retry without recovery: expired after 60 days, intent 2; refunding the last period revokes a subscription")
    func noRecoveryAndRefund() async throws {
        let store = try store()
        let (phone, recorder) = try await device(store, "carol", "phone")
        let bought = try await phone.addPayment(Payment(productIdentifier: Self.monthly))
        #expect(await recorder.purchased(bought.id))
        store.setBillingControls(.init(billingRetryOnRenewal: true))
        store.advance(by: 31 * Self.day)
        #expect(try await subscription(phone).status == .inBillingRetryPeriod)
        store.advance(by: 61 * Self.day)
        let expired = try await subscription(phone)
        #expect(expired.status == .expired && expired.expirationIntent == 2)

        store.setBillingControls(.init())
        let again = try await phone.addPayment(Payment(productIdentifier: Self.monthly))
        #expect(await recorder.purchased(again.id))
        #expect(try await subscription(phone).status == .subscribed, "a resubscription")
        try store.refund(again.id)
        #expect(try await subscription(phone).status == .revoked)
        #expect(await recorder.wait { $0.callbacks.contains { $0.event == .didRevokeEntitlements(productIdentifiers: [Self.monthly]) } })
        store.advance(by: 62 * Self.day)
        #expect(recorder.live.flatMap(\.renewals).isEmpty, "a revoked subscription never renews")
        await phone.close()
    }
}

extension PaymentQueueCallback {
    /// The renewals this live callback announces as purchased.
    fileprivate var renewals: [PaymentTransaction] {
        guard case .updatedTransactions(let transactions, false) = event else { return [] }
        return transactions.filter { $0.isRenewal && $0.transactionState == .purchased }
    }
}
