import Foundation
import ReceiptFormat
import StoreBus
import StoreBusServer
import StoreBusStorage
import StoreSchema
import X509

/// The handlers of `storebus.receipt.v1.Receipt`: receipts, verification and entitlements from a
/// ``ReceiptBook``; apps are looked up in the catalog.
public struct ReceiptHandlers: Storebus_Receipt_V1_Receipt.Handlers {
    /// Longest wait for `min_seq` when the caller gives no deadline.
    static let longestWait = Duration.seconds(30)

    let book: ReceiptBook
    let catalog: CatalogLookup

    /// Handlers over `book`, asking `catalog` whether apps exist.
    public init(book: ReceiptBook, catalog: CatalogLookup) {
        self.book = book
        self.catalog = catalog
    }

    /// RefreshReceipt's, VerifyReceipt's and SignNotifications' answers written directly
    /// (``MessageCodec/refreshReceipt``, ``MessageCodec/verifyReceipt``, ``MessageCodec/signNotifications``).
    public var codecs: MessageCodecs {
        var codecs = MessageCodecs()
        codecs.use(.refreshReceipt, for: Storebus_Receipt_V1_Receipt.refreshReceipt)
        codecs.use(.verifyReceipt, for: Storebus_Receipt_V1_Receipt.verifyReceipt)
        codecs.use(.signNotifications, for: Storebus_Receipt_V1_Receipt.signNotifications)
        return codecs
    }

    /// A router answering every Receipt method.
    public var router: RPCRouter {
        var router = RPCRouter()
        router.register(self)
        return router
    }

    /// Every method may sign or verify (receipts, transactions) or decode a receipt: none runs on
    /// the loop (the protocol's default).

    public func refreshReceipt(_ request: Storebus_Receipt_V1_RefreshReceiptRequest, context: ServerContext) async throws -> Storebus_Receipt_V1_RefreshReceiptResponse {
        if request.hasProperties, book.configuration.environment == .production {
            throw RPCError(.failedPrecondition, "receipt properties are for sandbox testing; this deployment is production")
        }
        try await catalog.checkApp(request.appBundleID)
        _ = try await Self.reach(request.minSeq, app: request.appBundleID, account: request.accountID, book: book, context)
        try await Self.reach(queue: request.appBundleID, request.accountID, request.deviceID, request.minQueueSeq, book: book, context)
        let (receipt, asOf) = try await book.refresh(
            app: request.appBundleID, account: request.accountID, device: request.deviceID, applicationVersion: request.applicationVersion,
            properties: request.hasProperties ? request.properties : nil
        )
        return .with {
            $0.receiptData = Base64Text.encode(receipt)
            $0.asOfSeq = asOf
        }
    }

    public func verifyReceipt(_ request: Storebus_Receipt_V1_VerifyReceiptRequest, context: ServerContext) async throws -> Storebus_Receipt_V1_VerifyReceiptResponse {
        let verification = await book.verify(
            receiptData: request.receiptData, password: request.hasPassword ? request.password : nil,
            excludeOldTransactions: request.excludeOldTransactions
        )
        return verification.response(book: book)
    }

    public func getEntitlements(_ request: Storebus_Receipt_V1_GetEntitlementsRequest, context: ServerContext) async throws -> Storebus_Receipt_V1_GetEntitlementsResponse {
        try await catalog.checkApp(request.appBundleID)
        try await Self.reach(queue: request.appBundleID, request.accountID, request.deviceID, request.minQueueSeq, book: book, context)
        let asOf = try await Self.reach(request.minSeq, app: request.appBundleID, account: request.accountID, book: book, context)
        let entitlements = try await book.entitlements(app: request.appBundleID, account: request.accountID)
        return .with {
            $0.entitlements = entitlements
            $0.asOfSeq = asOf
        }
    }

    public func getTransaction(_ request: Storebus_Receipt_V1_GetTransactionRequest, context: ServerContext) async throws -> Storebus_Receipt_V1_GetTransactionResponse {
        let (app, account) = (request.appBundleID, request.accountID)
        try await Self.reach(queue: app, account, request.deviceID, request.minQueueSeq, book: book, context)
        let asOf = try await Self.reach(request.minSeq, app: app, account: account, book: book, context)
        guard let purchase = try await book.store.purchase(app: app, account: account, id: request.transactionID) else {
            throw RPCError.resource(
                .notFound, type: "transaction", name: request.transactionID,
                "account \(RPCError.echo(account)) has no purchased or restored transaction \(RPCError.echo(request.transactionID)) in \(RPCError.echo(app))")
        }
        let transaction: Storebus_Receipt_V1_InAppPurchase
        do {
            transaction = try book.inAppPurchase(purchase)
        } catch {
            // Never an unsigned transaction in place of a signed one.
            throw RPCError(.internalError, "the transaction could not be signed", cause: error)
        }
        return .with {
            $0.transaction = transaction
            $0.asOfSeq = asOf
        }
    }

