import ArgumentParser
import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

/// `storectl subscriptions`: the account's auto-renewable subscriptions, as a person reads them.
struct SubscriptionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscriptions", abstract: "Show the account's auto-renewable subscriptions: what renews when, what ended and why.")

    @OptionGroup var client: ClientOptions

    func run() async throws {
        let connection = try StoreConnection(configuration: client.configuration())
        let subscriptions = try await sentence {
            try await connection.call(Storebus_PaymentQueue_V1_Subscriptions.listSubscriptions, .init()).subscriptions
        }
        if subscriptions.isEmpty { print("no subscriptions") }
        for subscription in subscriptions { print(Self.line(subscription)) }
        await connection.close()
    }

    /// One subscription in a line: its group, product and state.
    static func line(_ subscription: Storebus_PaymentQueue_V1_Subscription) -> String {
        let expires = date(subscription.expiresDate.seconds)
        let state: String
        switch subscription.status {
        case .active where subscription.autoRenewStatus:
            let next = subscription.autoRenewProductIdentifier == subscription.productIdentifier ? "" : " as \(subscription.autoRenewProductIdentifier)"
            state = "renews\(next) on \(expires)"
        case .active: state = "expires on \(expires) (auto-renew off)"
        case .gracePeriod: state = "in the billing grace period until \(date(subscription.gracePeriodExpiresDate.seconds))"
        case .billingRetry: state = "in billing retry until \(date(subscription.billingRetryEndsDate.seconds))"
        case .revoked: state = "revoked"
        default:
            let reasons = [1: "auto-renew turned off", 2: "billing error", 3: "price increase not agreed", 4: "product not for sale", 5: "other reason"]
            state = "expired on \(expires)\(reasons[Int(subscription.expirationIntent)].map { ": \($0)" } ?? "")"
        }
        return
            "\(subscription.subscriptionGroupIdentifier)  \(subscription.productIdentifier)  \(state)  (original \(subscription.originalTransactionIdentifier), \(subscription.renewalCount) renewals)"
    }

    /// A date (seconds since 1970) as ISO 8601, in UTC.
    static func date(_ seconds: Int64) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
    }
}

