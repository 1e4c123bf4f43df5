import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

/// What the console itself finds wrong: a page of something that does not exist, a form it
/// cannot take. Errors of the store come as the SDK's `StoreError`.
enum ConsoleProblem: Error, CustomStringConvertible {
    case notFound(String)
    case refused(String)

    var description: String {
        switch self {
        case .notFound(let text), .refused(let text): text
        }
    }
}

/// Builds each page's view from calls through the gateway, made with the login's admin key.
struct ConsolePages: Sendable {
    let link: GatewayLink

    /// Recent transactions a store or app page shows, at most.
    static let recentRows = 100
    /// Positions of each shard's log read back for the recent transactions.
    static let recentDepth: UInt64 = 500

    /// The items of a paged listing, page after page from the first (`page` asked with each page's
    /// token, "" for the first), until the last page or once `limit` items are in.
    static func pages<Item>(upTo limit: Int, _ page: (String) async throws -> (items: [Item], next: String)) async throws -> [Item] {
        var items: [Item] = []
        var token = ""
        repeat {
            let answer = try await page(token)
            items += answer.items
            token = answer.next
        } while !token.isEmpty && items.count < limit
        return items
    }

    // MARK: Store

    func store(_ key: String, chrome: Chrome) async throws -> StorePage {
        let admin = link.connection(key)
        let info = try await admin.call(Storebus_Catalog_V1_Catalog.getCatalogInfo, .init())
        let heads = try await Activity.heads(admin)
        let recent = try await Activity.recent(admin, heads: heads, depth: Self.recentDepth, scope: .init())
        return StorePage(
            chrome: chrome, catalogVersion: String(info.catalogVersion), loadedAt: ConsoleNames.date(info.loadedAt),
            apps: info.apps.map { AppRow(bundleId: $0.bundleID, defaultStorefront: $0.defaultStorefront, defaultLocale: $0.defaultLocale, url: ConsoleNames.appURL($0.bundleID)) },
            storefronts: info.storefronts.map { StorefrontView(countryCode: $0.countryCode, currencyCode: $0.currencyCode, locale: $0.locale) },
            liveURL: Activity.streamURL(cursor: heads, scope: .init()),
            transactionsCaption: "The newest transactions of every app, newest first",
            transactions: Array(recent.transactions.prefix(Self.recentRows)), activity: Array(recent.activity.prefix(50)))
    }

    // MARK: App