    public func getSubscriptionStatuses(
        _ request: Storebus_Receipt_V1_GetSubscriptionStatusesRequest, context: ServerContext
    ) async throws -> Storebus_Receipt_V1_GetSubscriptionStatusesResponse {
        try await catalog.checkApp(request.appBundleID)
        try await Self.reach(queue: request.appBundleID, request.accountID, request.deviceID, request.minQueueSeq, book: book, context)
        let asOf = try await Self.reach(request.minSeq, app: request.appBundleID, account: request.accountID, book: book, context)
        let groups: [Storebus_Receipt_V1_SubscriptionGroupStatus]
        do {
            groups = try await book.subscriptionStatuses(app: request.appBundleID, account: request.accountID)
        } catch let error as RPCError {
            throw error
        } catch {
            // Never an unsigned status in place of a signed one.
            throw RPCError(.internalError, "the subscription statuses could not be signed", cause: error)
        }
        return .with {
            $0.data = groups
            $0.environment = book.configuration.environment.rawValue
            $0.asOfSeq = asOf
            $0.accountID = request.accountID
        }
    }

    public func getSigningCertificates(_ request: Storebus_Receipt_V1_GetSigningCertificatesRequest, context: ServerContext) async throws -> Storebus_Receipt_V1_GetSigningCertificatesResponse {
        let authority = book.authority
        return try .with {
            $0.rootCertificatePem = try authority.rootPEM
            $0.intermediateCertificatePem = try authority.intermediate.serializeAsPEM().pemString
            $0.leafCertificatesPem = try authority.leaves.map { try $0.certificate.serializeAsPEM().pemString }
            $0.jwksJson = try authority.jwks()
            $0.environment = book.configuration.environment.rawValue
        }
    }

    public func signNotifications(
        _ request: Storebus_Receipt_V1_SignNotificationsRequest, context: ServerContext
    ) async throws -> Storebus_Receipt_V1_SignNotificationsResponse {
        // A position of the shard the notification service's page came from.
        _ = try await Self.reach(request.minSeq, key: FollowedLog.name(ReceiptStore.log, shard: request.shard), book: book, context)
        let signed: [String]
        do {
            signed = try await book.signNotifications(request.notifications)
        } catch let error as RPCError {
            throw error
        } catch {
            // Never an unsigned notification in place of a signed one.
            throw RPCError(.internalError, "the notifications could not be signed", cause: error)
        }
        return .with {
            $0.signedPayloads = signed
            $0.environment = book.configuration.environment.rawValue
        }
    }

    public func getTransactionInfo(
        _ request: Storebus_Receipt_V1_GetTransactionInfoRequest, context: ServerContext
    ) async throws -> Storebus_Receipt_V1_GetTransactionInfoResponse {
        let signed = try await Self.signing("transaction") { try await book.transactionInfo(app: request.appBundleID, id: request.transactionID) }
        return .with { $0.signedTransactionInfo = signed }
    }

    public func getTransactionHistory(
        _ request: Storebus_Receipt_V1_GetTransactionHistoryRequest, context: ServerContext
    ) async throws -> Storebus_Receipt_V1_GetTransactionHistoryResponse {
        try await Self.signing("transaction history") { try await book.history(request) }
    }

    public func getRefundHistory(
        _ request: Storebus_Receipt_V1_GetRefundHistoryRequest, context: ServerContext
    ) async throws -> Storebus_Receipt_V1_GetTransactionHistoryResponse {
        try await Self.signing("refund history") { try await book.refundHistory(request) }
    }

    public func getAllSubscriptionStatuses(
        _ request: Storebus_Receipt_V1_GetAllSubscriptionStatusesRequest, context: ServerContext
    ) async throws -> Storebus_Receipt_V1_GetSubscriptionStatusesResponse {
        let account = try await book.customer(app: request.appBundleID, transaction: request.transactionID)
        let groups = try await Self.signing("subscription statuses") {
            try await book.allSubscriptionStatuses(app: request.appBundleID, account: account, statuses: request.statuses)
        }
        return .with {
            $0.accountID = account
            $0.data = groups
            $0.environment = book.configuration.environment.rawValue
            $0.asOfSeq = book.appliedSeq(app: request.appBundleID, account: account)
        }
    }

    /// `body`'s answer; an error that is not an RPCError (the signing key, an encoding) as
    /// INTERNAL: never an unsigned answer in place of a signed one.
    static func signing<Answer>(_ what: String, _ body: () async throws -> Answer) async throws -> Answer {
        do {
            return try await body()
        } catch let error as RPCError {
            throw error
        } catch {
            throw RPCError(.internalError, "the \(what) could not be signed", cause: error)
        }
    }

    public func rotateSigningKey(_ request: Storebus_Receipt_V1_RotateSigningKeyRequest, context: ServerContext) async throws -> Storebus_Receipt_V1_RotateSigningKeyResponse {
        let leaf = try book.authority.rotate()
        context.logger.notice("Signing key rotated", metadata: ["leaf": "\(SigningAuthority.keyID(of: leaf.certificate))"])
        return try .with {
            $0.leafCertificatePem = try leaf.certificate.serializeAsPEM().pemString
            $0.keyID = SigningAuthority.keyID(of: leaf.certificate)
            $0.leafCount = UInt32(book.authority.leaves.count)
        }
    }

