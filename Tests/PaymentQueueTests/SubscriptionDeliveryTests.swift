import Foundation
import StoreBus
import StoreBusStorage
import StoreSchema
import Testing

@testable import PaymentQueue

@Suite("Renewals on every device of the account, and refunds of a subscription")
struct SubscriptionDeliveryTests {
    static let tablet = Storebus_PaymentQueue_V1_QueueRef.with {
        $0.appBundleID = StoreFixture.queue.appBundleID
        $0.accountID = "alice"
        $0.deviceID = "tablet"
    }
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// A store renewing every 2 s, an account subscribed from its phone at `start`, and its tablet
    /// known (its device asked for its transactions, with none).
    func subscribed() async throws -> (StoreFixture, Storebus_PaymentQueue_V1_PaymentTransaction) {
        let fixture = try StoreFixture()
        try await fixture.store.setRenewalRate(.oneRenewalEveryTwoSeconds, app: StoreFixture.queue.appBundleID)
        try await fixture.store.noteQueue(Self.tablet)
        let bought = try await SubscriptionStoreTests().subscribe(fixture, at: start)
        return (fixture, bought)
    }

    @Test("a renewal reaches the tablet too, by the same identifier; each device finishes it on its own")
    func everyDevice() async throws {
        let (fixture, bought) = try await subscribed()
        defer { fixture.remove() }
        #expect(try await fixture.store.unfinished(Self.tablet).transactions.isEmpty, "the first purchase stays on the phone")
        #expect(try await fixture.store.renewDue(now: start.addingTimeInterval(2.5)).renewed == 1)
        let phone = try await fixture.store.unfinished(StoreFixture.queue).transactions
        let tablet = try await fixture.store.unfinished(Self.tablet).transactions
        #expect(phone.map(\.transactionIdentifier).count == 2)
        let renewal = try #require(phone.last)
        #expect(tablet.map(\.transactionIdentifier) == [renewal.transactionIdentifier])
        #expect(tablet.first?.queue.deviceID == "tablet" && tablet.first?.originalTransactionID == bought.transactionIdentifier)
        let heard = try await fixture.events(Self.tablet).flatMap(\.updatedTransactions.transactions)
        #expect(heard.map(\.transactionIdentifier) == [renewal.transactionIdentifier] && heard.first?.transactionState == .purchased)

        #expect(try await fixture.store.finish(renewal.transactionIdentifier, queue: Self.tablet) == false)
        #expect(try await fixture.store.finish(renewal.transactionIdentifier, queue: Self.tablet) == true, "finishing twice says so")
        #expect(try await fixture.store.unfinished(Self.tablet).transactions.isEmpty)
        #expect(try await fixture.store.unfinished(StoreFixture.queue).transactions.count == 2, "the phone still has it to finish")
        let removed = try await fixture.events(Self.tablet).flatMap(\.removedTransactions.transactions)
        #expect(removed.map(\.transactionIdentifier) == [renewal.transactionIdentifier] && removed.first?.queue.deviceID == "tablet")
        #expect(try await fixture.store.finish(renewal.transactionIdentifier, queue: StoreFixture.queue) == false)

        // Clearing the account's history takes unfinished deliveries out of their queues too.
        #expect(try await fixture.store.renewDue(now: start.addingTimeInterval(4.5)).renewed == 1)
        #expect(try await fixture.store.unfinished(Self.tablet).transactions.count == 1)
        _ = try await fixture.store.clear(app: StoreFixture.queue.appBundleID, account: "alice")
        #expect(try await fixture.store.unfinished(Self.tablet).transactions.isEmpty)
        #expect(try await fixture.events(Self.tablet).flatMap(\.removedTransactions.transactions).count == 2)
    }

    @Test("a tablet's deliveries count against its limits, and a full tablet does not hold back the renewal")
    func fullQueue() async throws {
        let fixture = try StoreFixture(maxUnfinished: 2)
        defer { fixture.remove() }
        try await fixture.store.setRenewalRate(.oneRenewalEveryTwoSeconds, app: StoreFixture.queue.appBundleID)
        try await fixture.store.noteQueue(Self.tablet)
        _ = try await SubscriptionStoreTests().subscribe(fixture, at: start)
        _ = try await fixture.purchase("gems", queue: Self.tablet)
        #expect(try await fixture.store.renewDue(now: start.addingTimeInterval(2.5)).renewed == 1)
        #expect(try await fixture.store.unfinished(Self.tablet).transactions.count == 2, "one purchase and the delivery: full")
        await #expect(throws: RPCError.self, "the delivery counts against the tablet's limit") {
            _ = try await fixture.purchase("gems", queue: Self.tablet)
        }
        let phone = try await fixture.store.unfinished(StoreFixture.queue).transactions
        try await fixture.store.finish(phone[0].transactionIdentifier, queue: StoreFixture.queue)
        #expect(try await fixture.store.renewDue(now: start.addingTimeInterval(4.5)).renewed == 1, "the phone has room; the tablet is passed over")
        #expect(try await fixture.store.unfinished(Self.tablet).transactions.count == 2)
    }

    @Test("refunding the running period revokes the subscription (status 5, no more renewals); refunding an earlier one revokes nothing")
    func refunds() async throws {
        let (fixture, bought) = try await subscribed()
        defer { fixture.remove() }
        #expect(try await fixture.store.renewDue(now: start.addingTimeInterval(2.5)).renewed == 1)
        let earlier = try await fixture.store.refund(bought.transactionIdentifier, reason: .other, now: start.addingTimeInterval(3))
        #expect(earlier.revoked.isEmpty, "the renewal running still holds it")
        var subscription = try #require(try await fixture.store.subscriptions(app: StoreFixture.queue.appBundleID, account: "alice").first)
        #expect(subscription.status == .active)

        let running = try #require(try await fixture.store.unfinished(StoreFixture.queue).transactions.last)
        let refund = try await fixture.store.refund(running.transactionIdentifier, reason: .appIssue, now: start.addingTimeInterval(3.5))
        #expect(refund.revoked == ["premium"])
        subscription = try #require(try await fixture.store.subscriptions(app: StoreFixture.queue.appBundleID, account: "alice").first)
        #expect(subscription.status == .revoked && !subscription.autoRenewStatus)
        #expect(try await fixture.store.renewDue(now: start.addingTimeInterval(10)).renewed == 0, "a revoked subscription renews no more")
        for queue in [StoreFixture.queue, Self.tablet] {
            let revocations = try await fixture.events(queue).filter { !$0.revokedEntitlements.productIdentifiers.isEmpty }
            #expect(revocations.map(\.revokedEntitlements.productIdentifiers) == [["premium"]], "\(queue.deviceID)")
        }
        let changes = try await fixture.events(StoreFixture.queue).filter { $0.subscriptionChanged.hasSubscription }
        #expect(changes.last?.subscriptionChanged.subscription.status == .revoked, "receipts hear it")
    }
}
