import Foundation
import Hummingbird
import Logging
import NIOCore
import ReceiptFormat
import ServiceLifecycle
import StoreBus
import StoreBusHost
import StoreSchema

/// The App Store Server API over HTTP, in Apple's paths, query parameters, JSON bodies and error
/// bodies, so that a backend written against Apple's app-store-server-library works with its base
/// URL changed: each request is authenticated by its bearer token (``ServerAPIKeys``), acts for
/// the token's app, and is answered from the receipt service (transactions, histories, statuses,
/// signed there) and this service's log (test notifications, notification history).
struct AppStoreServerAPI: Sendable {
    let keys: ServerAPIKeys
    let handlers: NotificationsHandlers
    /// The payment queue, which extends subscriptions.
    let queue: RPCClient
    /// How long a call to the receipt service may take.
    static let callTimeout = Duration.seconds(10)
    /// Largest request body read.
    static let maxBody = 64 << 10

    var receipt: RPCClient { handlers.receipt }
    var store: NotificationStore { handlers.store }

    /// The HTTP server on `address`, as a service of the process; `bound` is called once it listens
    /// (``Listeners/expect()``: the process's ready line waits for it).
    func application(address: HTTPAddress, logger: Logger, bound: @escaping @Sendable () -> Void) -> some Service {
        let router = Router()
        let api = self
        router.get("/inApps/v1/transactions/:transactionId") { request, context in
            await api.answer(request) { app in try await api.transactionInfo(app: app, id: context.parameters.get("transactionId") ?? "") }
        }
        for version in ["v1", "v2"] {
            router.get("/inApps/\(version)/history/:transactionId") { request, context in
                await api.answer(request) { app in
                    try await api.history(app: app, id: context.parameters.get("transactionId") ?? "", query: request.uri.queryParameters, version: version)
                }
            }
        }
        router.get("/inApps/v2/refund/lookup/:transactionId") { request, context in
            await api.answer(request) { app in
                try await api.refunds(app: app, id: context.parameters.get("transactionId") ?? "", revision: request.uri.queryParameters.get("revision") ?? "")
            }
        }
        router.get("/inApps/v1/subscriptions/:transactionId") { request, context in
            await api.answer(request) { app in
                try await api.statuses(app: app, id: context.parameters.get("transactionId") ?? "", query: request.uri.queryParameters)
            }
        }
        router.put("/inApps/v1/subscriptions/extend/:originalTransactionId") { request, context in
            let body = try? await request.body.collect(upTo: Self.maxBody)
            return await api.answer(request) { app in try await api.extend(app: app, original: context.parameters.get("originalTransactionId") ?? "", body: body) }
        }
        router.post("/inApps/v1/notifications/test") { request, _ in
            await api.answer(request) { app in try await api.requestTest(app: app) }
        }
        router.get("/inApps/v1/notifications/test/:token") { request, context in
            await api.answer(request) { app in try await api.testStatus(app: app, token: context.parameters.get("token") ?? "") }
        }
        router.post("/inApps/v1/notifications/history") { request, _ in
            let body = try? await request.body.collect(upTo: Self.maxBody)
            return await api.answer(request) { app in
                try await api.notificationHistory(app: app, token: request.uri.queryParameters.get("paginationToken"), body: body)
            }
        }
        logger.info("Serving the App Store Server API over HTTP", metadata: ["http.address": "\(address.host):\(address.port)"])
        return Application(
            router: router,
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "storebus-notifications"),
            onServerRunning: { _ in bound() },
            logger: logger
        )
    }

    // MARK: - Answers

    /// `body`'s JSON for the request's app, or Apple's error: 401 without a body for a token that
    /// does not verify, `{"errorCode", "errorMessage"}` with its HTTP status for the rest.
    func answer(_ request: Request, _ body: (String) async throws -> any Encodable) async -> Response {
        let app: String
        do {
            app = try await keys.app(authorization: request.headers[.authorization])
        } catch {
            return Response(status: .unauthorized)
        }
        do {
            return Self.json(.ok, try await body(app))
        } catch let error as APIError {
            return error.response
        } catch let error as RPCError {
            return APIError(error).response
        } catch {
            return APIError(500, 5_000_000, "An unknown error occurred.").response
        }
    }

    static func json(_ status: HTTPResponse.Status, _ value: any Encodable) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        let data = (try? encoder.encode(value)) ?? Data(#"{"errorCode":5000000,"errorMessage":"An unknown error occurred."}"#.utf8)
        // Exactly application/json: Apple's libraries read an error's body only then.
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    func options() -> CallOptions { CallOptions(timeout: Self.callTimeout) }

    // MARK: - Transactions

    func transactionInfo(app: String, id: String) async throws -> [String: String] {
        try APIError.checkTransactionID(id)
        let answer = try await receipt.call(
            Storebus_Receipt_V1_Receipt.getTransactionInfo,
            .with {
                $0.appBundleID = app; $0.transactionID = id
            }, options: options())
        return ["signedTransactionInfo": answer.signedTransactionInfo]
    }

    struct HistoryResponse: Encodable {
        var revision: String
        var hasMore: Bool
        var bundleId: String
        var environment: String
        var signedTransactions: [String]
    }

    func history(app: String, id: String, query: Parameters, version: String) async throws -> HistoryResponse {
        try APIError.checkTransactionID(id)
        var request = Storebus_Receipt_V1_GetTransactionHistoryRequest()
        request.appBundleID = app
        request.transactionID = id
        request.excludeFinishedConsumables = version == "v1"
        request.revision = query.get("revision") ?? ""
        if let text = query.get("startDate") {
            guard let value = Int64(text), value >= 0 else { throw APIError(400, 4_000_015, "Invalid start date.") }
            request.startDateMs = value
        }
        if let text = query.get("endDate") {
            guard let value = Int64(text), value >= 0 else { throw APIError(400, 4_000_016, "Invalid end date.") }
            request.endDateMs = value
        }
        if request.startDateMs > 0, request.endDateMs > 0, request.startDateMs > request.endDateMs {
            throw APIError(400, 4_000_013, "Invalid request. The start date is later than the end date.")
        }
        request.productIds = query.getAll("productId")
        request.productTypes = try query.getAll("productType").map { name in
            guard let type = Self.productTypes[name] else { throw APIError(400, 4_000_022, "Invalid product type.") }
            return type
        }
        switch query.get("sort") {
        case nil, "ASCENDING": break
        case "DESCENDING": request.descending = true
        default: throw APIError(400, 4_000_021, "Invalid sort.")
        }
        request.subscriptionGroupIdentifiers = query.getAll("subscriptionGroupIdentifier")
        if let text = query.get("revoked") {
            switch text.lowercased() {
            case "true": request.revoked = true
            case "false": request.revoked = false
            default: throw APIError(400, 4_000_030, "Invalid revoked.")
            }
        }
        if let ownership = query.get("inAppOwnershipType") {
            guard ["PURCHASED", "FAMILY_SHARED"].contains(ownership) else { throw APIError(400, 4_000_026, "Invalid in-app ownership type.") }
            request.inAppOwnershipType = ownership
        }
        let answer = try await receipt.call(Storebus_Receipt_V1_Receipt.getTransactionHistory, request, options: options())
        return HistoryResponse(
            revision: answer.revision, hasMore: answer.hasMore_p, bundleId: answer.bundleID, environment: answer.environment,
            signedTransactions: answer.signedTransactions)
    }

    /// The App Store Server API's product type names.
    static let productTypes: [String: Storebus_Catalog_V1_ProductType] = [
        "AUTO_RENEWABLE": .autoRenewableSubscription, "NON_RENEWABLE": .nonRenewingSubscription, "CONSUMABLE": .consumable,
        "NON_CONSUMABLE": .nonConsumable
    ]

    struct RefundHistoryResponse: Encodable {
        var signedTransactions: [String]
        var revision: String
        var hasMore: Bool
    }

    func refunds(app: String, id: String, revision: String) async throws -> RefundHistoryResponse {
        try APIError.checkTransactionID(id)
        let answer = try await receipt.call(
            Storebus_Receipt_V1_Receipt.getRefundHistory,
            .with {
                $0.appBundleID = app; $0.transactionID = id; $0.revision = revision
            }, options: options())
        return RefundHistoryResponse(signedTransactions: answer.signedTransactions, revision: answer.revision, hasMore: answer.hasMore_p)
    }

    struct StatusResponse: Encodable {
        struct Group: Encodable {
            var subscriptionGroupIdentifier: String
            var lastTransactions: [Item]
        }
        struct Item: Encodable {
            var status: Int32
            var originalTransactionId: String
            var signedTransactionInfo: String
            var signedRenewalInfo: String
        }
        var environment: String
        var bundleId: String
        var data: [Group]
    }

    func statuses(app: String, id: String, query: Parameters) async throws -> StatusResponse {
        try APIError.checkTransactionID(id)
        let statuses = try query.getAll("status").map { text in
            guard let status = Int32(text), (1...5).contains(status) else { throw APIError(400, 4_000_031, "Invalid status.") }
            return status
        }
        let answer = try await receipt.call(
            Storebus_Receipt_V1_Receipt.getAllSubscriptionStatuses,
            .with {
                $0.appBundleID = app; $0.transactionID = id; $0.statuses = statuses
            },
            options: options())
        return StatusResponse(
            environment: answer.environment, bundleId: app,
            data: answer.data.map { group in
                StatusResponse.Group(
                    subscriptionGroupIdentifier: group.subscriptionGroupIdentifier,
                    lastTransactions: group.lastTransactions.map {
                        StatusResponse.Item(
                            status: $0.status, originalTransactionId: $0.originalTransactionID, signedTransactionInfo: $0.signedTransactionInfo,
                            signedRenewalInfo: $0.signedRenewalInfo)
                    })
            })
    }

    /// Extend a Subscription Renewal Date's request body.
    struct ExtendRenewalDateRequest: Decodable {
        var extendByDays: Int?
        var extendReasonCode: Int?
        var requestIdentifier: String?
    }

    struct ExtendRenewalDateResponse: Encodable {
        var originalTransactionId: String
        var webOrderLineItemId: String
        var success: Bool
        var effectiveDate: Int64
    }

    /// Moves the renewal date of the subscription whose first purchase is `original` later, once
    /// per request identifier (the payment queue keeps them).
    func extend(app: String, original: String, body: ByteBuffer?) async throws -> ExtendRenewalDateResponse {
        try APIError.checkTransactionID(original)
        guard let body, let request = try? JSONDecoder().decode(ExtendRenewalDateRequest.self, from: Data(buffer: body)) else {
            throw APIError(400, 4_000_000, "Bad request.")
        }
        guard let days = request.extendByDays, (1...90).contains(days) else { throw APIError(400, 4_000_009, "Invalid extend by days value.") }
        guard let reason = request.extendReasonCode, (0...3).contains(reason) else { throw APIError(400, 4_000_010, "Invalid extend reason code.") }
        guard let requestID = request.requestIdentifier, !requestID.isEmpty, requestID.utf8.count <= 128 else {
            throw APIError(400, 4_000_011, "Invalid request identifier.")
        }
        let notFound = APIError(404, 4_040_005, "Original transaction id not found.")
        let statuses: Storebus_Receipt_V1_GetSubscriptionStatusesResponse
        do {
            statuses = try await receipt.call(
                Storebus_Receipt_V1_Receipt.getAllSubscriptionStatuses,
                .with {
                    $0.appBundleID = app; $0.transactionID = original
                }, options: options())
        } catch {
            throw error.code == .notFound ? notFound : error
        }
        guard
            let (group, item) = statuses.data.lazy.compactMap({ group in
                group.lastTransactions.first { $0.originalTransactionID == original }.map { (group.subscriptionGroupIdentifier, $0) }
            }).first
        else { throw notFound }
        let extended: Storebus_PaymentQueue_V1_AdjustSubscriptionResponse
        do {
            extended = try await queue.call(
                Storebus_PaymentQueue_V1_Subscriptions.extendRenewalDate,
                .with {
                    $0.subscription = .with {
                        $0.appBundleID = app; $0.accountID = statuses.accountID; $0.subscriptionGroupIdentifier = group
                    }
                    $0.extendByDays = UInt32(days)
                    $0.extendReasonCode = UInt32(reason)
                    $0.requestIdentifier = requestID
                }, options: options())
        } catch {
            guard error.code == .failedPrecondition else { throw error }
            throw APIError(403, 4_030_004, "Forbidden - subscription state ineligible for extension.")
        }
        let transaction = JWS.unverifiedPayload(item.signedTransactionInfo)
        return ExtendRenewalDateResponse(
            originalTransactionId: original, webOrderLineItemId: transaction?["webOrderLineItemId"] as? String ?? "", success: true,
            effectiveDate: extended.subscription.expiresDate.milliseconds)
    }

    // MARK: - Notifications

    func requestTest(app: String) async throws -> [String: String] {
        let answer = try await handlers.requestTest(app: app, timeout: Self.callTimeout)
        return ["testNotificationToken": answer.testNotificationToken]
    }

    struct SendAttempt: Encodable {
        var attemptDate: Int64
        var sendAttemptResult: String
    }

    struct NotificationItem: Encodable {
        var signedPayload: String
        var sendAttempts: [SendAttempt]

        init(_ item: Storebus_Notifications_V1_NotificationHistoryItem) {
            signedPayload = item.notification.signedPayload
            sendAttempts = item.sendAttempts.map { SendAttempt(attemptDate: $0.attemptDate.milliseconds, sendAttemptResult: $0.sendAttemptResult) }
        }
    }

    func testStatus(app: String, token: String) async throws -> NotificationItem {
        guard !token.isEmpty, token.utf8.count <= 64 else { throw APIError(400, 4_000_020, "Invalid test notification token.") }
        guard let item = try await store.testNotification(app: app, token: token) else {
            throw APIError(404, 4_040_008, "Either the test notification token is expired or the notification and status are not yet available.")
        }
        return NotificationItem(item)
    }

    /// Notification History's request body.
    struct NotificationHistoryRequest: Decodable {
        var startDate: Int64?
        var endDate: Int64?
        var notificationType: String?
        var notificationSubtype: String?
        var transactionId: String?
        var onlyFailures: Bool?
    }

    struct NotificationHistoryResponse: Encodable {
        var notificationHistory: [NotificationItem]
        var hasMore: Bool
        var paginationToken: String
    }

    /// The notification types there are (Apple's, those StoreBus sends among them).
    static let notificationTypes: Set<String> = [
        "CONSUMPTION_REQUEST", "DID_CHANGE_RENEWAL_PREF", "DID_CHANGE_RENEWAL_STATUS", "DID_FAIL_TO_RENEW", "DID_RENEW", "EXPIRED",
        "EXTERNAL_PURCHASE_TOKEN", "GRACE_PERIOD_EXPIRED", "METADATA_UPDATE", "MIGRATION", "OFFER_REDEEMED", "ONE_TIME_CHARGE", "PRICE_CHANGE",
        "PRICE_INCREASE", "REFUND", "REFUND_DECLINED", "REFUND_REVERSED", "RENEWAL_EXTENDED", "RENEWAL_EXTENSION", "REVOKE", "SUBSCRIBED", "TEST"
    ]

    /// Notifications looked at in one request at most, matching or not: a narrow filter over a long
    /// log answers with a token to go on from, never with an unbounded scan.
    static let scanLimit = 5_000

    func notificationHistory(app: String, token: String?, body: ByteBuffer?) async throws -> NotificationHistoryResponse {
        guard let body, let request = try? JSONDecoder().decode(NotificationHistoryRequest.self, from: Data(buffer: body)) else {
            throw APIError(400, 4_000_000, "Bad request.")
        }
        guard let start = request.startDate else { throw APIError(400, 4_000_015, "Invalid start date.") }
        guard let end = request.endDate else { throw APIError(400, 4_000_016, "Invalid end date.") }
        guard start <= end else { throw APIError(400, 4_000_013, "Invalid request. The start date is later than the end date.") }
        if let type = request.notificationType, !Self.notificationTypes.contains(type) { throw APIError(400, 4_000_018, "Invalid notification type.") }
        if request.notificationType != nil, request.transactionId != nil {
            throw APIError(400, 4_000_019, "Invalid request. Only one of notificationType and transactionId may be given.")
        }
        var after: UInt64 = 0
        if let token, !token.isEmpty {
            guard let position = UInt64(token) else { throw APIError(400, 4_000_014, "Invalid pagination token.") }
            after = position
        }
        // A transaction names its customer: every notification of that account.
        var account: String?
        if let transaction = request.transactionId {
            try APIError.checkTransactionID(transaction)
            account = try await store.account(app: app, transaction: transaction)
            guard account != nil else { return NotificationHistoryResponse(notificationHistory: [], hasMore: false, paginationToken: "") }
        }
        let onlyFailures = request.onlyFailures ?? false
        let found = try await store.searchHistory(app: app, after: after, limit: 20, scanning: Self.scanLimit) { item in
            let notification = item.notification
            let signed = notification.signedDate.milliseconds
            guard signed >= start, signed < end else { return false }
            if let type = request.notificationType, notification.notificationType != type { return false }
            if let subtype = request.notificationSubtype, notification.subtype != subtype { return false }
            if let account, notification.accountID != account { return false }
            if onlyFailures, !item.sendAttempts.contains(where: { $0.sendAttemptResult != "SUCCESS" }) { return false }
            return true
        }
        return NotificationHistoryResponse(
            notificationHistory: found.items.map(NotificationItem.init), hasMore: found.more, paginationToken: found.more ? String(found.last) : "")
    }
}

