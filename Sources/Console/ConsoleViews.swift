import Foundation
import StoreSchema

// What the templates render: one struct per page, with the `chrome` every page shares. Mustache
// reads their properties by name (Mirror); every value is escaped as it is written.

/// What every page has: its title, whether someone is logged in, the form token, where its forms
/// come back to, the message of the last action, the way back up.
struct Chrome {
    var title: String
    var loggedIn: Bool
    var formToken: String
    var path: String
    var flash: FlashView?
    var trail: [Crumb]
    /// Stored, not computed: Mustache reads stored properties only.
    var hasTrail: Bool

    init(title: String, loggedIn: Bool, formToken: String, path: String, flash: FlashView?, trail: [Crumb] = []) {
        self.title = title
        self.loggedIn = loggedIn
        self.formToken = formToken
        self.path = path
        self.flash = flash
        self.trail = trail
        hasTrail = !trail.isEmpty
    }
}

struct FlashView {
    var text: String
    var kind: String
    var role: String

    init(_ flash: ConsoleSessions.Flash) {
        text = flash.text
        kind = flash.isError ? "error" : "ok"
        role = flash.isError ? "alert" : "status"
    }
}

struct Crumb {
    var name: String
    var url: String
}

/// One transaction as a row of the transactions tables (and of the live stream).
struct TransactionRow: Sendable {
    var id: String
    var url: String
    var app: String
    var account: String
    var accountURL: String
    var device: String
    var product: String
    var state: String
    var date: String
    var notes: String
    /// For ordering: the transaction date in milliseconds.
    var sortKey: Int64

    init(_ transaction: Storebus_PaymentQueue_V1_PaymentTransaction, finished: Bool? = nil) {
        let queue = transaction.queue
        id = transaction.transactionIdentifier
        app = queue.appBundleID
        account = queue.accountID
        device = queue.deviceID
        url = ConsoleNames.transactionURL(app, account, id)
        accountURL = ConsoleNames.accountURL(app, account)
        product = transaction.payment.productIdentifier
        state = ConsoleNames.state(transaction.transactionState)
        date = ConsoleNames.date(transaction.transactionDate)
        sortKey = transaction.transactionDate.seconds * 1000 + Int64(transaction.transactionDate.nanos / 1_000_000)
        var notes: [String] = []
        if finished ?? transaction.finished { notes.append("finished") }
        if transaction.hasOriginalTransaction, transaction.transactionState == .restored {
            notes.append("restores \(transaction.originalTransaction.transactionIdentifier)")
        }
        if transaction.transactionReason == .renewal { notes.append("renewal") }
        if transaction.hasExpiresDate { notes.append("expires \(ConsoleNames.date(transaction.expiresDate))") }
        if transaction.hasCancellationDate { notes.append("refunded \(ConsoleNames.date(transaction.cancellationDate))") }
        if transaction.isUpgraded { notes.append("upgraded") }
        if transaction.transactionState == .failed, transaction.hasError {
            notes.append("error: \(ConsoleNames.failError(transaction.error.code))")
        }
        self.notes = notes.joined(separator: "; ")
    }
}

/// Something that happened in a queue other than a transaction's state: downloads, subscriptions,
/// refunds, restores, cleared histories.
struct ActivityView: Sendable {
    var date: String
    var app: String
    var account: String
    var url: String
    var text: String
}

struct AppRow {
    var bundleId: String
    var defaultStorefront: String
    var defaultLocale: String
    var url: String
}

struct StorefrontView {
    var countryCode: String
    var currencyCode: String
    var locale: String
}

struct StorePage {
    var chrome: Chrome
    var catalogVersion: String
    var loadedAt: String
    var apps: [AppRow]
    var storefronts: [StorefrontView]
    var liveURL: String
    var transactionsCaption: String
    var transactions: [TransactionRow]
    var activity: [ActivityView]
}

struct ContentView {
    var id: String
    var version: String
    var size: String
    var files: Int
}

struct ProductRow {
    var id: String
    var type: String
    var forSale: String
    var prices: [String]
    var group: String
    var content: [ContentView]
}

struct GroupView {
    struct Level {
        var product: String
        /// "level 2, " when the group ranks its products; nil when it does not.
        var level: String?
        var period: String
        var rank: Int32
    }
    var id: String
    var levels: [Level]
}

struct AccountRow {
    var account: String
    var url: String
    var devices: String
    var count: UInt32
    var unfinished: UInt32
    var last: String
}

