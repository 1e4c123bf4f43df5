import Foundation
import StoreBus
import StoreSchema
import SwiftProtobuf
import Testing

@testable import PaymentQueue

@Suite("Subscriptions in the store: upgrades, downgrades and crossgrades within a group")
struct SubscriptionUpgradeTests {
    static let app = StoreFixture.queue.appBundleID
    static let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// Buys `product` of "group" (level `level`, `period`, `price`) at `now`, approved at once.
    func buy(
        _ fixture: StoreFixture, _ product: String, level: Int, period: String = "P1M", price: String, at now: Date
    ) async throws
        -> Storebus_PaymentQueue_V1_PaymentTransaction
    {
        var new = TransactionStore.NewTransaction(
            queue: StoreFixture.queue,
            payment: .with {
                $0.productIdentifier = product; $0.quantity = 1
            },
            productType: .autoRenewableSubscription, storefront: "USA", price: price, currency: "USD",
            start: .purchasing(policy: .with { $0.mode = .approve }, decideAt: now), idempotency: nil
        )
        new.subscription = (period, "group")
        new.subscriptionLevel = level
        let added = try await fixture.store.create(new, now: now, decideWhenDue: true).transaction
        return try #require(try await fixture.store.transaction(added.transactionIdentifier))
    }

    func current(_ fixture: StoreFixture) async throws -> Storebus_PaymentQueue_V1_Subscription {
        try #require(try await fixture.store.subscriptions(app: Self.app, account: "alice").first)
    }

    func ledger(_ fixture: StoreFixture) async throws -> [Storebus_PaymentQueue_V1_Charge] {
        try await fixture.store.charges(app: Self.app, account: "alice").charges
    }

    @Test("an upgrade takes over at once: a new period charged in full, the old one cancelled, marked upgraded and its unused half refunded")
    func upgrade() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let basic = try await buy(fixture, "basic", level: 2, price: "5.00", at: Self.start)
        let plus = try await buy(fixture, "plus", level: 1, price: "9.99", at: Self.start.addingTimeInterval(150))
        #expect(plus.transactionState == .purchased && plus.originalTransactionID == basic.transactionIdentifier)
        #expect(plus.transactionDate == Google_Protobuf_Timestamp(date: Self.start.addingTimeInterval(150)))
        #expect(plus.expiresDate == Google_Protobuf_Timestamp(date: Self.start.addingTimeInterval(450)))
        let replaced = try #require(try await fixture.store.transaction(basic.transactionIdentifier))
        #expect(replaced.isUpgraded && replaced.cancellationDate == plus.transactionDate)
        let charges = try await ledger(fixture)
        #expect(charges.map(\.amount) == ["5.00", "9.99"])
        #expect(charges.first?.refundedAmount == "2.50", "half the period unused")
        let subscription = try await current(fixture)
        #expect(subscription.productIdentifier == "plus" && subscription.latestTransactionIdentifier == plus.transactionIdentifier)
        #expect(subscription.originalTransactionIdentifier == basic.transactionIdentifier)
        let refunded = try await fixture.events().filter { !$0.refundedTransactions.transactions.isEmpty }
        #expect(refunded.count == 1, "receipts hear of the cancellation")
    }

    @Test("a downgrade waits for the next renewal: recorded in the period running, not charged; the renewal is the new product at its price")
    func downgrade() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let plus = try await buy(fixture, "plus", level: 1, price: "9.99", at: Self.start)
        let basic = try await buy(fixture, "basic", level: 2, price: "5.00", at: Self.start.addingTimeInterval(60))
        #expect(basic.transactionState == .purchased && basic.expiresDate == plus.expiresDate)
        #expect(try await ledger(fixture).map(\.amount) == ["9.99"])
        var subscription = try await current(fixture)
        #expect(subscription.productIdentifier == "plus" && subscription.autoRenewProductIdentifier == "basic")
        _ = try await fixture.store.renewDue(now: Self.start.addingTimeInterval(301))
        subscription = try await current(fixture)
        #expect(subscription.productIdentifier == "basic")
        let renewal = try #require(try await fixture.store.transaction(subscription.latestTransactionIdentifier))
        #expect(renewal.payment.productIdentifier == "basic" && renewal.price == "5.00" && renewal.transactionDate == plus.expiresDate)
        #expect(try await ledger(fixture).map(\.amount) == ["9.99", "5.00"])
    }

    @Test("a crossgrade to the same length takes over at once; to another length, at the next renewal; buying the running product again undoes a planned change")
    func crossgrades() async throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        _ = try await buy(fixture, "monthly", level: 1, price: "4.99", at: Self.start)
        let yearly = try await buy(fixture, "yearly", level: 1, period: "P1Y", price: "49.99", at: Self.start.addingTimeInterval(10))
        #expect(try await current(fixture).autoRenewProductIdentifier == "yearly" && !yearly.isUpgraded)
        _ = try await buy(fixture, "monthly", level: 1, price: "4.99", at: Self.start.addingTimeInterval(20))
        #expect(try await current(fixture).autoRenewProductIdentifier == "monthly", "the planned change is undone")
        let other = try await buy(fixture, "monthly.family", level: 1, price: "6.99", at: Self.start.addingTimeInterval(30))
        #expect(try await current(fixture).productIdentifier == "monthly.family")
        #expect(other.transactionDate == Google_Protobuf_Timestamp(date: Self.start.addingTimeInterval(30)))
        #expect(try await ledger(fixture).map(\.amount) == ["4.99", "6.99"])
    }

    @Test("pro rata to the currency's decimals", arguments: [("5.00", 1, 2, "2.50"), ("600", 1, 3, "200"), ("4.99", 2, 3, "3.33"), ("0.99", 0, 1, "0.00")])
    func proRata(amount: String, numerator: Int, denominator: Int, expected: String) {
        #expect(TransactionStore.proRata(amount, Decimal(numerator) / Decimal(denominator)) == expected)
    }
}
