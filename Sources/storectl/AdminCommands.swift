import ArgumentParser
import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

/// `storectl admin`: the sandbox payment authority and account tools, through the gateway with an
/// admin key.
struct AdminCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Drive the sandbox: payment policies, Ask to Buy, interrupted purchases, refunds, reset.",
        subcommands: [
            Policy.self, Approve.self, Decline.self, Resolve.self, Refund.self, History.self, Charges.self, Products.self, Reset.self,
            RotateSigningKey.self, SubscriptionAdminCommands.self, Shards.self
        ]
    )

    struct Options: ParsableArguments {
        /// The local deployment's demo admin key (deploy/local/gateway.json); for local use only.
        static let localAdminKey = "storebus-local-demo-admin-key"

        @OptionGroup var gateway: GatewayOptions
        @Option(name: .customLong("admin-key"), help: "An admin API key. Default: STOREBUS_ADMIN_KEY or the local demo admin key.")
        var adminKey: String?
        @Option(help: "The app's bundle identifier.")
        var app: String = "com.storebus.demo.puzzle"

        /// The account an admin session names when the command acts on none (a transaction is
        /// found by its identifier, whichever account holds it).
        static let sessionAccount = "storectl-admin"

        /// An admin connection, its session opened (so a wrong key fails here, clearly).
        func connection(account: String = Options.sessionAccount) async throws -> StoreConnection {
            let connection = try StoreConnection(
                configuration: gateway.configuration(
                    key: adminKey ?? ProcessInfo.processInfo.environment["STOREBUS_ADMIN_KEY"] ?? Self.localAdminKey,
                    app: app, account: account, device: "storectl-admin"
                ))
            try await sentence { try await connection.authenticate() }
            return connection
        }
    }

    /// `--account`, for the commands that act on one account (the others find a transaction by its
    /// identifier alone).
    struct AccountOption: ParsableArguments {
        @Option(help: "The App Store account acted on.")
        var account: String = "demo"
    }

    enum Mode: String, ExpressibleByArgument, CaseIterable {
        case approve, fail, askToBuy = "ask-to-buy", interrupt
        var proto: Storebus_PaymentQueue_V1_PolicyMode {
            switch self {
            case .approve: .approve
            case .fail: .fail
            case .askToBuy: .askToBuy
            case .interrupt: .interrupt
            }
        }
    }

    enum FailError: String, ExpressibleByArgument, CaseIterable {
        case paymentCancelled = "payment-cancelled", paymentInvalid = "payment-invalid", paymentNotAllowed = "payment-not-allowed"
        case networkFailed = "network-failed", unknown
        var proto: Storebus_PaymentQueue_V1_SKError {
            switch self {
            case .paymentCancelled: .paymentCancelled
            case .paymentInvalid: .paymentInvalid
            case .paymentNotAllowed: .paymentNotAllowed
            case .networkFailed: .cloudServiceNetworkConnectionFailed
            case .unknown: .unknown
            }
        }
    }

    struct Policy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Set how the sandbox answers an account's payments (--account for one account, --all-accounts for the app's default).")
        @OptionGroup var options: Options
        @OptionGroup var target: AccountOption
        @Option(help: "approve, fail, ask-to-buy or interrupt.")
        var mode: Mode
        @Option(help: "With --mode fail: payment-cancelled, payment-invalid, payment-not-allowed, network-failed or unknown.")
        var failError: FailError?
        @Option(help: "Milliseconds before the sandbox answers.")
        var delayMs: UInt32 = 0
        @Flag(help: "Purchase restrictions on: canMakePayments is false and payments fail.")
        var restricted = false
        @Flag(help: "Set the app's default, for every account without its own policy.")
        var allAccounts = false

        func validate() throws {
            if mode == .fail && failError == nil { throw ValidationError("--mode fail needs --fail-error") }
        }

        func run() async throws {
            let admin = try await options.connection(account: target.account)
            try await sentence {
                _ = try await admin.call(
                    Storebus_PaymentQueue_V1_PaymentQueueAdmin.setPaymentPolicy,
                    .with {
                        $0.appBundleID = options.app
                        $0.accountID = allAccounts ? "" : target.account
                        $0.policy = .with {
                            $0.mode = mode.proto
                            if let failError { $0.failError = failError.proto }
                            $0.delayMs = delayMs
                            $0.purchasesRestricted = restricted
                        }
                    })
            }
            print(
                "policy of \(allAccounts ? "every account" : "account \(target.account)") in \(options.app): \(mode.rawValue)\(failError.map { " (\($0.rawValue))" } ?? "")\(restricted ? ", purchases restricted" : "")"
            )
            await admin.close()
        }
    }

    struct Approve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Approve a deferred (Ask to Buy) purchase.")
        @OptionGroup var options: Options
        @Argument var transaction: String
        func run() async throws {
            let admin = try await options.connection()
            let answer = try await sentence {
                try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.approveAskToBuy, .with { $0.transactionIdentifier = transaction })
            }
            print("\(transaction) is now \(PaymentTransaction(rawRecord: answer.transaction).transactionState)")
            await admin.close()
        }
    }

    struct Decline: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Decline a deferred (Ask to Buy) purchase.")
        @OptionGroup var options: Options
        @Argument var transaction: String
        func run() async throws {
            let admin = try await options.connection()
            let answer = try await sentence {
                try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.declineAskToBuy, .with { $0.transactionIdentifier = transaction })
            }
            print("\(transaction) is now \(PaymentTransaction(rawRecord: answer.transaction).transactionState)")
            await admin.close()
        }
    }

    struct Resolve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Resolve an interrupted purchase: a new purchased transaction appears in its queue.")
        @OptionGroup var options: Options
        @Argument var transaction: String
        func run() async throws {
            let admin = try await options.connection()
            let answer = try await sentence {
                try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.resolveInterruptedPurchase, .with { $0.transactionIdentifier = transaction })
            }
            print("resolved \(transaction): new transaction \(answer.transaction.transactionIdentifier) is \(PaymentTransaction(rawRecord: answer.transaction).transactionState)")
            await admin.close()
        }
    }

    struct Refund: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Refund a purchased transaction (revokes non-consumables and subscriptions).")
        @OptionGroup var options: Options
        @Argument var transaction: String
        @Option(help: "Why, for the ledger.")
        var reason: String = "refunded with storectl"
        @Flag(help: "Refunded for an issue in the app (the receipt's cancellation_reason 1; otherwise 0).")
        var appIssue = false
        func run() async throws {
            let admin = try await options.connection()
            let answer = try await sentence {
                try await admin.call(
                    Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction,
                    .with {
                        $0.transactionIdentifier = transaction
                        $0.reason = reason
                        $0.revocationReason = appIssue ? .appIssue : .other
                    })
            }
            let revoked = answer.revokedProductIdentifiers
            print("refunded \(transaction)\(revoked.isEmpty ? "" : "; revoked: \(revoked.joined(separator: ", "))")")
            await admin.close()
        }
    }

    struct History: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "transactions", abstract: "Every transaction of an account, across its devices.")
        @OptionGroup var options: Options
        @OptionGroup var target: AccountOption
        func run() async throws {
            let admin = try await options.connection(account: target.account)
            try await printEveryPage(orIfNone: "no transactions") { pageToken in
                let answer = try await admin.call(
                    Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
                    .with {
                        $0.appBundleID = options.app
                        $0.accountID = target.account
                        $0.includeFinished = true
                        $0.pageSize = 1000 // the most a page holds
                        $0.pageToken = pageToken
                    })
                return (
                    answer.transactions.map { transaction in
                        "\(transaction.transactionIdentifier)  \(transaction.queue.deviceID)  \(transaction.payment.productIdentifier)  \(PaymentTransaction(rawRecord: transaction).transactionState)\(transaction.finished ? "  finished" : "")"
                    }, answer.nextPageToken
                )
            }
            await admin.close()
        }
    }

    struct Charges: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The charge ledger of an account.")
        @OptionGroup var options: Options
        @OptionGroup var target: AccountOption
        func run() async throws {
            let admin = try await options.connection(account: target.account)
            try await printEveryPage(orIfNone: "no charges") { pageToken in
                let answer = try await admin.call(
                    Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                    .with {
                        $0.appBundleID = options.app
                        $0.accountID = target.account
                        $0.pageSize = 1000 // the most a page holds
                        $0.pageToken = pageToken
                    })
                return (
                    answer.charges.map { charge in
                        "\(charge.chargeID)  \(charge.transactionIdentifier)  \(charge.productIdentifier)  \(charge.amount) \(charge.currencyCode)\(charge.refunded ? "  refunded" : "")"
                    }, answer.nextPageToken
                )
            }
            await admin.close()
        }
    }

    struct Products: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every product identifier of the app in the loaded catalog, with its type.")
        @OptionGroup var options: Options
        func run() async throws {
            let admin = try await options.connection()
            try await printEveryPage(orIfNone: "no products") { pageToken in
                let answer = try await admin.call(
                    Storebus_Catalog_V1_Catalog.listProducts,
                    .with {
                        $0.appBundleID = options.app
                        $0.pageToken = pageToken
                    })
                return (
                    answer.products.map { product in
                        "\(product.productIdentifier)  \(product.productType)\(product.clearedForSale ? "" : "  not for sale")"
                    }, answer.nextPageToken
                )
            }
            await admin.close()
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete every transaction, policy and charge of the deployment.")
        @OptionGroup var options: Options
        @Flag(help: "Confirm.")
        var yes = false
        func run() async throws {
            guard yes else { throw Failure(description: "Reset deletes every transaction, policy and charge; run it again with --yes to confirm.") }
            let admin = try await options.connection()
            try await sentence { _ = try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.reset, .init()) }
            print("reset: every transaction, policy and charge deleted")
            await admin.close()
        }
    }

    struct Shards: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the payment queue's shards: each one's owner instance, epoch, lease, log head and endpoints.")
        @OptionGroup var options: Options
        func run() async throws {
            let admin = try await options.connection()
            let map = try await sentence { try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.getShardMap, .init()) }
            print(Self.table(map))
            await admin.close()
        }

        /// The map as lines: a heading, then a line a shard.
        static func table(_ map: Storebus_PaymentQueue_V1_GetShardMapResponse) -> String {
            var lines = ["\(map.shardCount) shard\(map.shardCount == 1 ? "" : "s"), answered by instance \(map.instance)"]
            lines.append("shard  owner                                 epoch  lease    head  endpoints")
            for shard in map.shards {
                let owner = shard.owner.isEmpty ? "-" : shard.owner
                let lease = shard.leased ? "running" : "lapsed"
                let endpoints = (shard.rpcEndpoints + shard.eventEndpoints.map { "events " + $0 }).joined(separator: " ")
                lines.append(
                    "\(String(shard.shard).padding(toLength: 5, withPad: " ", startingAt: 0))  \(owner.padding(toLength: 36, withPad: " ", startingAt: 0))  "
                        + "\(String(shard.epoch).padding(toLength: 5, withPad: " ", startingAt: 0))  \(lease.padding(toLength: 7, withPad: " ", startingAt: 0))  "
                        + "\(String(shard.headSeq).padding(toLength: 4, withPad: " ", startingAt: 0))  \(endpoints.isEmpty ? "-" : endpoints)")
            }
            return lines.joined(separator: "\n")
        }
    }

    struct RotateSigningKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-signing-key", abstract: "Make the receipt service sign with a new leaf; what the old ones signed still verifies."
        )
        @OptionGroup var options: Options
        func run() async throws {
            let admin = try await options.connection()
            let answer = try await sentence { try await admin.call(Storebus_Receipt_V1_Receipt.rotateSigningKey, .init()) }
            print("signing with key \(answer.keyID); \(answer.leafCount) signing keys kept")
            await admin.close()
        }
    }
}

/// Prints the lines of every page of a listing, asking for each with the token the last one gave
/// (empty for the first), until a page gives none; prints `none` when there were no lines at all.
func printEveryPage(orIfNone none: String, _ page: (_ pageToken: String) async throws -> (lines: [String], nextPageToken: String)) async throws {
    var pageToken = "", printed = 0
    repeat {
        let (lines, next) = try await sentence { try await page(pageToken) }
        lines.forEach { print($0) }
        printed += lines.count
        pageToken = next
    } while !pageToken.isEmpty
    if printed == 0 { print(none) }
}
