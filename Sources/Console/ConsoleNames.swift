import Foundation
import StoreSchema
import SwiftProtobuf

/// How the console writes the contract's values for people: states and types by their StoreKit
/// names, dates in ISO 8601 (UTC), the choices its forms offer.
enum ConsoleNames {
    static func date(_ timestamp: Google_Protobuf_Timestamp?) -> String {
        guard let timestamp, timestamp.seconds > 0 || timestamp.nanos > 0 else { return "" }
        return timestamp.date.formatted(.iso8601)
    }

    static func date(_ date: Date) -> String { date.formatted(.iso8601) }

    static func state(_ state: Storebus_PaymentQueue_V1_TransactionState) -> String {
        switch state {
        case .purchasing: "purchasing"
        case .purchased: "purchased"
        case .failed: "failed"
        case .restored: "restored"
        case .deferred: "deferred"
        default: "unknown"
        }
    }

    static func productType(_ type: Storebus_Catalog_V1_ProductType) -> String {
        switch type {
        case .consumable: "consumable"
        case .nonConsumable: "non-consumable"
        case .autoRenewableSubscription: "auto-renewable subscription"
        case .nonRenewingSubscription: "non-renewing subscription"
        default: "unknown"
        }
    }

    static func download(_ state: Storebus_PaymentQueue_V1_DownloadState) -> String {
        switch state {
        case .waiting: "waiting"
        case .active: "active"
        case .paused: "paused"
        case .finished: "finished"
        case .failed: "failed"
        case .cancelled: "cancelled"
        default: "unknown"
        }
    }

    static func subscription(_ status: Storebus_PaymentQueue_V1_SubscriptionStatus) -> String {
        switch status {
        case .active: "active"
        case .expired: "expired"
        case .billingRetry: "billing retry"
        case .gracePeriod: "grace period"
        case .revoked: "revoked"
        default: "unknown"
        }
    }

    static func policy(_ mode: Storebus_PaymentQueue_V1_PolicyMode) -> String {
        switch mode {
        case .approve: "approve"
        case .fail: "fail"
        case .askToBuy: "ask to buy"
        case .interrupt: "interrupt"
        default: "approve"
        }
    }

    /// A choice of a form's select: its value, what a person reads, and whether it is the current one.
    struct Option: Sendable {
        var value: String
        var label: String
        var selected: Bool
    }

    /// The payment policy's modes, by the value the policy form posts.
    static let policyModes: [(value: String, mode: Storebus_PaymentQueue_V1_PolicyMode, label: String)] = [
        ("approve", .approve, "Approve: charge and deliver"),
        ("fail", .fail, "Fail with an error"),
        ("ask-to-buy", .askToBuy, "Ask to Buy: defer until approved or declined"),
        ("interrupt", .interrupt, "Interrupt: fail until the purchase is resolved")
    ]

    /// The errors a failing policy can give (SKErrorDomain's codes a purchase can end with).
    static let failErrors: [(value: String, error: Storebus_PaymentQueue_V1_SKError, label: String)] = [
        ("paymentNotAllowed", .paymentNotAllowed, "paymentNotAllowed (4)"),
        ("paymentCancelled", .paymentCancelled, "paymentCancelled (2)"),
        ("paymentInvalid", .paymentInvalid, "paymentInvalid (3)"),
        ("clientInvalid", .clientInvalid, "clientInvalid (1)"),
        ("storeProductNotAvailable", .storeProductNotAvailable, "storeProductNotAvailable (5)"),
        ("cloudServiceNetworkConnectionFailed", .cloudServiceNetworkConnectionFailed, "cloudServiceNetworkConnectionFailed (7)"),
        ("unknown", .unknown, "unknown (0)")
    ]

    static func failError(_ error: Storebus_PaymentQueue_V1_SKError) -> String {
        failErrors.first { $0.error == error }?.value ?? "code \(error.rawValue)"
    }

    /// The sandbox clock's rates, by the value the rate form posts.
    static let renewalRates: [(value: String, rate: Storebus_PaymentQueue_V1_RenewalRate, label: String)] = [
        ("real-time", .realTime, "Real time"),
        ("monthly-hour", .monthlyRenewalEveryHour, "A month every hour"),
        ("monthly-30m", .monthlyRenewalEveryThirtyMinutes, "A month every 30 minutes"),
        ("monthly-5m", .monthlyRenewalEveryFiveMinutes, "A month every 5 minutes"),
        ("monthly-30s", .monthlyRenewalEveryThirtySeconds, "A month every 30 seconds"),
        ("one-15m", .oneRenewalEveryFifteenMinutes, "One renewal every 15 minutes"),
        ("one-5m", .oneRenewalEveryFiveMinutes, "One renewal every 5 minutes"),
        ("one-1m", .oneRenewalEveryMinute, "One renewal every minute"),
        ("one-2s", .oneRenewalEveryTwoSeconds, "One renewal every 2 seconds")
    ]

    /// A subscription period for people: "1 month", "7 days".
    static func period(_ period: Storebus_Catalog_V1_SubscriptionPeriod) -> String {
        let unit: String
        switch period.unit {
        case .day: unit = "day"
        case .week: unit = "week"
        case .month: unit = "month"
        case .year: unit = "year"
        default: return period.iso8601
        }
        return "\(period.numberOfUnits) \(unit)\(period.numberOfUnits == 1 ? "" : "s")"
    }

    /// A progress from 0 to 1 as a whole percentage, rounded down (100 only when complete); 0 for
    /// what is not a number.
    static func percent(_ progress: Double) -> Int {
        guard progress.isFinite else { return 0 }
        return Int((min(max(progress, 0), 1) * 100).rounded(.down))
    }

    /// A byte count for people: "86.5 kB", "64.0 MB".
    static func bytes(_ count: Int64) -> String {
        ByteCountFormatter.string(fromByteCount: count, countStyle: .decimal)
    }

    /// `text` as a path segment of a URL (every byte but unreserved ones percent-encoded).
    static func segment(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    static func appURL(_ app: String) -> String { "/apps/\(segment(app))" }
    static func accountURL(_ app: String, _ account: String) -> String { "\(appURL(app))/accounts/\(segment(account))" }
    static func transactionURL(_ app: String, _ account: String, _ id: String) -> String {
        "\(accountURL(app, account))/transactions/\(segment(id))"
    }
}
