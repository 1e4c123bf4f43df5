import Foundation
import StoreBus
import StoreBusStorage
import StoreSchema
import SwiftProtobuf
import Testing

@testable import PaymentQueue

@Suite("The store's clock: period ends at each renewal rate")
struct RenewalClockTests {
    static let start: Int64 = 1_800_000_000_000

    @Test(
        "Apple's sandbox table, StoreKit Test's monthly rates and its fixed ones",
        arguments: [
            ("P3D", Storebus_PaymentQueue_V1_RenewalRate.monthlyRenewalEveryFiveMinutes, Int64(120_000)),
            ("P1W", .monthlyRenewalEveryFiveMinutes, 180_000),
            ("P1M", .monthlyRenewalEveryFiveMinutes, 300_000),
            ("P2M", .monthlyRenewalEveryFiveMinutes, 600_000),
            ("P3M", .monthlyRenewalEveryFiveMinutes, 900_000),
            ("P6M", .monthlyRenewalEveryFiveMinutes, 1_800_000),
            ("P1Y", .monthlyRenewalEveryFiveMinutes, 3_600_000),
            ("P1M", .unspecified, 300_000),
            ("P1W", .monthlyRenewalEveryHour, 900_000),
            ("P1Y", .monthlyRenewalEveryHour, 43_200_000),
            ("P1W", .monthlyRenewalEveryThirtyMinutes, 600_000),
            ("P3M", .monthlyRenewalEveryThirtyMinutes, 5_400_000),
            ("P1W", .monthlyRenewalEveryThirtySeconds, 10_000),
            ("P6M", .monthlyRenewalEveryThirtySeconds, 180_000),
            ("P1Y", .oneRenewalEveryTwoSeconds, 2_000),
            ("P1W", .oneRenewalEveryMinute, 60_000),
            ("P1M", .oneRenewalEveryFiveMinutes, 300_000),
            ("P3M", .oneRenewalEveryFifteenMinutes, 900_000)
        ])
    func scaled(period: String, rate: Storebus_PaymentQueue_V1_RenewalRate, length: Int64) throws {
        let parsed = try #require(RenewalClock.Period(iso8601: period))
        #expect(parsed.iso8601 == period)
        #expect(RenewalClock.end(of: parsed, startingAt: Self.start, rate: rate) - Self.start == length)
    }