/// `storectl admin subscription`: the sandbox's subscription controls.
struct SubscriptionAdminCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscription", abstract: "Drive subscriptions: the store's clock, billing problems, renew, expire, extend.",
        subcommands: [Rate.self, Billing.self, List.self, RenewNow.self, ExpireNow.self, Extend.self])

    struct Target: ParsableArguments {
        @Option(help: "The App Store account acted on.")
        var account: String = "demo"
        @Option(help: "The subscription group.")
        var group: String

        func ref(app: String) -> Storebus_PaymentQueue_V1_SubscriptionRef {
            .with {
                $0.appBundleID = app
                $0.accountID = account
                $0.subscriptionGroupIdentifier = group
            }
        }
    }

    struct Rate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Set how fast the app's subscriptions renew (StoreKit Test's time rate).")
        @OptionGroup var options: AdminCommands.Options
        @Argument(help: "A rate: \(RateName.allCases.map(\.rawValue).joined(separator: ", ")).")
        var rate: RateName
        func run() async throws {
            let admin = try await options.connection()
            let answer = try await sentence {
                try await admin.call(
                    Storebus_PaymentQueue_V1_Subscriptions.setRenewalRate,
                    .with {
                        $0.appBundleID = options.app
                        $0.rate = rate.proto
                    })
            }
            print("\(options.app) renews at \(RateName(answer.rate)?.rawValue ?? "\(answer.rate)")")
            await admin.close()
        }
    }

    enum RateName: String, ExpressibleByArgument, CaseIterable {
        case realTime = "real-time", monthlyEveryHour = "monthly-every-hour", monthlyEveryThirtyMinutes = "monthly-every-30-minutes"
        case sandbox = "monthly-every-5-minutes", monthlyEveryThirtySeconds = "monthly-every-30-seconds"
        case everyFifteenMinutes = "every-15-minutes", everyFiveMinutes = "every-5-minutes", everyMinute = "every-minute", everyTwoSeconds = "every-2-seconds"

        var proto: Storebus_PaymentQueue_V1_RenewalRate {
            switch self {
            case .realTime: .realTime
            case .monthlyEveryHour: .monthlyRenewalEveryHour
            case .monthlyEveryThirtyMinutes: .monthlyRenewalEveryThirtyMinutes
            case .sandbox: .monthlyRenewalEveryFiveMinutes
            case .monthlyEveryThirtySeconds: .monthlyRenewalEveryThirtySeconds
            case .everyFifteenMinutes: .oneRenewalEveryFifteenMinutes
            case .everyFiveMinutes: .oneRenewalEveryFiveMinutes
            case .everyMinute: .oneRenewalEveryMinute
            case .everyTwoSeconds: .oneRenewalEveryTwoSeconds
            }
        }

        init?(_ rate: Storebus_PaymentQueue_V1_RenewalRate) {
            guard let name = Self.allCases.first(where: { $0.proto == rate }) else { return nil }
            self = name
        }
    }

    struct Billing: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make the app's renewal charges fail or succeed, with or without a grace period.")
        @OptionGroup var options: AdminCommands.Options
        @Flag(inversion: .prefixedNo, help: "Renewal charges fail: subscriptions enter billing retry.")
        var failRenewals = false
        @Flag(inversion: .prefixedNo, help: "A grace period before billing retry.")
        var grace = false
        func run() async throws {
            let admin = try await options.connection()
            let answer = try await sentence {
                try await admin.call(
                    Storebus_PaymentQueue_V1_Subscriptions.setBillingControls,
                    .with {
                        $0.appBundleID = options.app
                        $0.controls.billingRetryOnRenewal = failRenewals
                        $0.controls.gracePeriodEnabled = grace
                    })
            }
            let charges = answer.controls.billingRetryOnRenewal ? "fail (billing retry)" : "succeed"
            print("\(options.app): renewal charges \(charges), grace period \(answer.controls.gracePeriodEnabled ? "on" : "off")")
            await admin.close()
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "An account's subscriptions.")
        @OptionGroup var options: AdminCommands.Options
        @OptionGroup var target: AdminCommands.AccountOption
        func run() async throws {
            let admin = try await options.connection(account: target.account)
            let subscriptions = try await sentence {
                try await admin.call(
                    Storebus_PaymentQueue_V1_Subscriptions.listSubscriptions,
                    .with {
                        $0.appBundleID = options.app
                        $0.accountID = target.account
                    }
                ).subscriptions
            }
            if subscriptions.isEmpty { print("no subscriptions") }
            for subscription in subscriptions { print(SubscriptionsCommand.line(subscription)) }
            await admin.close()
        }
    }

    struct RenewNow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "renew-now", abstract: "End the period running now and renew at once.")
        @OptionGroup var options: AdminCommands.Options
        @OptionGroup var target: Target
        func run() async throws {
            let admin = try await options.connection(account: target.account)
            let answer = try await sentence { try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.renewNow, target.ref(app: options.app)) }
            print(SubscriptionsCommand.line(answer.subscription))
            await admin.close()
        }
    }

    struct ExpireNow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "expire-now", abstract: "End the subscription now.")
        @OptionGroup var options: AdminCommands.Options
        @OptionGroup var target: Target
        func run() async throws {
            let admin = try await options.connection(account: target.account)
            let answer = try await sentence { try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.expireNow, target.ref(app: options.app)) }
            print(SubscriptionsCommand.line(answer.subscription))
            await admin.close()
        }
    }

    struct Extend: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Move the renewal date later by days on the store's clock.")
        @OptionGroup var options: AdminCommands.Options
        @OptionGroup var target: Target
        @Option(help: "Days to add (1 to 90).")
        var days: UInt32
        @Option(help: "Why: 0 undeclared, 1 customer satisfaction, 2 other, 3 service issue or outage.")
        var reason: UInt32 = 0
        func run() async throws {
            let admin = try await options.connection(account: target.account)
            let answer = try await sentence {
                try await admin.call(
                    Storebus_PaymentQueue_V1_Subscriptions.extendRenewalDate,
                    .with {
                        $0.subscription = target.ref(app: options.app)
                        $0.extendByDays = days
                        $0.extendReasonCode = reason
                    })
            }
            print(SubscriptionsCommand.line(answer.subscription))
            await admin.close()
        }
    }
}
