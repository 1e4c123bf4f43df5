import Foundation
import ReceiptFormat
import StoreBus
import StoreSchema
import Synchronization

/// Steps 1 to 3 of "Download content from your own server": the account's receipt, fetched from
/// the receipt service, verified against StoreBus's root certificate (CMS signature, chain, the
/// device's hash), and read for the products asked about.
final class ReceiptCheck: Sendable {
    private let receipts: Storebus_Receipt_V1_Receipt.Client
    /// The verifier over the receipt service's root, fetched once (again after a failed check, in
    /// case the service's keys were made anew).
    private let verifier = Mutex<ReceiptVerifier?>(nil)

    init(receipts: RPCClient) {
        self.receipts = .init(receipts)
    }

    /// Throws FAILED_PRECONDITION (reason NOT_IN_RECEIPT) naming the first of `products` that the
    /// queue's account's receipt does not list as owned, or that it lists as refunded; the receipt
    /// reflects the payment queue's log up to `minSeq` at least.
    func check(queue: Storebus_PaymentQueue_V1_QueueRef, products: [String], minSeq: UInt64, timeout: Duration?) async throws {
        let refreshed = try await receipts.refreshReceipt(
            .with {
                $0.appBundleID = queue.appBundleID
                $0.accountID = queue.accountID
                $0.deviceID = queue.deviceID
                $0.minSeq = minSeq
            }, options: CallOptions(timeout: timeout))
        guard let der = Data(base64Encoded: refreshed.receiptData) else {
            throw RPCError(.internalError, "the receipt service answered a receipt that is not base64")
        }
        let receipt: AppReceipt
        do {
            receipt = try await verify(Array(der), queue: queue, fresh: false)
        } catch {
            receipt = try await verify(Array(der), queue: queue, fresh: true)
        }
        for product in products {
            let owned = receipt.inApp.contains { $0.productID == product && $0.cancellationDate == nil }
            guard owned else {
                let refunded = receipt.inApp.contains { $0.productID == product }
                throw RPCError.resource(
                    .failedPrecondition, type: "product", name: product,
                    refunded
                        ? "the account's receipt shows \(RPCError.echo(product)) refunded: its content is not served"
                        : "the account's receipt does not list \(RPCError.echo(product)): its content is not served"
                ).withReason("NOT_IN_RECEIPT", domain: "storebus.download")
            }
        }
    }

    private func verify(_ der: [UInt8], queue: Storebus_PaymentQueue_V1_QueueRef, fresh: Bool) async throws -> AppReceipt {
        let verifier = try await self.verifier(fresh: fresh)
        do {
            return try await verifier.verify(der, bundleID: queue.appBundleID, deviceID: queue.deviceID)
        } catch {
            throw RPCError(.failedPrecondition, "the account's receipt does not verify: \(error)").withReason("RECEIPT_INVALID", domain: "storebus.download")
        }
    }

    private func verifier(fresh: Bool) async throws -> ReceiptVerifier {
        if !fresh, let known = verifier.withLock({ $0 }) { return known }
        let certificates = try await receipts.getSigningCertificates(.init(), options: CallOptions(timeout: .seconds(10)))
        let made = try ReceiptVerifier(
            rootCertificatePEM: certificates.rootCertificatePem, walksPayload: FastPaths.enabled, remembersSigners: FastPaths.enabled)
        verifier.withLock { $0 = made }
        return made
    }
}
