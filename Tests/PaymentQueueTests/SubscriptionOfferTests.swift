import Foundation
import StoreBus
import StoreSchema
import SwiftProtobuf
import Testing

@testable import PaymentQueue

@Suite("Subscriptions in the store: introductory offers, once per group")
struct SubscriptionOfferTests {
    static let app = StoreFixture.queue.appBundleID
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    func offer(_ mode: Storebus_Catalog_V1_PaymentMode, _ period: String, periods: Int32, price: String) -> Storebus_Catalog_V1_IntroductoryPrice {
        .with {
            $0.paymentMode = mode
            $0.subscriptionPeriod.iso8601 = period
            $0.numberOfPeriods = periods
            $0.price = price
        }
    }

    /// Buys "premium" (P1M at 4.99, in "group") with `offer` at `now`, approved at once.
    func subscribe(_ fixture: StoreFixture, offer: Storebus_Catalog_V1_IntroductoryPrice?, at now: Date) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        var new = TransactionStore.NewTransaction(
            queue: StoreFixture.queue,
            payment: .with {
                $0.productIdentifier = "premium"; $0.quantity = 1
            },
            productType: .autoRenewableSubscription, storefront: "FRA", price: "4.99", currency: "EUR",
            start: .purchasing(policy: .with { $0.mode = .approve }, decideAt: now), idempotency: nil
        )
        new.subscription = ("P1M", "group")
        new.introductoryOffer = offer
        let added = try await fixture.store.create(new, now: now, decideWhenDue: true).transaction
        return try #require(try await fixture.store.transaction(added.transactionIdentifier))
    }

    func lengthMS(_ transaction: Storebus_PaymentQueue_V1_PaymentTransaction) -> Int64 {
        (transaction.expiresDate.seconds - transaction.transactionDate.seconds) * 1000
            + Int64(transaction.expiresDate.nanos - transaction.transactionDate.nanos) / 1_000_000
    }

    func charges(_ fixture: StoreFixture) async throws -> [String] {
        try await fixture.store.charges(app: Self.app, account: "alice").charges.map(\.amount)
    }

    @Test("a free trial: its length, not charged, a trial period; the renewal after it is a regular period, charged; once the group was subscribed, no trial again")
    func freeTrialOnce() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let trial = try await subscribe(fixture, offer: offer(.freeTrial, "P1W", periods: 1, price: "0"), at: Self.start)
        #expect(trial.isTrialPeriod && !trial.isInIntroOfferPeriod && trial.price == "0")
        #expect(lengthMS(trial) == 180_000, "a sandbox week")
        #expect(try await charges(fixture).isEmpty)
        _ = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(181))
        let renewal = try #require(try await fixture.store.unfinished(StoreFixture.queue).transactions.last)
        #expect(renewal.transactionReason == .renewal && !renewal.isTrialPeriod && renewal.price == "4.99")
        #expect(lengthMS(renewal) == 300_000, "a sandbox month")
        #expect(try await charges(fixture) == ["4.99"])
        // Ended, and bought again: the group was subscribed before, so no trial
        _ = try await fixture.store.setAutoRenew(false, app: Self.app, account: "alice", group: "group")
        _ = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(600))
        let again = try await subscribe(fixture, offer: offer(.freeTrial, "P1W", periods: 1, price: "0"), at: Self.start.addingTimeInterval(700))
        #expect(!again.isTrialPeriod && again.price == "4.99" && lengthMS(again) == 300_000)
        #expect(try await charges(fixture) == ["4.99", "4.99"])
    }

    @Test("pay as you go: each offer period at the offer's price, renewals included, then the regular price")
    func payAsYouGo() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try await fixture.store.setRenewalRate(.oneRenewalEveryTwoSeconds, app: Self.app)
        let first = try await subscribe(fixture, offer: offer(.payAsYouGo, "P1M", periods: 3, price: "0.99"), at: Self.start)
        #expect(first.isInIntroOfferPeriod && first.price == "0.99")
        _ = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(7))
        let periods = try await fixture.store.unfinished(StoreFixture.queue).transactions
        #expect(periods.map(\.price) == ["0.99", "0.99", "0.99", "4.99"])
        #expect(periods.map(\.isInIntroOfferPeriod) == [true, true, true, false])
        #expect(try await charges(fixture) == ["0.99", "0.99", "0.99", "4.99"])
    }

    @Test("pay up front: the whole offer in one period at the offer's price")
    func payUpFront() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let first = try await subscribe(fixture, offer: offer(.payUpFront, "P3M", periods: 1, price: "9.99"), at: Self.start)
        #expect(first.isInIntroOfferPeriod && first.price == "9.99" && lengthMS(first) == 900_000)
        #expect(try await charges(fixture) == ["9.99"])
    }
}
