import Foundation
import StoreSchema
import SwiftProtobuf
import Testing

@testable import Notifications

/// The rules alone: which notifications each event of the payment queue's log calls for.
@Suite("Which notification each event calls for")
struct NotificationRulesTests {
    static let queue = Storebus_PaymentQueue_V1_QueueRef.with {
        $0.appBundleID = "com.example.app"
        $0.accountID = "alice"
        $0.deviceID = "phone"
    }

    static func transaction(
        _ id: String, _ type: Storebus_Catalog_V1_ProductType, state: Storebus_PaymentQueue_V1_TransactionState = .purchased,
        original: String = "", reason: Storebus_PaymentQueue_V1_TransactionReason = .purchase
    ) -> Storebus_PaymentQueue_V1_PaymentTransaction {
        .with {
            $0.transactionIdentifier = id
            $0.productType = type
            $0.transactionState = state
            $0.originalTransactionID = original
            $0.transactionReason = reason
            $0.queue = queue
        }
    }

    static func updated(_ transactions: Storebus_PaymentQueue_V1_PaymentTransaction...) -> Storebus_PaymentQueue_V1_QueueEvent {
        .with { $0.updatedTransactions.transactions = transactions }
    }

    static func subscription(
        latest: String = "1", product: String = "monthly", status: Storebus_PaymentQueue_V1_SubscriptionStatus = .active, autoRenew: Bool = true,
        renewProduct: String? = nil, renewals: UInt32 = 0, intent: Int32 = 0, expires: Int64 = 1_000
    ) -> Storebus_PaymentQueue_V1_QueueEvent {
        .with {
            $0.subscriptionChanged.subscription = .with {
                $0.queue = queue
                $0.subscriptionGroupIdentifier = "premium"
                $0.originalTransactionIdentifier = "1"
                $0.latestTransactionIdentifier = latest
                $0.productIdentifier = product
                $0.autoRenewProductIdentifier = renewProduct ?? product
                $0.autoRenewStatus = autoRenew
                $0.status = status
                $0.renewalCount = renewals
                $0.expirationIntent = intent
                $0.expiresDate = Google_Protobuf_Timestamp(milliseconds: expires)
            }
        }
    }

    /// The type and subtype of each notification the events call for, one list per event.
    static func run(_ events: [Storebus_PaymentQueue_V1_QueueEvent]) -> [[String]] {
        var rules = NotificationRules()
        return events.enumerated().map { index, event in
            rules.intents(for: event, seq: UInt64(index + 1)).map { $0.subtype.isEmpty ? $0.type : "\($0.type)/\($0.subtype)" }
        }
    }

    @Test("one-time charges: consumables, non-consumables and non-renewing subscriptions once each; not a free re-buy, a restore or a pending one")
    func oneTimeCharges() {
        let events = [
            Self.updated(Self.transaction("10", .consumable, state: .purchasing)),
            Self.updated(Self.transaction("10", .consumable)),
            Self.updated(Self.transaction("10", .consumable)), // the same purchase again (a replay, a delivery)
            Self.updated(Self.transaction("11", .nonConsumable), Self.transaction("12", .nonRenewingSubscription)),
            Self.updated(Self.transaction("13", .nonConsumable, original: "11")), // bought again while held: no charge
            Self.updated(Self.transaction("14", .nonConsumable, state: .restored, original: "11")),
            Self.updated(Self.transaction("15", .consumable, state: .failed)),
            Self.updated(Self.transaction("16", .autoRenewableSubscription, original: "16")) // its subscription_changed says it
        ]
        #expect(Self.run(events) == [[], ["ONE_TIME_CHARGE"], [], ["ONE_TIME_CHARGE", "ONE_TIME_CHARGE"], [], [], [], []])
    }

    @Test("refunds: one per charged transaction, a subscription's period included; not a period an upgrade replaced, nor a restored copy")
    func refunds() {
        var upgraded = Self.transaction("21", .autoRenewableSubscription, original: "20")
        upgraded.isUpgraded = true
        let events: [Storebus_PaymentQueue_V1_QueueEvent] = [
            .with { $0.refundedTransactions.transactions = [Self.transaction("11", .nonConsumable), Self.transaction("14", .nonConsumable, state: .restored, original: "11")] },
            .with { $0.refundedTransactions.transactions = [Self.transaction("11", .nonConsumable)] },
            .with { $0.refundedTransactions.transactions = [upgraded] },
            .with { $0.refundedTransactions.transactions = [Self.transaction("22", .autoRenewableSubscription, original: "20", reason: .renewal)] }
        ]
        #expect(Self.run(events) == [["REFUND"], [], [], ["REFUND"]])
    }