    func app(_ key: String, app: String, accountsToken: String, chrome: Chrome) async throws -> AppPage {
        let admin = link.connection(key)
        let info = try await admin.call(Storebus_Catalog_V1_Catalog.getCatalogInfo, .init())
        guard let appInfo = info.apps.first(where: { $0.bundleID == app }) else {
            throw ConsoleProblem.notFound("the catalog has no app \(app)")
        }
        let identifiers = try await Self.pages(upTo: 5_000) { token in
            let page = try await admin.call(
                Storebus_Catalog_V1_Catalog.listProducts,
                .with {
                    $0.appBundleID = app
                    $0.pageToken = token
                })
            return (page.products.map(\.productIdentifier), page.nextPageToken)
        }
        // The default storefront first, then the others in the catalog's order.
        let storefronts = [appInfo.defaultStorefront] + info.storefronts.map(\.countryCode).filter { $0 != appInfo.defaultStorefront }
        var records: [String: [String: Storebus_Catalog_V1_ProductRecord]] = [:]
        for storefront in storefronts where !identifiers.isEmpty {
            let answer = try await admin.call(
                Storebus_Catalog_V1_Catalog.lookupProducts,
                .with {
                    $0.appBundleID = app
                    $0.productIdentifiers = identifiers
                    $0.storefront = storefront
                    $0.includeFiles = storefront == appInfo.defaultStorefront
                })
            records[storefront] = Dictionary(answer.products.map { ($0.productIdentifier, $0) }, uniquingKeysWith: { first, _ in first })
        }
        let base = records[appInfo.defaultStorefront] ?? [:]
        let products = identifiers.compactMap { id -> ProductRow? in
            guard let record = base[id] else { return nil }
            return ProductRow(
                id: id, type: ConsoleNames.productType(record.productType), forSale: record.clearedForSale ? "yes" : "no",
                prices: storefronts.map { storefront in
                    guard let record = records[storefront]?[id], !record.price.isEmpty else { return "not sold" }
                    return "\(record.price) \(record.currencyCode)"
                },
                group: record.subscriptionGroupIdentifier.isEmpty
                    ? "" : record.subscriptionGroupIdentifier + (record.subscriptionGroupLevel > 0 ? " (level \(record.subscriptionGroupLevel))" : ""),
                content: record.hostedContent.map {
                    ContentView(id: $0.contentIdentifier, version: $0.version, size: ConsoleNames.bytes($0.contentLength), files: $0.files.count)
                })
        }
        var groups: [String: [GroupView.Level]] = [:]
        for id in identifiers {
            guard let record = base[id], !record.subscriptionGroupIdentifier.isEmpty else { continue }
            groups[record.subscriptionGroupIdentifier, default: []].append(
                .init(
                    product: id, level: record.subscriptionGroupLevel > 0 ? "level \(record.subscriptionGroupLevel), " : nil,
                    period: ConsoleNames.period(record.subscriptionPeriod), rank: record.subscriptionGroupLevel))
        }
        let accounts = try await admin.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccounts,
            .with {
                $0.appBundleID = app
                $0.pageToken = accountsToken
            })
        let policy = try await admin.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.getPaymentPolicy,
            .with {
                $0.appBundleID = app
            })
        let rate = try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.getRenewalRate, .with { $0.appBundleID = app })
        let heads = try await Activity.heads(admin)
        let scope = Activity.Scope(app: app)
        let recent = try await Activity.recent(admin, heads: heads, depth: Self.recentDepth, scope: scope)
        return AppPage(
            chrome: chrome, app: app, appURL: ConsoleNames.appURL(app), storefronts: storefronts, products: products,
            groups: groups.sorted { $0.key < $1.key }.map { GroupView(id: $0.key, levels: $0.value.sorted { $0.rank < $1.rank }) },
            accounts: accounts.accounts.map { account in
                AccountRow(
                    account: account.accountID, url: ConsoleNames.accountURL(app, account.accountID),
                    devices: account.devices.map { "\($0.deviceID) (\($0.transactionCount))" }.joined(separator: ", "),
                    count: account.transactionCount, unfinished: account.unfinishedCount, last: ConsoleNames.date(account.lastTransactionDate))
            },
            nextAccounts: accounts.nextPageToken.isEmpty ? nil : "\(ConsoleNames.appURL(app))?accounts=\(ConsoleNames.segment(accounts.nextPageToken))",
            policy: PolicyForm(app: app, account: "", policy: policy.policy),
            rates: ConsoleNames.renewalRates.map { .init(value: $0.value, label: $0.label, selected: $0.rate == rate.rate) },
            rateNote: rate.setForApp ? "set for this app" : "the store's default",
            liveURL: Activity.streamURL(cursor: heads, scope: scope), transactionsCaption: "The newest transactions of \(app), newest first",
            transactions: Array(recent.transactions.prefix(Self.recentRows)))
    }

    // MARK: Account

    /// An account's transactions, newest first (at most `limit`), and whether there are more.
    func transactions(
        _ key: String, app: String, account: String, limit: UInt32 = 1000
    ) async throws -> (
        [Storebus_PaymentQueue_V1_PaymentTransaction], more: Bool
    ) {
        let page = try await link.connection(key).call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
            .with {
                $0.appBundleID = app
                $0.accountID = account
                $0.includeFinished = true
                $0.pageSize = limit
            })
        return (page.transactions.reversed(), !page.nextPageToken.isEmpty)
    }

    func account(_ key: String, app: String, account: String, chrome: Chrome) async throws -> AccountPage {
        let admin = link.connection(key)
        // The positions first: whatever commits after them reaches the page by its stream.
        let heads = try await Activity.heads(admin)
        let (transactions, more) = try await transactions(key, app: app, account: account)
        let own = link.connection(key, app: app, account: account)
        let subscriptions = try await own.call(
            Storebus_PaymentQueue_V1_Subscriptions.listSubscriptions,
            .with {
                $0.appBundleID = app
                $0.accountID = account
            }
        ).subscriptions
        var devices: [String] = []
        for transaction in transactions where !devices.contains(transaction.queue.deviceID) { devices.append(transaction.queue.deviceID) }
        var downloads: [DownloadRow] = []
        for device in devices.sorted() {
            let statuses = try await link.connection(key, app: app, account: account, device: device).call(
                Storebus_Download_V1_Download.getDownloads,
                .with {
                    $0.queue = .with {
                        $0.appBundleID = app
                        $0.accountID = account
                        $0.deviceID = device
                    }
                }
            ).downloads
            for status in statuses {
                downloads.append(
                    DownloadRow(
                        index: downloads.count, device: device, transaction: status.download.transactionIdentifier,
                        transactionURL: ConsoleNames.transactionURL(app, account, status.download.transactionIdentifier),
                        content: status.download.contentIdentifier, state: ConsoleNames.download(status.download.state),
                        percent: ConsoleNames.percent(status.download.progress), size: ConsoleNames.bytes(status.download.contentLength)))
            }
        }
        let charges = try await Self.pages(upTo: 5_000) { token in
            let page = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                .with {
                    $0.appBundleID = app
                    $0.accountID = account
                    $0.pageSize = 1000
                    $0.pageToken = token
                })
            return (page.charges, page.nextPageToken)
        }
        let policy = try await admin.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.getPaymentPolicy,
            .with {
                $0.appBundleID = app
                $0.accountID = account
            })
        let policyNow: String
        switch policy.policy.mode {
        case .fail: policyNow = "fail with \(ConsoleNames.failError(policy.policy.failError))"
        default: policyNow = ConsoleNames.policy(policy.policy.mode)
        }
        let scope = Activity.Scope(app: app, account: account)
        return AccountPage(
            chrome: chrome, app: app, account: account, liveURL: Activity.streamURL(cursor: heads, scope: scope),
            transactionsCaption: "Every transaction of \(account) in \(app), across its devices, newest first",
            transactions: transactions.map { TransactionRow($0) }, moreTransactions: more, shownTransactions: transactions.count,
            subscriptions: subscriptions.enumerated().map { index, subscription in
                SubscriptionView(
                    index: index, app: app, account: account, group: subscription.subscriptionGroupIdentifier, product: subscription.productIdentifier,
                    status: ConsoleNames.subscription(subscription.status),
                    statusClass: ConsoleNames.subscription(subscription.status).replacingOccurrences(of: " ", with: "-"),
                    expires: ConsoleNames.date(subscription.expiresDate), autoRenew: subscription.autoRenewStatus ? "on" : "off",
                    autoRenewToggle: subscription.autoRenewStatus ? "off" : "on",
                    renewsTo: subscription.autoRenewProductIdentifier == subscription.productIdentifier || subscription.autoRenewProductIdentifier.isEmpty
                        ? nil : subscription.autoRenewProductIdentifier,
                    renewals: subscription.renewalCount, original: subscription.originalTransactionIdentifier,
                    originalURL: ConsoleNames.transactionURL(app, account, subscription.originalTransactionIdentifier),
                    latest: subscription.latestTransactionIdentifier, latestURL: ConsoleNames.transactionURL(app, account, subscription.latestTransactionIdentifier),
                    billingRetryEnds: subscription.hasBillingRetryEndsDate ? ConsoleNames.date(subscription.billingRetryEndsDate) : nil,
                    graceEnds: subscription.hasGracePeriodExpiresDate ? ConsoleNames.date(subscription.gracePeriodExpiresDate) : nil)
            },
            downloads: downloads, anyActive: downloads.contains { $0.state == "active" },
            charges: charges.reversed().map { charge in
                ChargeRow(
                    id: charge.chargeID, date: ConsoleNames.date(charge.chargedAt), transaction: charge.transactionIdentifier,
                    transactionURL: ConsoleNames.transactionURL(app, account, charge.transactionIdentifier), product: charge.productIdentifier,
                    amount: charge.amount, currency: charge.currencyCode, storefront: charge.storefront,
                    refunded: charge.refunded ? (charge.refundedAmount.isEmpty ? "yes" : "\(charge.refundedAmount) \(charge.currencyCode)") : "no")
            },
            policyNow: policyNow, policyIsDefault: policy.isDefault, policy: PolicyForm(app: app, account: account, policy: policy.policy),
            receiptURL: "\(ConsoleNames.accountURL(app, account))/receipt")
    }

    // MARK: Transaction

    /// The transaction `id` of the account, looked for through its pages.
    func findTransaction(_ key: String, app: String, account: String, id: String) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        var token = ""
        var pages = 0
        repeat {
            let page = try await link.connection(key).call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
                .with {
                    $0.appBundleID = app
                    $0.accountID = account
                    $0.includeFinished = true
                    $0.pageSize = 1000
                    $0.pageToken = token
                })
            if let found = page.transactions.first(where: { $0.transactionIdentifier == id }) { return found }
            token = page.nextPageToken
            pages += 1
        } while !token.isEmpty && pages < 50
        throw ConsoleProblem.notFound("account \(account) of \(app) has no transaction \(id)")
    }

    func transaction(_ key: String, app: String, account: String, id: String, chrome: Chrome) async throws -> TransactionPage {
        let transaction = try await findTransaction(key, app: app, account: account, id: id)
        let state = transaction.transactionState
        let original =
            transaction.hasOriginalTransaction
            ? transaction.originalTransaction.transactionIdentifier : (transaction.originalTransactionID.isEmpty || transaction.originalTransactionID == id ? nil : transaction.originalTransactionID)
        let deferred = state == .deferred
        let failed = state == .failed
        let refundable = state == .purchased && !transaction.hasCancellationDate
        let subscription = transaction.productType == .autoRenewableSubscription
        return TransactionPage(
            chrome: chrome, id: id, state: ConsoleNames.state(state), finished: transaction.finished, product: transaction.payment.productIdentifier,
            productType: ConsoleNames.productType(transaction.productType), quantity: transaction.payment.quantity,
            date: ConsoleNames.date(transaction.transactionDate), app: app, account: account, accountURL: ConsoleNames.accountURL(app, account),
            device: transaction.queue.deviceID, price: transaction.price, currency: transaction.currencyCode, storefront: transaction.storefront,
            original: original, originalURL: original.map { ConsoleNames.transactionURL(app, account, $0) },
            reason: transaction.transactionReason == .renewal ? "renewal" : (transaction.transactionReason == .purchase ? "purchase" : nil),
            expires: transaction.hasExpiresDate ? ConsoleNames.date(transaction.expiresDate) : nil,
            group: transaction.subscriptionGroupIdentifier.isEmpty ? nil : transaction.subscriptionGroupIdentifier,
            cancelled: transaction.hasCancellationDate ? ConsoleNames.date(transaction.cancellationDate) : nil,
            cancellationReason: transaction.cancellationReason == .appIssue ? "an issue with the app" : "other",
            error: transaction.hasError ? "\(ConsoleNames.failError(transaction.error.code)): \(transaction.error.localizedDescription)" : nil,
            downloads: transaction.downloads.map {
                .init(
                    content: $0.contentIdentifier, state: ConsoleNames.download($0.state), percent: ConsoleNames.percent($0.progress),
                    size: ConsoleNames.bytes($0.contentLength))
            },
            deferred: deferred, failed: failed, refundable: refundable, subscription: subscription,
            hasActions: deferred || failed || refundable || subscription)
    }

    // MARK: Receipts

    /// The account's receipt, refreshed now, and what verifying it says.
    func receipt(_ key: String, app: String, account: String, chrome: Chrome) async throws -> ReceiptPage {
        let own = link.connection(key, app: app, account: account)
        let refreshed = try await own.call(
            Storebus_Receipt_V1_Receipt.refreshReceipt,
            .with {
                $0.appBundleID = app
                $0.accountID = account
                $0.deviceID = GatewayLink.consoleQueue
            })
        var page = try await verify(key, app: app, receipt: refreshed.receiptData, password: nil, chrome: chrome)
        page.asOf = String(refreshed.asOfSeq)
        return page
    }

    /// What the receipt service says of `receipt` (base64), decoded for people.
    func verify(_ key: String, app: String, receipt: String, password: String?, chrome: Chrome) async throws -> ReceiptPage {
        let answer = try await link.connection(key, app: app).call(
            Storebus_Receipt_V1_Receipt.verifyReceipt,
            .with {
                $0.receiptData = receipt
                if let password, !password.isEmpty { $0.password = password }
            })
        let verdict: (String, String) =
            switch answer.status {
            case 0: ("valid: the signature verifies against StoreBus's root", "valid")
            case 21002: ("not a receipt (malformed)", "invalid")
            case 21003: ("the signature is not authentic", "invalid")
            case 21004: ("the shared secret does not match", "invalid")
            case 21010: ("revoked, or the account is unknown", "invalid")
            default: ("not verified", "invalid")
            }
        let decoded = answer.receipt
        return ReceiptPage(
            chrome: chrome, status: answer.status, verdict: verdict.0, verdictClass: verdict.1, environment: answer.environment,
            bundleId: decoded.bundleID, version: decoded.applicationVersion, originalVersion: decoded.originalApplicationVersion,
            created: ConsoleNames.date(decoded.receiptCreationDate), receiptType: decoded.receiptType, asOf: nil,
            inApp: decoded.inApp.map { purchase in
                ReceiptPage.Purchase(
                    id: purchase.transactionID, original: purchase.originalTransactionID, product: purchase.productID, quantity: purchase.quantity,
                    purchased: ConsoleNames.date(purchase.purchaseDate), expires: ConsoleNames.date(purchase.expiresDate),
                    cancelled: ConsoleNames.date(purchase.cancellationDate))
            },
            pending: answer.pendingRenewalInfo.map { info in
                "\(info.productID) (original \(info.originalTransactionID)): auto-renew \(info.autoRenewStatus ? "on" : "off") to \(info.autoRenewProductID)"
                    + (info.isInBillingRetryPeriod ? ", in billing retry" : "") + (info.expirationIntent != 0 ? ", expiration intent \(info.expirationIntent)" : "")
            },
            hasPending: !answer.pendingRenewalInfo.isEmpty, receiptData: receipt)
    }

    func receipts(_ key: String, chrome: Chrome) async throws -> ReceiptsPage {
        let info = try await link.connection(key).call(Storebus_Catalog_V1_Catalog.getCatalogInfo, .init())
        return ReceiptsPage(chrome: chrome, apps: info.apps.map(\.bundleID))
    }

    // MARK: Sandbox

    func sandbox(_ key: String, chrome: Chrome) async throws -> SandboxPage {
        let map = try await link.connection(key).call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.getShardMap, .init())
        return SandboxPage(
            chrome: chrome,
            shards: map.shards.map { ShardRow(shard: $0.shard, owner: $0.owner, epoch: $0.epoch, leased: $0.leased ? "yes" : "no", head: $0.headSeq) })
    }
}
