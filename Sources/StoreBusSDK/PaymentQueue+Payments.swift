import Foundation
import Logging
import StoreBus
import StoreSchema
import Synchronization

// Payments, finishing and restoring: SKPaymentQueue's add, finishTransaction and
// restoreCompletedTransactions, and their async forms.
extension PaymentQueue {
    /// Whether the account may pay in this app (false under purchase restrictions).
    public func canMakePayments() async throws -> Bool {
        let configuration = connection.configuration
        return try await connection.call(
            Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments,
            .with {
                $0.appBundleID = configuration.appBundleID
                $0.accountID = configuration.accountID
            }
        ).canMakePayments
    }

    /// Adds a payment and returns its transaction, PURCHASING or already FAILED; later states arrive
    /// as callbacks. Retried safely under `idempotencyKey` (one is made up when none is given).
    @discardableResult
    public func addPayment(_ payment: Payment, storefront: String? = nil, idempotencyKey: String = UUID().uuidString) async throws -> PaymentTransaction {
        // Refused here, as StoreKit refuses it: the contract reads 0 as "left out" and buys 1.
        guard Payment.quantities.contains(payment.quantity) else {
            throw StoreError(RPCError.invalidArgument(field: "payment.quantity", "must be from 1 to 10, not \(payment.quantity)"))
        }
        await afterLaunchReplay()
        let response = try await connection.call(
            Storebus_PaymentQueue_V1_PaymentQueue.addPayment,
            .with {
                $0.queue = connection.configuration.queue
                $0.payment = payment.message
                $0.storefront = storefront ?? ""
            }, idempotencyKey: idempotencyKey)
        return PaymentTransaction(response.transaction)
    }

    /// Adds a payment (SKPaymentQueue.add); its transaction arrives through the observers, as with
    /// StoreKit whatever happens. Payments (and ``finishTransaction(_:)`` calls) reach the store in
    /// the order they were made. A call whose outcome is unknown (deadline, no gateway) is made again
    /// under the same idempotency key, up to three times. When the store refuses the payment, or still
    /// cannot be reached, observers hear a FAILED transaction that only this queue knows: its
    /// identifier starts with ``localTransactionPrefix``, its error says why (paymentInvalid for a
    /// payment the store found invalid, clientInvalid when the session or the queue may not add it,
    /// cloudServiceNetworkConnectionFailed when it could not be reached), and finishing it removes it
    /// here. A payment whose answers were lost may still have gone through: its transaction then
    /// arrives as well, like any transaction at any time. Use ``addPayment(_:storefront:idempotencyKey:)``
    /// to handle errors yourself.
    public func add(_ payment: Payment) {
        inOrder(.payment(payment)) { [self] in
            do {
                try await underOneKey { key in _ = try await addPayment(payment, idempotencyKey: key) }
            } catch {
                // Reported to the observers, as StoreKit reports it: no error of the program's.
                logger.debug("Adding a payment failed", metadata: ["product": "\(payment.productIdentifier)", "error": "\(error)"])
                deliverLocal(.updatedTransactions([localFailure(payment, error)], replayed: false))
            }
        }
    }

    /// Makes `call` under one idempotency key, again after a pause while its outcome is unknown
    /// (deadline, no gateway), three times at most: a call that ran although its answer was lost is
    /// answered again by the next attempt, not run twice. Throws the error that ended the attempts.
    private func underOneKey(_ call: (_ idempotencyKey: String) async throws -> Void) async throws {
        let key = UUID().uuidString
        try await whileOutcomeUnknown { try await call(key) }
    }

    /// Makes `call` again after a pause while its outcome is unknown (deadline, no gateway), three
    /// times at most; the call must be safe to repeat (idempotent, or under one idempotency key).
    /// Throws the error that ended the attempts.
    private func whileOutcomeUnknown(_ call: () async throws -> Void) async throws {
        var backoff = Backoff(first: connection.configuration.reconnectDelay)
        var attempt = 1
        while true {
            do {
                return try await call()
            } catch let error as StoreError where attempt < 3 && [.deadlineExceeded, .unavailable].contains(error.status) {
                attempt += 1
                await backoff.wait()
            }
        }
    }

    /// The identifier prefix of a FAILED transaction the store never recorded (see ``add(_:)``).
    public static let localTransactionPrefix = "local-"

    /// A FAILED transaction of this queue alone, for a payment the store did not take.
    private func localFailure(_ payment: Payment, _ error: any Error) -> PaymentTransaction {
        let code = Self.paymentFailureCode(error)
        return PaymentTransaction(
            .with {
                $0.transactionIdentifier = Self.localTransactionPrefix + UUID().uuidString.lowercased()
                $0.transactionState = .failed
                $0.queue = connection.configuration.queue
                $0.payment = payment.message
                $0.transactionDate = .init(date: Date())
                $0.error = .with {
                    $0.code = Storebus_PaymentQueue_V1_SKError(rawValue: code.rawValue) ?? .unknown
                    $0.localizedDescription = "\(error)"
                }
            })
    }

    /// The StoreKit code a payment that failed with `error` is reported with.
    static func paymentFailureCode(_ error: any Error) -> StoreKitError.Code {
        switch (error as? StoreError)?.status {
        case .invalidArgument?, .notFound?: .paymentInvalid
        case .permissionDenied?, .unauthenticated?, .resourceExhausted?, .failedPrecondition?: .clientInvalid
        case .internalError?, .unimplemented?, .unknown?: .unknown
        default: .cloudServiceNetworkConnectionFailed
        }
    }