    @Test("a subscription's life: bought, renewed, auto-renew off and on, downgrade planned and undone, extended, failing, recovered, expired, bought again")
    func subscriptionLife() {
        let events = [
            Self.subscription(latest: "1"),
            Self.subscription(latest: "1"), // announced again, nothing changed
            Self.subscription(latest: "2", renewals: 1, expires: 2_000),
            Self.subscription(latest: "2", autoRenew: false, renewals: 1, expires: 2_000),
            Self.subscription(latest: "2", autoRenew: true, renewals: 1, expires: 2_000),
            Self.subscription(latest: "2", renewProduct: "basic", renewals: 1, expires: 2_000),
            Self.subscription(latest: "2", renewals: 1, expires: 2_000),
            Self.subscription(latest: "2", renewals: 1, expires: 3_000),
            Self.subscription(latest: "2", renewals: 1, expires: 2_500), // moved earlier (renew now): nothing yet
            Self.subscription(latest: "2", status: .gracePeriod, renewals: 1, expires: 2_500),
            Self.subscription(latest: "2", status: .billingRetry, renewals: 1, expires: 2_500),
            Self.subscription(latest: "3", renewals: 2, expires: 4_000),
            Self.subscription(latest: "3", status: .billingRetry, renewals: 2, expires: 4_000),
            Self.subscription(latest: "3", status: .expired, renewals: 2, intent: 2, expires: 4_000),
            Self.subscription(latest: "4", renewals: 2, expires: 9_000),
            Self.subscription(latest: "4", status: .expired, autoRenew: false, renewals: 2, intent: 1, expires: 9_000)
        ]
        #expect(
            Self.run(events) == [
                ["SUBSCRIBED/INITIAL_BUY"], [], ["DID_RENEW"], ["DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED"],
                ["DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_ENABLED"], ["DID_CHANGE_RENEWAL_PREF/DOWNGRADE"], ["DID_CHANGE_RENEWAL_PREF"], ["RENEWAL_EXTENDED"], [],
                ["DID_FAIL_TO_RENEW/GRACE_PERIOD"], ["GRACE_PERIOD_EXPIRED"], ["DID_RENEW/BILLING_RECOVERY"], ["DID_FAIL_TO_RENEW"],
                ["EXPIRED/BILLING_RETRY"], ["SUBSCRIBED/RESUBSCRIBE"], ["EXPIRED/VOLUNTARY"]
            ])
    }

    @Test("an upgrade takes over the period: DID_CHANGE_RENEWAL_PREF UPGRADE, with the new period's transaction")
    func upgrade() {
        var rules = NotificationRules()
        _ = rules.intents(for: Self.subscription(latest: "1", product: "basic"), seq: 1)
        let intents = rules.intents(for: Self.subscription(latest: "2", product: "premium"), seq: 2)
        #expect(intents.map(\.type) == ["DID_CHANGE_RENEWAL_PREF"] && intents.first?.subtype == "UPGRADE")
        #expect(intents.first?.transactionID == "2" && intents.first?.originalTransactionID == "1" && intents.first?.subscription == true)
    }

    @Test("a notification's UUID is the same whenever its event is read again, and differs between events, apps and notifications of one event")
    func uuids() {
        let first = NotificationRules.uuid(app: "a", seq: 7, index: 0)
        #expect(first == NotificationRules.uuid(app: "a", seq: 7, index: 0))
        #expect(Set([first, NotificationRules.uuid(app: "a", seq: 8, index: 0), NotificationRules.uuid(app: "b", seq: 7, index: 0), NotificationRules.uuid(app: "a", seq: 7, index: 1)]).count == 4)
        #expect(UUID(uuidString: first) != nil && first == first.lowercased())
        // The same UUIDs as ever (a notification appended before an upgrade is planned again with
        // its UUID after it): SHA-256 of the name, its version and variant bits set, worked out in Python.
        #expect(first == "5ef993d0-72e5-828d-8449-7283c6b06a50")
        #expect(NotificationRules.uuid(app: "com.example", seq: 42, shard: 3, index: 2) == "55b2714c-02d1-82a4-b75c-3c2db616eb70")
    }
}
