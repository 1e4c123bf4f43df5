import Foundation
import StoreBus
import StoreSchema
import SwiftProtobuf
import Testing

@testable import PaymentQueue

@Suite("Subscriptions in the store: billing retry, grace periods, recovery")
struct SubscriptionBillingTests {
    static let app = StoreFixture.queue.appBundleID
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// A store renewing every 2 s with renewal charges failing, grace periods `grace`, and alice
    /// subscribed at ``start``.
    func failingStore(grace: Bool) async throws -> (StoreFixture, Storebus_PaymentQueue_V1_PaymentTransaction) {
        let fixture = try StoreFixture()
        try await fixture.store.setRenewalRate(.oneRenewalEveryTwoSeconds, app: Self.app)
        try await fixture.store.setBillingControls(
            .with {
                $0.billingRetryOnRenewal = true; $0.gracePeriodEnabled = grace
            }, app: Self.app)
        let bought = try await SubscriptionStoreTests().subscribe(fixture, at: Self.start)
        return (fixture, bought)
    }

    func current(_ fixture: StoreFixture) async throws -> Storebus_PaymentQueue_V1_Subscription {
        try #require(try await fixture.store.subscriptions(app: Self.app, account: "alice").first)
    }

    @Test("at a 2 s rate the grace period lasts a period and retrying two: the lengths Apple's tables give, on the store's clock")
    func lengths() {
        let month = RenewalClock.Period(unit: .month, count: 1)
        let fast = RenewalClock.billing(of: month, rate: .oneRenewalEveryTwoSeconds)
        #expect(fast.grace == 2_000 && fast.retry == 4_000 && fast.interval == 333)
        let sandbox = RenewalClock.billing(of: month, rate: .monthlyRenewalEveryFiveMinutes)
        #expect(sandbox.grace == 16 * 10_000 && sandbox.retry == 60 * 10_000)
        let weekly = RenewalClock.billing(of: RenewalClock.Period(unit: .week, count: 1), rate: .realTime)
        #expect(weekly.grace == 6 * 86_400_000 && weekly.retry == 60 * 86_400_000)
    }

    @Test("a failed renewal with grace on: grace period from the period's end, still failing at the retries, then recovered with a period from the retry that succeeds")
    func graceThenRecovery() async throws {
        let (fixture, bought) = try await failingStore(grace: true)
        defer { fixture.remove() }
        let round = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(2.1))
        #expect(round.renewed == 0)
        var subscription = try await current(fixture)
        #expect(subscription.status == .gracePeriod)
        #expect(subscription.gracePeriodExpiresDate == bought.expiresDate.adding(milliseconds: 2_000))
        #expect(subscription.billingRetryEndsDate == bought.expiresDate.adding(milliseconds: 4_000))
        // Retries while charges still fail change nothing but the next retry's time
        _ = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(2.5))
        #expect(try await current(fixture).status == .gracePeriod)
        // Charges work again: the next retry renews, the new period starting then
        try await fixture.store.setBillingControls(.init(), app: Self.app)
        let recovered = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(3))
        #expect(recovered.renewed == 1)
        subscription = try await current(fixture)
        #expect(subscription.status == .active && !subscription.hasGracePeriodExpiresDate)
        let renewal = try #require(try await fixture.store.transaction(subscription.latestTransactionIdentifier))
        #expect(renewal.transactionReason == .renewal && renewal.originalTransactionID == bought.transactionIdentifier)
        #expect(renewal.transactionDate == Google_Protobuf_Timestamp(date: Self.start.addingTimeInterval(3)))
        #expect(renewal.expiresDate == renewal.transactionDate.adding(milliseconds: 2_000))
        let statuses = try await fixture.events().compactMap { event -> Storebus_PaymentQueue_V1_SubscriptionStatus? in
            guard case .subscriptionChanged(let changed) = event.event else { return nil }
            return changed.subscription.status
        }
        #expect(statuses == [.active, .gracePeriod, .active], "the purchase, the failed renewal, the recovery")
    }

    @Test("without recovery: the grace period ends in billing retry, and retrying ends in expiry, intent 2 (a billing error)")
    func noRecovery() async throws {
        let (fixture, _) = try await failingStore(grace: true)
        defer { fixture.remove() }
        _ = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(2.1))
        _ = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(4.5))
        #expect(try await current(fixture).status == .billingRetry)
        _ = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(6.5))
        let expired = try await current(fixture)
        #expect(expired.status == .expired && expired.expirationIntent == 2)
        #expect(try await fixture.store.nextRenewal() == nil, "nothing left to renew or retry")
        #expect(try await fixture.store.charges(app: Self.app, account: "alice").charges.count == 1, "a failed charge is no charge")
    }

    @Test("billing retry without grace; auto-renew turned off while retrying expires it at the next retry, intent 1")
    func retryThenCancel() async throws {
        let (fixture, _) = try await failingStore(grace: false)
        defer { fixture.remove() }
        _ = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(2.1))
        #expect(try await current(fixture).status == .billingRetry)
        _ = try await fixture.store.setAutoRenew(false, app: Self.app, account: "alice", group: "group")
        _ = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(2.6))
        let expired = try await current(fixture)
        #expect(expired.status == .expired && expired.expirationIntent == 1)
    }
}

extension Google_Protobuf_Timestamp {
    /// This time plus `milliseconds`.
    func adding(milliseconds: Int64) -> Google_Protobuf_Timestamp {
        let total = seconds * 1000 + Int64(nanos / 1_000_000) + milliseconds
        return Google_Protobuf_Timestamp(seconds: total / 1000, nanos: Int32(total % 1000) * 1_000_000)
    }
}

@Suite("Subscriptions in the store: the sandbox's controls (renew now, expire now, extend)")
struct SubscriptionControlTests {
    static let app = StoreFixture.queue.appBundleID
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    @Test("renew now ends the period now and renews from then; extend moves the end later by store days; expire now ends it, intent 1")
    func controls() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let bought = try await SubscriptionStoreTests().subscribe(fixture, at: Self.start)
        let renewedAt = Self.start.addingTimeInterval(60)
        let renewed = try await fixture.store.control(.renewNow, app: Self.app, account: "alice", group: "group", now: renewedAt)
        #expect(renewed.renewalCount == 1 && renewed.status == .active)
        let cut = try #require(try await fixture.store.transaction(bought.transactionIdentifier))
        #expect(cut.expiresDate == Google_Protobuf_Timestamp(date: renewedAt), "the first period ended then")
        let renewal = try #require(try await fixture.store.transaction(renewed.latestTransactionIdentifier))
        #expect(renewal.transactionDate == cut.expiresDate && renewal.transactionReason == .renewal)
        // Ten store days at the sandbox rate (a 5-minute month): 100 s later
        let extended = try await fixture.store.control(.extend(days: 10), app: Self.app, account: "alice", group: "group", now: renewedAt)
        #expect(extended.expiresDate == renewal.expiresDate.adding(milliseconds: 100_000))
        #expect(try await fixture.store.transaction(renewal.transactionIdentifier)?.expiresDate == extended.expiresDate)
        let expired = try await fixture.store.control(.expireNow, app: Self.app, account: "alice", group: "group", now: renewedAt.addingTimeInterval(5))
        #expect(expired.status == .expired && expired.expirationIntent == 1)
        await #expect(throws: RPCError.self) {
            _ = try await fixture.store.control(.renewNow, app: Self.app, account: "alice", group: "group")
        }
        await #expect(throws: RPCError.self) {
            _ = try await fixture.store.control(.extend(days: 91), app: Self.app, account: "bob", group: "group")
        }
    }
}