    /// Runs `call` in a task of its own once the fire-and-forget calls made before it have ended.
    private func inOrder(_ work: PendingWork, _ call: @escaping @Sendable () async -> Void) {
        state.withLock { state in
            let previous = state.lastCall
            state.nextPending += 1
            let number = state.nextPending
            state.pending[number] = work
            state.lastCall = Task { [weak self] in
                await previous?.value
                await call()
                _ = self?.state.withLock { $0.pending.removeValue(forKey: number) }
                self?.wake(.pendingCalls)
            }
        }
    }

    /// Finishes a transaction; it then arrives in a removedTransactions callback. Returns true when it
    /// had been finished already.
    @discardableResult
    public func finish(_ transaction: PaymentTransaction) async throws -> Bool {
        if transaction.transactionIdentifier.hasPrefix(Self.localTransactionPrefix) {
            return finishLocal(transaction)
        }
        await afterLaunchReplay()
        return try await connection.call(
            Storebus_PaymentQueue_V1_PaymentQueue.finishTransaction,
            .with {
                $0.queue = connection.configuration.queue
                $0.transactionIdentifier = transaction.transactionIdentifier
            }
        ).alreadyFinished
    }

    /// Removes a transaction only this queue knows (see ``add(_:)``), with its removedTransactions
    /// callback; true when it had been finished already.
    private func finishLocal(_ transaction: PaymentTransaction) -> Bool {
        let known = state.withLock {
            $0.transactions[transaction.transactionIdentifier] != nil
                || $0.held.contains { held in
                    if case .updatedTransactions(let transactions, _) = held.event { return transactions.contains { $0.transactionIdentifier == transaction.transactionIdentifier } }
                    return false
                }
        }
        guard known else { return true }
        var finished = transaction
        finished.isFinished = true
        finished.rawRecord.finished = true
        deliverLocal(.removedTransactions([finished]))
        return false
    }

    /// Finishes a transaction (SKPaymentQueue.finishTransaction), after the payments and finishes
    /// made before it. A finish whose outcome is unknown (deadline, no gateway) is made again, up to
    /// three times: finishing is idempotent, so one that went through although its answer was lost is
    /// only answered again. Errors that remain are logged, and the transaction, still unfinished in
    /// the store, comes back at the next launch; use ``finish(_:)`` to handle them.
    public func finishTransaction(_ transaction: PaymentTransaction) {
        inOrder(.finish(transaction)) { [self] in
            do {
                try await whileOutcomeUnknown { _ = try await finish(transaction) }
            } catch {
                logger.error("Finishing a transaction failed", metadata: ["transaction": "\(transaction.transactionIdentifier)", "error": "\(error)"])
            }
        }
    }

    /// Starts a restore of the account's completed purchases and returns its id and how many
    /// transactions it adds; the RESTORED transactions and the end of the restore arrive as callbacks.
    @discardableResult
    public func restore(applicationUsername: String? = nil, idempotencyKey: String = UUID().uuidString) async throws -> (restoreID: String, restoredCount: Int) {
        await afterLaunchReplay()
        let response = try await connection.call(
            Storebus_PaymentQueue_V1_PaymentQueue.restoreCompletedTransactions,
            .with {
                $0.queue = connection.configuration.queue
                if let applicationUsername { $0.applicationUsername = applicationUsername }
            }, idempotencyKey: idempotencyKey)
        return (response.restoreID, Int(response.restoredCount))
    }

    /// Restores completed purchases (SKPaymentQueue.restoreCompletedTransactions). A call whose
    /// outcome is unknown (deadline, no gateway) is made again under the same idempotency key, up to
    /// three times. When the store refuses it, or still cannot be reached, observers hear
    /// restoreCompletedTransactionsFailedWithError: cloudServiceNetworkConnectionFailed when it could
    /// not be reached, cloudServicePermissionDenied when the session or account may not restore,
    /// clientInvalid for a request it found invalid. A restore that could not be reached may still
    /// have run: its restored transactions then arrive as callbacks all the same (as any transaction
    /// may, at any time).
    public func restoreCompletedTransactions(withApplicationUsername username: String? = nil) {
        Task {
            do {
                try await underOneKey { key in _ = try await restore(applicationUsername: username, idempotencyKey: key) }
            } catch {
                // Not a queue event (the store refused or was not reached): told to observers and
                // sequences through the same serial delivery, as a StoreKit error, with position 0.
                let failure = StoreKitError(code: Self.restoreFailureCode(error), localizedDescription: "\(error)")
                deliverLocal(.restoreCompletedTransactionsFailed(restoreID: "", error: failure))
            }
        }
    }

    /// The StoreKit code a restore that failed with `error` is reported with.
    static func restoreFailureCode(_ error: any Error) -> StoreKitError.Code {
        switch (error as? StoreError)?.status {
        case .permissionDenied?, .unauthenticated?: .cloudServicePermissionDenied
        case .invalidArgument?, .failedPrecondition?, .resourceExhausted?: .clientInvalid
        case .internalError?, .unimplemented?, .unknown?: .unknown
        default: .cloudServiceNetworkConnectionFailed
        }
    }

    /// Stops observing, ends every `callbacks` sequence and closes the connection at once. Observers
    /// hear nothing once it has begun. Payments and finishes made with ``add(_:)`` and
    /// ``finishTransaction(_:)`` that are still being sent are cut off (a transaction whose finish
    /// was cut off comes back at the next launch, as with StoreKit); ``shutdown(waitingAtMost:)``
    /// lets them end first.
}
