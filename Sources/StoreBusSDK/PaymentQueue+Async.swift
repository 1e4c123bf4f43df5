import Foundation
import StoreBus
import StoreSchema

/// The outcome of ``PaymentQueue/purchase(_:storefront:)``, as StoreKit 2's `Product.PurchaseResult`.
public enum PurchaseResult: Sendable, Equatable {
    /// Paid: deliver the content, then finish the transaction.
    case success(PaymentTransaction)
    /// The user cancelled, or a parent declined an Ask to Buy request; the transaction (FAILED) is
    /// to be finished.
    case userCancelled(PaymentTransaction)
    /// Waiting for an outside action (Ask to Buy): the outcome arrives later through the observers
    /// and ``PaymentQueue/transactionUpdates``.
    case pending(PaymentTransaction)
}

/// StoreKit 2's conveniences over the same queue: a purchase awaited to its outcome, every
/// transaction update as a sequence, a download's progress as a sequence.
extension PaymentQueue {
    /// Buys `payment` and waits for its outcome: purchased (`.success`), cancelled or declined
    /// (`.userCancelled`), or deferred (`.pending`). A purchase that fails otherwise throws its
    /// ``StoreKitError`` (the FAILED transaction is in ``transactions``, to be finished); a refusal
    /// before it reaches the store throws ``StoreError``. Observers hear the transaction as with
    /// ``add(_:)``.
    public func purchase(_ payment: Payment, storefront: String? = nil) async throws -> PurchaseResult {
        let updates = callbacks
        let added = try await addPayment(payment, storefront: storefront)
        if let outcome = try Self.outcome(of: added) { return outcome }
        for await callback in updates {
            guard case .updatedTransactions(let transactions, _) = callback.event,
                let transaction = transactions.last(where: { $0.id == added.id }),
                let outcome = try Self.outcome(of: transaction)
            else { continue }
            return outcome
        }
        throw StoreError(RPCError(.cancelled, "the queue was closed before transaction \(added.id) settled"))
    }

    /// Buys one unit of `product` (see ``purchase(_:storefront:)``).
    public func purchase(_ product: Product, storefront: String? = nil) async throws -> PurchaseResult {
        try await purchase(Payment(product: product), storefront: storefront)
    }

    /// The outcome a transaction in this state stands for, nil while it is purchasing.
    static func outcome(of transaction: PaymentTransaction) throws -> PurchaseResult? {
        switch transaction.transactionState {
        case .purchasing: return nil
        case .purchased, .restored: return .success(transaction)
        case .deferred: return .pending(transaction)
        case .failed:
            let error = transaction.error ?? StoreKitError(code: .unknown, localizedDescription: "the purchase failed")
            if error.code == .paymentCancelled { return .userCancelled(transaction) }
            throw error
        }
    }

    /// Every transaction as it is added or changes state, from now on, as StoreKit 2's
    /// `Transaction.updates` (the unfinished ones of the launch replay first). Starts observing; ends
    /// when the queue is closed.
    public var transactionUpdates: AsyncStream<PaymentTransaction> {
        let callbacks = self.callbacks
        return AsyncStream { continuation in
            let task = Task {
                for await callback in callbacks {
                    if case .updatedTransactions(let transactions, _) = callback.event {
                        for transaction in transactions { continuation.yield(transaction) }
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// `download` as it progresses and changes state, from now on, until it is finished, failed or
    /// cancelled (the last element). Progress comes at least every 250 ms while it is active.
    public func progress(of download: Download) -> AsyncStream<Download> {
        let callbacks = self.callbacks
        return AsyncStream { continuation in
            let task = Task {
                for await callback in callbacks {
                    guard case .updatedDownloads(let downloads) = callback.event,
                        let update = downloads.last(where: { $0.transactionIdentifier == download.transactionIdentifier && $0.contentIdentifier == download.contentIdentifier })
                    else { continue }
                    continuation.yield(update)
                    if [.finished, .failed, .cancelled].contains(update.state) { break }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// A transaction of the account as the receipt service signed it (JWS, ES256, x5c), checked against
/// StoreBus's root: StoreKit 2's `VerificationResult<Transaction>.verified`.
public struct VerifiedTransaction: Sendable, Equatable {
    /// The transaction identifier.
    public var transactionIdentifier: String
    /// The original purchase's identifier.
    public var originalTransactionIdentifier: String
    /// The product.
    public var productIdentifier: String
    /// When it was purchased or restored.
    public var purchaseDate: Date?
    /// When it was refunded, if it was.
    public var revocationDate: Date?
    /// The JWS as signed.
    public var jws: String
}

extension StoreConnection {
    /// One transaction of the account, signed by the receipt service and checked here against its
    /// root (fetched once per call; pass `root` to check against one you pinned). Throws
    /// ``ReceiptVerifier/Failure`` when the signature or chain does not verify.
    public func verifiedTransaction(_ transactionIdentifier: String, root: String? = nil) async throws -> VerifiedTransaction {
        let jws = try await signedTransaction(transactionIdentifier)
        let verifier = try ReceiptVerifier(rootCertificatePEM: try await resolvedRoot(root))
        return try await Self.verified(jws, verifier)
    }

    /// What the account owns now, each as the original purchase behind it, verified (StoreKit 2's
    /// `Transaction.currentEntitlements`): active entitlements only, revoked and expired ones left out.
    public func currentEntitlements(root: String? = nil) async throws -> [VerifiedTransaction] {
        let verifier = try ReceiptVerifier(rootCertificatePEM: try await resolvedRoot(root))
        var verified: [VerifiedTransaction] = []
        for entitlement in try await entitlements() where entitlement.isActive {
            let jws = try await signedTransaction(entitlement.originalTransactionIdentifier)
            verified.append(try await Self.verified(jws, verifier))
        }
        return verified
    }

    func resolvedRoot(_ root: String?) async throws -> String {
        if let root { return root }
        return try await rootCertificatePEM()
    }

    private static func verified(_ jws: String, _ verifier: ReceiptVerifier) async throws -> VerifiedTransaction {
        let payload = try await verifier.verifyTransaction(jws)
        return VerifiedTransaction(
            transactionIdentifier: payload.transactionId ?? "",
            originalTransactionIdentifier: payload.originalTransactionId ?? "",
            productIdentifier: payload.productId ?? "",
            purchaseDate: payload.purchaseDate.map(EpochMilliseconds.date), revocationDate: payload.revocationDate.map(EpochMilliseconds.date), jws: jws
        )
    }
}
