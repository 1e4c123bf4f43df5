import StoreSchema

/// The transaction state machine, every (state, event) pair in one place, with no storage: the
/// payment queue's store fetches a transaction, asks ``step(_:_:_:)`` what an event does to it, and
/// writes that; StoreBusSDKTesting's store in memory asks the same, so the double answers as the
/// service does.
///
/// A transaction is born PURCHASING (a payment the sandbox authority decides later), FAILED (a
/// payment refused at once), RESTORED (a copy made by a restore) or PURCHASED (an interrupted
/// purchase resolved); being born is not an event here. Finishing takes it out of its queue without
/// changing its state, and a refund revokes it without changing its state either.
public enum TransactionStateMachine {
    public typealias State = Storebus_PaymentQueue_V1_TransactionState

    /// What the machine needs to know of a transaction besides its state.
    public struct Facts: Equatable, Sendable {
        /// Whether the buyer must ask (Ask to Buy): asked for by the payment, or by the sandbox
        /// policy copied onto it. The only way into DEFERRED.
        public var asksToBuy: Bool
        /// The sandbox policy copied onto the transaction when it was added.
        public var policy: Storebus_PaymentQueue_V1_PolicyMode
        /// The error a FAIL policy gives.
        public var policyError: Storebus_PaymentQueue_V1_SKError
        /// Whether it left its queue (finishTransaction).
        public var finished: Bool

        public init(asksToBuy: Bool = false, policy: Storebus_PaymentQueue_V1_PolicyMode = .approve, policyError: Storebus_PaymentQueue_V1_SKError = .unknown, finished: Bool = false) {
            self.asksToBuy = asksToBuy
            self.policy = policy
            self.policyError = policyError
            self.finished = finished
        }
    }

    /// Something that happens to a transaction.
    public enum Event: CaseIterable, Sendable {
        /// The sandbox authority decides a payment by the policy copied onto it (its delay over).
        case decide
        /// A parent approves an Ask to Buy request.
        case approve
        /// A parent declines it.
        case decline
        /// The account's purchase history is cleared.
        case clearHistory
        /// The app finishes the transaction (finishTransaction).
        case finish
        /// An admin refunds the purchase.
        case refund
    }

    /// What an event does.
    public enum Step: Equatable, Sendable {
        /// The transaction moves to `state`; `failure` is its error when that is FAILED, and
        /// `interrupted` marks a purchase that needs an action outside the app.
        case move(to: State, failure: Storebus_PaymentQueue_V1_StoreKitError? = nil, interrupted: Bool = false)
        /// The transaction leaves its queue (its state stays).
        case leaveQueue
        /// The purchase is refunded and its entitlement revoked (its state stays).
        case revoke
        /// Nothing changes, and that is the answer: the event happened already (approving an
        /// approved request, finishing a finished transaction), or does not concern this state.
        case unchanged
        /// The event cannot happen in this state: FAILED_PRECONDITION, with this predicate of the
        /// transaction (`is deferred and cannot be finished yet`).
        case refused(String)
    }

    /// The error of a declined Ask to Buy request.
    public static let declined = Storebus_PaymentQueue_V1_StoreKitError.make(.paymentCancelled, "The request to buy was declined.")
    /// The error of an interrupted purchase.
    public static let interruption = Storebus_PaymentQueue_V1_StoreKitError.make(.paymentCancelled, "The purchase was interrupted: an action outside the app is needed.")
    /// The error of a payment still waiting when its account's history is cleared.
    public static let cleared = Storebus_PaymentQueue_V1_StoreKitError.make(.paymentCancelled, "The account's purchase history was cleared before the payment was decided.")

    /// What `event` does to a transaction in `state`.
    public static func step(_ state: State, _ event: Event, _ facts: Facts = Facts()) -> Step {
        switch (state, event) {
        // The authority's decision: only a payment still PURCHASING is decided.
        case (.purchasing, .decide):
            if facts.asksToBuy || facts.policy == .askToBuy { return .move(to: .deferred) }
            switch facts.policy {
            case .fail: return .move(to: .failed, failure: .make(facts.policyError))
            case .interrupt: return .move(to: .failed, failure: interruption, interrupted: true)
            default: return .move(to: .purchased)
            }
        case (_, .decide):
            return .unchanged

        // Ask to Buy: a DEFERRED request is approved or declined once; the same answer again is OK.
        case (.deferred, .approve):
            return .move(to: .purchased)
        case (.deferred, .decline):
            return .move(to: .failed, failure: declined)
        case (.purchased, .approve) where facts.asksToBuy || facts.policy == .askToBuy,
            (.failed, .decline) where facts.asksToBuy || facts.policy == .askToBuy:
            return .unchanged
        case (_, .approve), (_, .decline):
            return .refused("is \(state), not waiting for Ask to Buy")

        // A cleared history is never charged later: payments still waiting fail.
        case (.purchasing, .clearHistory), (.deferred, .clearHistory):
            return .move(to: .failed, failure: cleared)
        case (_, .clearHistory):
            return .unchanged

        // finishTransaction: not before the payment is decided; twice is OK.
        case (_, .finish) where facts.finished:
            return .unchanged
        case (.purchasing, .finish), (.deferred, .finish):
            return .refused("is \(state) and cannot be finished yet")
        case (_, .finish):
            return .leaveQueue

        // Refunds: of purchases only; a restored copy is refunded through its original.
        case (.purchased, .refund):
            return .revoke
        case (_, .refund):
            return .refused("is \(state): only purchased transactions can be refunded, restored ones through their original")
        }
    }
}

extension TransactionStateMachine {
    /// NOT_FOUND for a transaction id nobody knows.
    public static func unknown(_ id: String) -> RPCError {
        RPCError.resource(.notFound, type: "transaction", name: id, "no transaction \(RPCError.echo(id))")
    }

    /// The error of a refused step of transaction `id`.
    public static func refusal(_ id: String, _ predicate: String) -> RPCError {
        RPCError(.failedPrecondition, "transaction \(RPCError.echo(id)) \(predicate)")
    }
}