    @Test("real time is the calendar's, in UTC: a month from January 31 ends on the last day of February")
    func calendar() throws {
        let january31 = Int64(Date(timeIntervalSince1970: 1_801_353_600).timeIntervalSince1970 * 1000) + 123 // 2027-01-31T00:00:00.123Z
        let end = RenewalClock.end(of: try #require(RenewalClock.Period(iso8601: "P1M")), startingAt: january31, rate: .realTime)
        #expect(end == january31 + 28 * 86_400_000)
        let week = RenewalClock.end(of: try #require(RenewalClock.Period(iso8601: "P1W")), startingAt: january31, rate: .realTime)
        #expect(week == january31 + 7 * 86_400_000)
        let year = RenewalClock.end(of: try #require(RenewalClock.Period(iso8601: "P1Y")), startingAt: january31, rate: .realTime)
        #expect(year == january31 + 365 * 86_400_000)
    }

    @Test("rates go by their contract names, and only periods the catalog can give parse")
    func names() {
        #expect(RenewalClock.name(of: .oneRenewalEveryTwoSeconds) == "RENEWAL_RATE_ONE_RENEWAL_EVERY_TWO_SECONDS")
        for rate in RenewalClock.rates { #expect(RenewalClock.rate(named: RenewalClock.name(of: rate)) == rate) }
        #expect(RenewalClock.rate(named: "RENEWAL_RATE_UNSPECIFIED") == nil)
        for text in ["", "P", "P0M", "P1000D", "P1H", "1M", "PXM"] { #expect(RenewalClock.Period(iso8601: text) == nil, "\(text)") }
    }
}

@Suite("Subscriptions in the store: periods, renewals, auto-renew")
struct SubscriptionStoreTests {
    /// Buys the fixture's auto-renewable subscription "premium" at `now`, approved at once.
    func subscribe(_ fixture: StoreFixture, product: String = "premium", at now: Date) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        var new = TransactionStore.NewTransaction(
            queue: StoreFixture.queue,
            payment: .with {
                $0.productIdentifier = product; $0.quantity = 1
            },
            productType: .autoRenewableSubscription, storefront: "FRA", price: "4.99", currency: "EUR",
            start: .purchasing(policy: .with { $0.mode = .approve }, decideAt: now), idempotency: nil
        )
        new.subscription = ("P1M", "group")
        let added = try await fixture.store.create(new, now: now, decideWhenDue: true).transaction
        return try #require(try await fixture.store.transaction(added.transactionIdentifier))
    }

    func milliseconds(_ timestamp: Google_Protobuf_Timestamp) -> Int64 {
        timestamp.seconds * 1000 + Int64(timestamp.nanos / 1_000_000)
    }

    @Test("a purchase pays for one period at the app's rate, with its own billing line; the subscription is active")
    func purchase() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let bought = try await subscribe(fixture, at: now)
        #expect(bought.transactionState == .purchased)
        #expect(bought.transactionReason == .purchase)
        #expect(milliseconds(bought.expiresDate) - milliseconds(bought.transactionDate) == 300_000, "the sandbox's month")
        #expect(bought.originalTransactionID == bought.transactionIdentifier)
        #expect(bought.webOrderLineItemID > TransactionStore.webOrderBase)
        #expect(bought.subscriptionGroupIdentifier == "group")
        let subscriptions = try await fixture.store.subscriptions(app: StoreFixture.queue.appBundleID, account: "alice")
        #expect(subscriptions.count == 1)
        #expect(subscriptions.first?.status == .active && subscriptions.first?.autoRenewStatus == true)
        #expect(subscriptions.first?.expiresDate == bought.expiresDate)
    }

    @Test("each period that ended is renewed once, its own transaction from the last one's end, charged and announced")
    func renewals() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try await fixture.store.setRenewalRate(.oneRenewalEveryTwoSeconds, app: StoreFixture.queue.appBundleID)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let first = try await subscribe(fixture, at: now)
        // Seven seconds later, three periods have ended (at 2, 4 and 6 s): three renewals in one round
        let round = try await fixture.store.renewDue(now: now.addingTimeInterval(7))
        #expect(round.renewed == 3 && !round.moreDue)
        #expect(round.next == now.addingTimeInterval(8))
        // and nothing more until the next end
        #expect(try await fixture.store.renewDue(now: now.addingTimeInterval(7.5)).renewed == 0)
        let transactions = try await fixture.store.unfinished(StoreFixture.queue).transactions
        #expect(transactions.count == 4)
        var previous = first
        for renewal in transactions.dropFirst() {
            #expect(renewal.transactionState == .purchased && renewal.transactionReason == .renewal)
            #expect(renewal.originalTransactionID == first.transactionIdentifier)
            #expect(renewal.transactionDate == previous.expiresDate, "a period starts where the last ended")
            #expect(milliseconds(renewal.expiresDate) - milliseconds(renewal.transactionDate) == 2_000)
            #expect(renewal.webOrderLineItemID > previous.webOrderLineItemID)
            #expect(!renewal.hasOriginalTransaction, "a renewal is a purchase, not a restore")
            previous = renewal
        }
        let charges = try await fixture.store.charges(app: StoreFixture.queue.appBundleID, account: "alice").charges
        #expect(charges.map(\.transactionIdentifier) == transactions.map(\.transactionIdentifier))
        let subscription = try #require(try await fixture.store.subscriptions(app: StoreFixture.queue.appBundleID, account: "alice").first)
        #expect(subscription.renewalCount == 3 && subscription.latestTransactionIdentifier == previous.transactionIdentifier)
        let announced = try await fixture.events().filter { $0.updatedTransactions.transactions.first?.transactionReason == .renewal }
        #expect(announced.count == 3)
    }

    @Test("buying the subscription that runs is 'already subscribed': purchased in the period running, not charged")
    func alreadySubscribed() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let first = try await subscribe(fixture, at: now)
        let again = try await subscribe(fixture, at: now.addingTimeInterval(60))
        #expect(again.transactionState == .purchased)
        #expect(again.expiresDate == first.expiresDate && again.originalTransactionID == first.transactionIdentifier)
        #expect(try await fixture.store.charges(app: StoreFixture.queue.appBundleID, account: "alice").charges.count == 1)
        // After the subscription has expired, buying it again is charged and keeps its original.
        _ = try await fixture.store.setAutoRenew(false, app: StoreFixture.queue.appBundleID, account: "alice", group: "group")
        _ = try await fixture.store.renewDue(now: now.addingTimeInterval(600))
        let resubscribed = try await subscribe(fixture, at: now.addingTimeInterval(700))
        #expect(resubscribed.originalTransactionID == first.transactionIdentifier)
        #expect(milliseconds(resubscribed.expiresDate) == milliseconds(resubscribed.transactionDate) + 300_000)
        #expect(try await fixture.store.charges(app: StoreFixture.queue.appBundleID, account: "alice").charges.count == 2)
    }

    @Test("auto-renew off: the period runs out and the subscription expires, intent 1, followers told; on again before then, it renews")
    func autoRenewOff() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let app = StoreFixture.queue.appBundleID
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        _ = try await subscribe(fixture, at: now)
        let off = try await fixture.store.setAutoRenew(false, app: app, account: "alice", group: "group")
        #expect(!off.autoRenewStatus && off.status == .active)
        let on = try await fixture.store.setAutoRenew(true, app: app, account: "alice", group: "group")
        #expect(on.autoRenewStatus)
        _ = try await fixture.store.setAutoRenew(false, app: app, account: "alice", group: "group")
        let round = try await fixture.store.renewDue(now: now.addingTimeInterval(301))
        #expect(round.renewed == 0)
        let expired = try #require(try await fixture.store.subscriptions(app: app, account: "alice").first)
        #expect(expired.status == .expired && expired.expirationIntent == 1)
        let changes = try await fixture.events().compactMap { event -> Storebus_PaymentQueue_V1_Subscription? in
            guard case .subscriptionChanged(let changed) = event.event else { return nil }
            return changed.subscription
        }
        // The purchase, off, on, off, the expiry: every change, each after what made it.
        #expect(changes.map(\.autoRenewStatus) == [true, false, true, false, false])
        #expect(changes.last?.status == .expired)
        await #expect(throws: RPCError.self) {
            _ = try await fixture.store.setAutoRenew(true, app: app, account: "alice", group: "group")
        }
        await #expect(throws: RPCError.self) {
            _ = try await fixture.store.setAutoRenew(true, app: app, account: "alice", group: "other")
        }
    }

    @Test("a renewal waits while its queue has no room for another unfinished transaction, and happens once it has")
    func fullQueue() async throws {
        let fixture = try StoreFixture(maxUnfinished: 1)
        defer { fixture.remove() }
        try await fixture.store.setRenewalRate(.oneRenewalEveryTwoSeconds, app: StoreFixture.queue.appBundleID)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let first = try await subscribe(fixture, at: now)
        let blocked = try await fixture.store.renewDue(now: now.addingTimeInterval(3))
        #expect(blocked.renewed == 0 && blocked.blocked == 1 && !blocked.moreDue)
        _ = try await fixture.store.finish(first.transactionIdentifier, queue: StoreFixture.queue)
        let after = try await fixture.store.renewDue(now: now.addingTimeInterval(3))
        #expect(after.renewed == 1)
    }
}