/// An error as the App Store Server API answers it: an HTTP status, Apple's error code and its
/// message.
struct APIError: Error {
    let status: HTTPResponse.Status
    let code: Int
    let message: String

    init(_ status: Int, _ code: Int, _ message: String) {
        self.status = HTTPResponse.Status(code: status)
        self.code = code
        self.message = message
    }

    /// Apple's error body, `{"errorCode": …, "errorMessage": …}`.
    struct Body: Encodable {
        var errorCode: Int
        var errorMessage: String
    }

    var response: Response { AppStoreServerAPI.json(status, Body(errorCode: code, errorMessage: message)) }

    /// What the receipt service's refusal is in Apple's terms.
    init(_ error: RPCError) {
        switch error.code {
        case .notFound: self.init(404, 4_040_010, "Transaction id not found.")
        case .invalidArgument where error.details.fieldViolations.contains(where: { $0.field == "revision" }):
            self.init(400, 4_000_005, "Invalid request revision.")
        case .invalidArgument: self.init(400, 4_000_000, "Bad request.")
        case .unavailable, .deadlineExceeded, .resourceExhausted: self.init(500, 5_000_001, "An unknown retryable error occurred. Please try again.")
        default: self.init(500, 5_000_000, "An unknown error occurred.")
        }
    }

    /// A transaction id as StoreBus makes them: 1 to 64 letters, digits, dots, dashes or underscores.
    static func checkTransactionID(_ id: String) throws {
        guard !id.isEmpty, id.utf8.count <= 64, id.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") })
        else { throw APIError(400, 4_000_006, "Invalid transaction id.") }
    }
}

extension UInt8 {
    fileprivate var isASCIIAlphanumeric: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}
