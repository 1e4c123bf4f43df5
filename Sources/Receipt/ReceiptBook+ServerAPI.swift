import Foundation
import ReceiptFormat
import StoreBus
import StoreSchema

// What an app's backend asks of the App Store Server API about its customers: one transaction, a
// customer's history and refunds, a customer's subscriptions. The customer is found from any of its
// transactions in the app; another app's transaction is not found.
extension ReceiptBook {
    /// Transactions a history page holds (Apple's page size).
    static let historyPageSize = 20

    /// The account holding the app's transaction `id`; NOT_FOUND when none does.
    func customer(app: String, transaction id: String) async throws -> String {
        guard let account = try await store.account(app: app, transaction: id) else {
            throw RPCError.resource(.notFound, type: "transaction", name: id, "\(RPCError.echo(app)) has no transaction \(RPCError.echo(id))")
        }
        return account
    }

    /// The app's transaction `id`, signed.
    func transactionInfo(app: String, id: String, now: Date = Date()) async throws -> String {
        guard let purchase = try await store.purchase(app: app, id: id) else {
            throw RPCError.resource(.notFound, type: "transaction", name: id, "\(RPCError.echo(app)) has no transaction \(RPCError.echo(id))")
        }
        return try SignedTransaction.sign(purchase, environment: configuration.environment, with: try authority.current(now: now), at: now)
    }

    /// A page of the history of the customer of `request.transactionID`.
    func history(_ request: Storebus_Receipt_V1_GetTransactionHistoryRequest, now: Date = Date()) async throws -> Storebus_Receipt_V1_GetTransactionHistoryResponse {
        if request.startDateMs > 0, request.endDateMs > 0, request.startDateMs > request.endDateMs {
            throw RPCError.invalidArgument(field: "startDateMs", "is after endDateMs")
        }
        let account = try await customer(app: request.appBundleID, transaction: request.transactionID)
        let purchases = try await store.purchases(app: request.appBundleID, account: account)
        let filter = HistoryFilter(request)
        let kept = purchases.filter(filter.keeps)
        let page = try HistoryPage(kept, key: { ($0.purchaseMS, $0.id) }, descending: request.descending, revision: request.revision)
        return try signed(page, app: request.appBundleID, now: now)
    }

    /// A page of the refunded and revoked transactions of the customer of `request.transactionID`,
    /// in the order they were refunded.
    func refundHistory(_ request: Storebus_Receipt_V1_GetRefundHistoryRequest, now: Date = Date()) async throws -> Storebus_Receipt_V1_GetTransactionHistoryResponse {
        let account = try await customer(app: request.appBundleID, transaction: request.transactionID)
        let refunded = try await store.purchases(app: request.appBundleID, account: account).filter { $0.state == .purchased && $0.cancellationMS != nil }
        let page = try HistoryPage(refunded, key: { ($0.cancellationMS ?? 0, $0.id) }, descending: false, revision: request.revision)
        return try signed(page, app: request.appBundleID, now: now)
    }

    /// The auto-renewable subscriptions of `account` (a customer found by ``customer(app:transaction:)``),
    /// by group, those of `statuses` only when any is given.
    func allSubscriptionStatuses(
        app: String, account: String, statuses: [Int32], now: Date = Date()
    ) async throws -> [Storebus_Receipt_V1_SubscriptionGroupStatus] {
        let groups = try await subscriptionStatuses(app: app, account: account, now: now)
        guard !statuses.isEmpty else { return groups }
        let wanted = Set(statuses)
        return groups.compactMap { group in
            var group = group
            group.lastTransactions = group.lastTransactions.filter { wanted.contains($0.status) }
            return group.lastTransactions.isEmpty ? nil : group
        }
    }

    private func signed(_ page: HistoryPage<StoredPurchase>, app: String, now: Date) throws -> Storebus_Receipt_V1_GetTransactionHistoryResponse {
        let key = try authority.current(now: now)
        let environment = configuration.environment
        return try .with {
            $0.signedTransactions = try page.items.map { try SignedTransaction.sign($0, environment: environment, with: key, at: now) }
            $0.revision = page.revision
            $0.hasMore_p = page.hasMore
            $0.bundleID = app
            $0.environment = environment.rawValue
        }
    }
}

/// Which of a customer's transactions a history request wants.
struct HistoryFilter {
    let request: Storebus_Receipt_V1_GetTransactionHistoryRequest

    init(_ request: Storebus_Receipt_V1_GetTransactionHistoryRequest) {
        self.request = request
    }

    func keeps(_ purchase: StoredPurchase) -> Bool {
        // Charged transactions only: a restored copy is a device's, not a purchase of its own.
        guard purchase.state == .purchased else { return false }
        if request.excludeFinishedConsumables, purchase.productType == .consumable, purchase.finished, purchase.cancellationMS == nil { return false }
        if request.startDateMs > 0, purchase.purchaseMS < request.startDateMs { return false }
        if request.endDateMs > 0, purchase.purchaseMS >= request.endDateMs { return false }
        if !request.productIds.isEmpty, !request.productIds.contains(purchase.productID) { return false }
        if !request.productTypes.isEmpty, !request.productTypes.contains(purchase.productType) { return false }
        if !request.subscriptionGroupIdentifiers.isEmpty, !request.subscriptionGroupIdentifiers.contains(purchase.group) { return false }
        if request.hasRevoked, request.revoked != (purchase.cancellationMS != nil) { return false }
        // Every StoreBus transaction is the customer's own purchase: none is family shared.
        if !request.inAppOwnershipType.isEmpty, request.inAppOwnershipType != "PURCHASED" { return false }
        return true
    }
}

/// One page of a customer's transactions in a stable order, and the revision that continues after
/// it: the sort key of its last transaction, so that a page asked for again later starts where the
/// last ended even when transactions came between.
struct HistoryPage<Item> {
    let items: [Item]
    let revision: String
    let hasMore: Bool

    /// The page of `all` after `revision` (empty: the first), ordered by `key`.
    init(_ all: [Item], key: (Item) -> (Int64, String), descending: Bool, revision: String) throws {
        let before: (Item, Item) -> Bool = { a, b in
            let (ka, kb) = (key(a), key(b))
            return descending ? ka > kb : ka < kb
        }
        var ordered = all.sorted(by: before)
        if !revision.isEmpty {
            guard let after = Self.decode(revision) else {
                throw RPCError.invalidArgument(field: "revision", "is not a revision this service gave")
            }
            ordered = ordered.filter { descending ? key($0) < after : key($0) > after }
        }
        let page = Array(ordered.prefix(ReceiptBook.historyPageSize))
        items = page
        hasMore = ordered.count > page.count
        // The last page's revision is its last key too: asked again, it gives what came since.
        if let last = page.last {
            self.revision = Self.encode(key(last))
        } else {
            self.revision = revision.isEmpty ? Self.encode(descending ? (.max, "") : (0, "")) : revision
        }
    }

    /// `<milliseconds>.<transaction id>`, base64url without padding: opaque to callers.
    static func encode(_ key: (Int64, String)) -> String {
        Base64URL.encode(Array("\(key.0).\(key.1)".utf8))
    }

    static func decode(_ revision: String) -> (Int64, String)? {
        guard let bytes = Base64URL.decode(revision), let text = String(bytes: bytes, encoding: .utf8), let dot = text.firstIndex(of: "."),
            let milliseconds = Int64(text[..<dot])
        else { return nil }
        return (milliseconds, String(text[text.index(after: dot)...]))
    }
}
