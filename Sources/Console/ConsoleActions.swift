import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

/// What the console's forms do: each one admin call through the gateway (the same storectl makes),
/// answered with a sentence for the next page. A form that destroys something must carry its
/// confirmation box ticked.
struct ConsoleActions: Sendable {
    let link: GatewayLink
    let key: String

    /// The action's name in a sentence ("Refund failed: …").
    static func title(_ action: String) -> String {
        switch action {
        case "approve": "Approving the Ask to Buy"
        case "decline": "Declining the Ask to Buy"
        case "resolve": "Resolving the interrupted purchase"
        case "refund": "The refund"
        case "policy": "Setting the payment policy"
        case "renewal-rate": "Setting the store clock"
        case "billing": "Setting billing"
        case "renew-now": "Renewing"
        case "expire-now": "Expiring"
        case "extend": "Extending the renewal date"
        case "auto-renew": "Changing auto-renew"
        case "clear-history": "Clearing the purchase history"
        case "reset": "The reset"
        case "rotate-key": "Rotating the signing key"
        case "reload-catalog": "Reloading the catalog"
        default: "The action"
        }
    }

    func perform(_ action: String, _ form: [String: String]) async throws -> String {
        let admin = link.connection(key)
        let field = { (name: String) in form[name] ?? "" }
        func confirmed() throws {
            guard field("confirm") == "yes" else { throw ConsoleProblem.refused("tick the box to confirm: this cannot be undone") }
        }
        func subscription() -> Storebus_PaymentQueue_V1_SubscriptionRef {
            .with {
                $0.appBundleID = field("app")
                $0.accountID = field("account")
                $0.subscriptionGroupIdentifier = field("group")
            }
        }
        switch action {
        case "approve":
            let answer = try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.approveAskToBuy, .with { $0.transactionIdentifier = field("transaction") })
            return "Approved: transaction \(answer.transaction.transactionIdentifier) is \(ConsoleNames.state(answer.transaction.transactionState))."
        case "decline":
            let answer = try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.declineAskToBuy, .with { $0.transactionIdentifier = field("transaction") })
            return "Declined: transaction \(answer.transaction.transactionIdentifier) is \(ConsoleNames.state(answer.transaction.transactionState))."
        case "resolve":
            let answer = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.resolveInterruptedPurchase, .with { $0.transactionIdentifier = field("transaction") })
            return "Resolved: the purchase goes on as transaction \(answer.transaction.transactionIdentifier), \(ConsoleNames.state(answer.transaction.transactionState))."
        case "refund":
            try confirmed()
            let answer = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction,
                .with {
                    $0.transactionIdentifier = field("transaction")
                    $0.revocationReason = field("reason") == "app-issue" ? .appIssue : .other
                    $0.reason = String(field("note").prefix(200))
                })
            let revoked = answer.revokedProductIdentifiers.isEmpty ? "" : "; entitlements revoked: \(answer.revokedProductIdentifiers.joined(separator: ", "))"
            return "Refunded transaction \(answer.transaction.transactionIdentifier)"
                + (answer.hasCharge ? " (charge \(answer.charge.chargeID), \(answer.charge.amount) \(answer.charge.currencyCode))" : "") + revoked + "."
        case "policy":
            guard let mode = ConsoleNames.policyModes.first(where: { $0.value == field("mode") }) else {
                throw ConsoleProblem.refused("choose one of the modes offered")
            }
            let error = ConsoleNames.failErrors.first { $0.value == field("error") }?.error ?? .paymentNotAllowed
            guard let delay = UInt32(field("delayMs").isEmpty ? "0" : field("delayMs")) else {
                throw ConsoleProblem.refused("must be a whole number of milliseconds")
            }
            _ = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.setPaymentPolicy,
                .with {
                    $0.appBundleID = field("app")
                    $0.accountID = field("account")
                    $0.policy = .with {
                        $0.mode = mode.mode
                        $0.failError = error
                        $0.delayMs = delay
                        $0.purchasesRestricted = field("restricted") == "on"
                    }
                })
            let whose = field("account").isEmpty ? "the default of \(field("app"))" : "the policy of \(field("account"))"
            return "Payment policy set: \(whose) is now \(mode.mode == .fail ? "fail with \(ConsoleNames.failError(error))" : ConsoleNames.policy(mode.mode))"
                + (field("restricted") == "on" ? ", purchases restricted" : "") + "."
        case "renewal-rate":
            guard let rate = ConsoleNames.renewalRates.first(where: { $0.value == field("rate") }) else {
                throw ConsoleProblem.refused("choose one of the rates offered")
            }
            _ = try await admin.call(
                Storebus_PaymentQueue_V1_Subscriptions.setRenewalRate,
                .with {
                    $0.appBundleID = field("app")
                    $0.rate = rate.rate
                })
            return "Store clock of \(field("app")): \(rate.label.lowercased())."
        case "billing":
            let answer = try await admin.call(
                Storebus_PaymentQueue_V1_Subscriptions.setBillingControls,
                .with {
                    $0.appBundleID = field("app")
                    $0.controls = .with {
                        $0.billingRetryOnRenewal = field("retry") == "on"
                        $0.gracePeriodEnabled = field("grace") == "on"
                    }
                })
            return "Billing of \(field("app")): renewals \(answer.controls.billingRetryOnRenewal ? "fail into billing retry" : "are charged")"
                + (answer.controls.gracePeriodEnabled ? ", with a grace period." : ".")
        case "renew-now":
            let answer = try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.renewNow, subscription())
            return "Renewed \(field("group")): now \(ConsoleNames.subscription(answer.subscription.status)), expires \(ConsoleNames.date(answer.subscription.expiresDate))."
        case "expire-now":
            try confirmed()
            let answer = try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.expireNow, subscription())
            return "Expired \(field("group")): now \(ConsoleNames.subscription(answer.subscription.status))."
        case "extend":
            guard let days = UInt32(field("days")), (1...90).contains(days) else {
                throw ConsoleProblem.refused("must be from 1 to 90")
            }
            let answer = try await admin.call(
                Storebus_PaymentQueue_V1_Subscriptions.extendRenewalDate,
                .with {
                    $0.subscription = subscription()
                    $0.extendByDays = days
                    $0.extendReasonCode = UInt32(field("reason")).map { min($0, 3) } ?? 0
                    $0.requestIdentifier = UUID().uuidString
                })
            return "Extended \(field("group")) by \(days) days: expires \(ConsoleNames.date(answer.subscription.expiresDate))."
        case "auto-renew":
            let on = field("on") == "on"
            let answer = try await link.connection(key, app: field("app"), account: field("account")).call(
                Storebus_PaymentQueue_V1_Subscriptions.setAutoRenew,
                .with {
                    $0.appBundleID = field("app")
                    $0.accountID = field("account")
                    $0.subscriptionGroupIdentifier = field("group")
                    $0.autoRenewStatus = on
                })
            return "Auto-renew of \(field("group")) is \(answer.subscription.autoRenewStatus ? "on" : "off")."
        case "clear-history":
            try confirmed()
            let answer = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.clearAccountTransactions,
                .with {
                    $0.appBundleID = field("app")
                    $0.accountID = field("account")
                })
            return "Cleared the purchase history of \(field("account")): \(answer.clearedCount) transaction\(answer.clearedCount == 1 ? "" : "s")."
        case "reset":
            try confirmed()
            _ = try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.reset, .init())
            return "The sandbox was reset: every transaction, policy and charge is gone."
        case "rotate-key":
            let answer = try await admin.call(Storebus_Receipt_V1_Receipt.rotateSigningKey, .init())
            return "A new signing key signs from now on: key id \(answer.keyID) (\(answer.leafCount) leaf certificates kept)."
        case "reload-catalog":
            let dryRun = field("dryRun") == "on"
            let answer = try await admin.call(Storebus_Catalog_V1_Catalog.reloadCatalog, .with { $0.dryRun = dryRun })
            let problems = answer.problems.map { "\($0.location): \($0.message)\($0.fatal ? " (fatal)" : "")" }
            guard !answer.problems.contains(where: \.fatal) else {
                throw ConsoleProblem.refused("the catalog files have problems, and the catalog in use stays: \(problems.joined(separator: "; "))")
            }
            let outcome = dryRun ? "checked and can be loaded" : (answer.changed ? "reloaded, now version \(answer.catalogVersion)" : "unchanged (version \(answer.catalogVersion))")
            return "The catalog was \(outcome)." + (problems.isEmpty ? "" : " Warnings: \(problems.joined(separator: "; ")).")
        default:
            throw ConsoleProblem.notFound("there is no action \(action)")
        }
    }
}