/// The payment policy form: of an account, or the app's default (`account` empty).
struct PolicyForm {
    var app: String
    var account: String
    var legend: String
    var modes: [ConsoleNames.Option]
    var errors: [ConsoleNames.Option]
    var delayMs: UInt32
    var restricted: Bool

    init(app: String, account: String, policy: Storebus_PaymentQueue_V1_PaymentPolicy) {
        self.app = app
        self.account = account
        legend = account.isEmpty ? "Default payment policy of \(app) (accounts without their own)" : "Payment policy of \(account)"
        let mode = policy.mode == .unspecified ? .approve : policy.mode
        modes = ConsoleNames.policyModes.map { .init(value: $0.value, label: $0.label, selected: $0.mode == mode) }
        errors = ConsoleNames.failErrors.map { .init(value: $0.value, label: $0.label, selected: $0.error == policy.failError) }
        delayMs = policy.delayMs
        restricted = policy.purchasesRestricted
    }
}

struct AppPage {
    var chrome: Chrome
    var app: String
    var appURL: String
    var storefronts: [String]
    var products: [ProductRow]
    var groups: [GroupView]
    var accounts: [AccountRow]
    var nextAccounts: String?
    var policy: PolicyForm
    var rates: [ConsoleNames.Option]
    var rateNote: String
    var liveURL: String
    var transactionsCaption: String
    var transactions: [TransactionRow]
}

struct SubscriptionView {
    var index: Int
    var app: String
    var account: String
    var group: String
    var product: String
    var status: String
    var statusClass: String
    var expires: String
    var autoRenew: String
    var autoRenewToggle: String
    var renewsTo: String?
    var renewals: UInt32
    var original: String
    var originalURL: String
    var latest: String
    var latestURL: String
    var billingRetryEnds: String?
    var graceEnds: String?
}

struct DownloadRow {
    var index: Int
    var device: String
    var transaction: String
    var transactionURL: String
    var content: String
    var state: String
    var percent: Int
    var size: String
}

struct ChargeRow {
    var id: String
    var date: String
    var transaction: String
    var transactionURL: String
    var product: String
    var amount: String
    var currency: String
    var storefront: String
    var refunded: String
}

struct AccountPage {
    var chrome: Chrome
    var app: String
    var account: String
    var liveURL: String
    var transactionsCaption: String
    var transactions: [TransactionRow]
    var moreTransactions: Bool
    var shownTransactions: Int
    var subscriptions: [SubscriptionView]
    var downloads: [DownloadRow]
    var anyActive: Bool
    var charges: [ChargeRow]
    var policyNow: String
    var policyIsDefault: Bool
    var policy: PolicyForm
    var receiptURL: String
}

struct TransactionPage {
    struct DownloadFact {
        var content: String
        var state: String
        var percent: Int
        var size: String
    }
    var chrome: Chrome
    var id: String
    var state: String
    var finished: Bool
    var product: String
    var productType: String
    var quantity: Int32
    var date: String
    var app: String
    var account: String
    var accountURL: String
    var device: String
    var price: String
    var currency: String
    var storefront: String
    var original: String?
    var originalURL: String?
    var reason: String?
    var expires: String?
    var group: String?
    var cancelled: String?
    var cancellationReason: String
    var error: String?
    var downloads: [DownloadFact]
    var deferred: Bool
    var failed: Bool
    var refundable: Bool
    var subscription: Bool
    var hasActions: Bool
}

struct ReceiptPage {
    struct Purchase {
        var id: String
        var original: String
        var product: String
        var quantity: Int32
        var purchased: String
        var expires: String
        var cancelled: String
    }
    var chrome: Chrome
    var status: Int32
    var verdict: String
    var verdictClass: String
    var environment: String
    var bundleId: String
    var version: String
    var originalVersion: String
    var created: String
    var receiptType: String
    var asOf: String?
    var inApp: [Purchase]
    var pending: [String]
    var hasPending: Bool
    var receiptData: String
}

struct ReceiptsPage {
    var chrome: Chrome
    var apps: [String]
}

struct ShardRow {
    var shard: UInt32
    var owner: String
    var epoch: UInt64
    var leased: String
    var head: UInt64
}

struct SandboxPage {
    var chrome: Chrome
    var shards: [ShardRow]
}

struct LoginPage {
    var chrome: Chrome
}

struct ProblemPage {
    var chrome: Chrome
    var message: String
}