    /// Waits until the device's queue is applied up to `minQueueSeq` (0: not at all), the position of
    /// an observer callback it has seen. DEADLINE_EXCEEDED when it is not reached in the call's time;
    /// INVALID_ARGUMENT without a device.
    static func reach(queue app: String, _ account: String, _ device: String, _ minQueueSeq: UInt64, book: ReceiptBook, _ context: ServerContext) async throws {
        guard minQueueSeq > 0 else { return }
        try QueueNames.check(device, field: "deviceId")
        let queue = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = app; $0.accountID = account; $0.deviceID = device
        }
        // The queue's position, as a position of the whole log (of its shard): the payment queue says.
        guard let seq = try await book.head.position(ofKey: queue.key, keySeq: minQueueSeq, timeout: context.timeRemaining) else {
            throw RPCError(.outOfRange, "the queue has no position \(minQueueSeq) yet: give the seq of a callback it delivered")
        }
        _ = try await reach(seq, app: app, account: account, book: book, context)
    }

    /// ``reach(_:key:book:_:)`` for a position of the shard of `app`'s `account`.
    static func reach(_ minSeq: UInt64, app: String, account: String, book: ReceiptBook, _ context: ServerContext) async throws(RPCError) -> UInt64 {
        try await reach(minSeq, key: book.shards.positionKey(app: app, account: account), book: book, context)
    }

    /// Waits until the payment queue's log (the shard whose position is kept under `key`, when it
    /// is sharded) is applied up to `minSeq` (0: not at all); returns the position applied.
    /// DEADLINE_EXCEEDED when it is not reached in the call's time.
    static func reach(_ minSeq: UInt64, key: String, book: ReceiptBook, _ context: ServerContext) async throws(RPCError) -> UInt64 {
        guard minSeq > 0 else { return book.applied.position(key) }
        let wait = min(context.timeRemaining ?? longestWait, longestWait)
        guard await book.applied.wait(key, reaching: minSeq, timeout: wait) else {
            throw RPCError(.deadlineExceeded, "the payment queue's event log is applied up to \(book.applied.position(key)), not yet \(minSeq)")
        }
        return book.applied.position(key)
    }
}

extension MessageCodec where Request == Storebus_Receipt_V1_RefreshReceiptRequest, Response == Storebus_Receipt_V1_RefreshReceiptResponse {
    /// RefreshReceipt's codec: the request by swift-protobuf; the answer, a receipt's base64 (360 KB
    /// for 1,000 purchases) and a position, written directly: swift-protobuf's encoder looks at each
    /// character of a string for escapes, a fifth of issuing a large receipt. With the fast paths off,
    /// swift-protobuf's (`RefreshReceiptJSONTests` holds the two to the same bytes).
    static let refreshReceipt = MessageCodec(
        decode: { body in try JSONCodec.decode(Request.self, from: body) },
        encode: { response in
            guard FastPaths.enabled else { return try JSONCodec.encode(response) }
            return RefreshReceiptJSON.encode(response)
        }
    )
}

/// RefreshReceiptResponse's proto3 JSON as swift-protobuf writes it: members in field order,
/// defaults left out, the uint64 as a string.
enum RefreshReceiptJSON {
    static func encode(_ response: Storebus_Receipt_V1_RefreshReceiptResponse) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(response.receiptData.utf8.count + 48)
        out.append(UInt8(ascii: "{"))
        if !response.receiptData.isEmpty {
            out += #""receiptData":"#.utf8
            JSONText.appendQuoted(response.receiptData, to: &out)
        }
        if response.asOfSeq != 0 {
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            out += #""asOfSeq":"#.utf8
            JSONText.appendQuoted(response.asOfSeq, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}

extension MessageCodec where Request == Storebus_Receipt_V1_SignNotificationsRequest, Response == Storebus_Receipt_V1_SignNotificationsResponse {
    /// SignNotifications' codec: the request by swift-protobuf; the answer, a JWS of kilobytes for
    /// each notification of a page, written directly (swift-protobuf's look at each of their
    /// characters for escapes was a tenth of the receipt service's CPU per purchase). With the fast
    /// paths off, swift-protobuf's (`SignNotificationsJSONTests` holds the two to the same bytes).
    static let signNotifications = MessageCodec(
        decode: { body in try JSONCodec.decode(Request.self, from: body) },
        encode: { response in
            guard FastPaths.enabled else { return try JSONCodec.encode(response) }
            return SignNotificationsJSON.encode(response)
        }
    )
}

/// SignNotificationsResponse's proto3 JSON as swift-protobuf writes it: members in field order,
/// an empty list and an empty string left out.
enum SignNotificationsJSON {
    static func encode(_ response: Storebus_Receipt_V1_SignNotificationsResponse) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(response.signedPayloads.reduce(64) { $0 + $1.utf8.count + 3 })
        out.append(UInt8(ascii: "{"))
        if !response.signedPayloads.isEmpty {
            out += #""signedPayloads":["#.utf8
            for (index, payload) in response.signedPayloads.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.appendQuoted(payload, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        if !response.environment.isEmpty {
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            out += #""environment":"#.utf8
            JSONText.appendQuoted(response.environment, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}
