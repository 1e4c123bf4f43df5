import Foundation
import ReceiptFormat
import StoreBus
import StoreBusServer
import StoreSchema
import X509

/// The handlers of `storebus.receipt.v1.Receipt`.
public enum ReceiptService {
    /// Longest wait for `min_seq` when the caller gives no deadline.
    static let longestWait = Duration.seconds(30)

    /// A router answering every Receipt method from `book`; apps are looked up in `catalog`.
    public static func router(book: ReceiptBook, catalog: CatalogLookup) -> RPCRouter {
        var router = RPCRouter()
        router.register(Storebus_Receipt_V1_Receipt.refreshReceipt) { request, context in
            let app = context.ownWhenLeftOut(app: request.appBundleID)
            let account = context.ownWhenLeftOut(account: request.accountID)
            let device = context.ownWhenLeftOut(device: request.deviceID)
            try QueueNames.check(app: app, account: account, device: device)
            try context.authorize(app: app, account: account, device: device)
            guard request.applicationVersion.utf8.count <= 255 else { throw RPCError.invalidArgument(field: "applicationVersion", "must be at most 255 bytes") }
            if request.hasProperties, book.configuration.environment == .production {
                throw RPCError(.failedPrecondition, "receipt properties are for sandbox testing; this deployment is production")
            }
            try await catalog.checkApp(app)
            _ = try await reach(request.minSeq, book: book, context)
            let (receipt, asOf) = try await book.refresh(
                app: app, account: account, device: device, applicationVersion: request.applicationVersion,
                properties: request.hasProperties ? request.properties : nil
            )
            return .with {
                $0.receiptData = Data(receipt).base64EncodedString()
                $0.asOfSeq = asOf
            }
        }
        router.register(Storebus_Receipt_V1_Receipt.verifyReceipt) { request, _ in
            let verification = await book.verify(
                receiptData: request.receiptData, password: request.hasPassword ? request.password : nil,
                excludeOldTransactions: request.excludeOldTransactions
            )
            return verification.response(book: book)
        }
        router.register(Storebus_Receipt_V1_Receipt.getEntitlements) { request, context in
            let (app, account) = try owner(app: request.appBundleID, account: request.accountID, context)
            try await catalog.checkApp(app)
            let asOf = try await reach(request.minSeq, book: book, context)
            let entitlements = try await book.entitlements(app: app, account: account)
            return .with {
                $0.entitlements = entitlements
                $0.asOfSeq = asOf
            }
        }
        router.register(Storebus_Receipt_V1_Receipt.getTransaction) { request, context in
            let (app, account) = try owner(app: request.appBundleID, account: request.accountID, context)
            guard !request.transactionID.isEmpty, request.transactionID.utf8.count <= 64 else {
                throw RPCError.invalidArgument(field: "transactionId", "must be 1 to 64 bytes")
            }
            let asOf = try await reach(request.minSeq, book: book, context)
            guard let purchase = try await book.store.purchase(app: app, account: account, id: request.transactionID) else {
                throw RPCError.resource(.notFound, type: "transaction", name: request.transactionID,
                                        "account \(RPCError.echo(account)) has no purchased or restored transaction \(RPCError.echo(request.transactionID)) in \(RPCError.echo(app))")
            }
            return .with {
                $0.transaction = (try? book.inAppPurchase(purchase)) ?? ReceiptBook.inAppPurchase(ReceiptBook.entry(purchase))
                $0.asOfSeq = asOf
            }
        }
        router.register(Storebus_Receipt_V1_Receipt.getSigningCertificates) { _, _ in
            let authority = book.authority
            return try .with {
                $0.rootCertificatePem = try authority.rootPEM
                $0.intermediateCertificatePem = try authority.intermediate.serializeAsPEM().pemString
                $0.leafCertificatesPem = try authority.leaves.map { try $0.certificate.serializeAsPEM().pemString }
                $0.jwksJson = try authority.jwks()
                $0.environment = book.configuration.environment.rawValue
            }
        }
        router.register(Storebus_Receipt_V1_Receipt.rotateSigningKey) { _, context in
            let leaf = try book.authority.rotate()
            context.logger.notice("Signing key rotated", metadata: ["leaf": "\(SigningAuthority.keyID(of: leaf.certificate))"])
            return try .with {
                $0.leafCertificatePem = try leaf.certificate.serializeAsPEM().pemString
                $0.keyID = SigningAuthority.keyID(of: leaf.certificate)
                $0.leafCount = UInt32(book.authority.leaves.count)
            }
        }
        return router
    }

    /// The app and account a call is about: its own when left out, checked, and within its session.
    static func owner(app: String, account: String, _ context: ServerContext) throws(RPCError) -> (String, String) {
        let app = context.ownWhenLeftOut(app: app)
        let account = context.ownWhenLeftOut(account: account)
        try QueueNames.check(app, field: "appBundleId")
        try QueueNames.check(account, field: "accountId")
        try context.authorize(app: app, account: account)
        return (app, account)
    }

    /// Waits until the payment queue's log is applied up to `minSeq` (0: not at all); returns the
    /// position applied. DEADLINE_EXCEEDED when it is not reached in the call's time.
    static func reach(_ minSeq: UInt64, book: ReceiptBook, _ context: ServerContext) async throws(RPCError) -> UInt64 {
        guard minSeq > 0 else { return book.applied.seq }
        let wait = min(context.timeRemaining ?? longestWait, longestWait)
        guard await book.applied.wait(for: minSeq, timeout: wait) else {
            throw RPCError(.deadlineExceeded, "the payment queue's event log is applied up to \(book.applied.seq), not yet \(minSeq)")
        }
        return book.applied.seq
    }
}
