import StoreBus
import StoreSchema
import Testing

@testable import PaymentQueue

/// The transaction state machine as a table: every (state, event) pair, with the facts that change
/// an answer, without a database.
@Suite("Transaction state machine")
struct TransactionStateMachineTests {
    typealias Machine = TransactionStateMachine
    typealias Facts = TransactionStateMachine.Facts

    static let states: [Storebus_PaymentQueue_V1_TransactionState] = [.purchasing, .purchased, .failed, .restored, .deferred]
    static let asked = Facts(asksToBuy: true)
    static let finished = Facts(finished: true)

    /// The table with plain facts (approve policy, no Ask to Buy, unfinished): one row per pair.
    static let plain: [Storebus_PaymentQueue_V1_TransactionState: [Machine.Event: Machine.Step]] = [
        .purchasing: [
            .decide: .move(to: .purchased), .approve: .refused("is purchasing, not waiting for Ask to Buy"),
            .decline: .refused("is purchasing, not waiting for Ask to Buy"), .clearHistory: .move(to: .failed, failure: Machine.cleared),
            .finish: .refused("is purchasing and cannot be finished yet"),
            .refund: .refused("is purchasing: only purchased transactions can be refunded, restored ones through their original")
        ],
        .purchased: [
            .decide: .unchanged, .approve: .refused("is purchased, not waiting for Ask to Buy"),
            .decline: .refused("is purchased, not waiting for Ask to Buy"), .clearHistory: .unchanged, .finish: .leaveQueue, .refund: .revoke
        ],
        .failed: [
            .decide: .unchanged, .approve: .refused("is failed, not waiting for Ask to Buy"),
            .decline: .refused("is failed, not waiting for Ask to Buy"), .clearHistory: .unchanged, .finish: .leaveQueue,
            .refund: .refused("is failed: only purchased transactions can be refunded, restored ones through their original")
        ],
        .restored: [
            .decide: .unchanged, .approve: .refused("is restored, not waiting for Ask to Buy"),
            .decline: .refused("is restored, not waiting for Ask to Buy"), .clearHistory: .unchanged, .finish: .leaveQueue,
            .refund: .refused("is restored: only purchased transactions can be refunded, restored ones through their original")
        ],
        .deferred: [
            .decide: .unchanged, .approve: .move(to: .purchased), .decline: .move(to: .failed, failure: Machine.declined),
            .clearHistory: .move(to: .failed, failure: Machine.cleared), .finish: .refused("is deferred and cannot be finished yet"),
            .refund: .refused("is deferred: only purchased transactions can be refunded, restored ones through their original")
        ]
    ]

    @Test("every state and event, with plain facts", arguments: states)
    func everyPair(state: Storebus_PaymentQueue_V1_TransactionState) throws {
        let row = try #require(Self.plain[state])
        #expect(Set(row.keys) == Set(Machine.Event.allCases), "a row for every event")
        for event in Machine.Event.allCases {
            #expect(Machine.step(state, event) == row[event], "\(state) \(event)")
        }
    }

    @Test("the decision follows the policy copied onto the payment, and Ask to Buy from the payment or the policy")
    func decisions() {
        #expect(Machine.step(.purchasing, .decide, Facts(policy: .approve)) == .move(to: .purchased))
        #expect(Machine.step(.purchasing, .decide, Facts(policy: .unspecified)) == .move(to: .purchased))
        #expect(Machine.step(.purchasing, .decide, Facts(policy: .fail, policyError: .paymentInvalid)) == .move(to: .failed, failure: .make(.paymentInvalid)))
        #expect(Machine.step(.purchasing, .decide, Facts(policy: .interrupt)) == .move(to: .failed, failure: Machine.interruption, interrupted: true))
        #expect(Machine.step(.purchasing, .decide, Facts(policy: .askToBuy)) == .move(to: .deferred))
        // The payment's own Ask to Buy wins over any policy
        for policy: Storebus_PaymentQueue_V1_PolicyMode in [.approve, .fail, .interrupt, .askToBuy] {
            #expect(Machine.step(.purchasing, .decide, Facts(asksToBuy: true, policy: policy)) == .move(to: .deferred), "\(policy)")
        }
    }

    @Test("an answered Ask to Buy request answered the same way again changes nothing; the other answer is refused")
    func askToBuyAnsweredTwice() {
        for facts in [Self.asked, Facts(policy: .askToBuy)] {
            #expect(Machine.step(.purchased, .approve, facts) == .unchanged)
            #expect(Machine.step(.failed, .decline, facts) == .unchanged)
            #expect(Machine.step(.purchased, .decline, facts) == .refused("is purchased, not waiting for Ask to Buy"))
            #expect(Machine.step(.failed, .approve, facts) == .refused("is failed, not waiting for Ask to Buy"))
            #expect(Machine.step(.restored, .approve, facts) == .refused("is restored, not waiting for Ask to Buy"))
        }
    }

    @Test("a finished transaction finished again changes nothing, whatever its state", arguments: states)
    func finishedTwice(state: Storebus_PaymentQueue_V1_TransactionState) {
        #expect(Machine.step(state, .finish, Self.finished) == .unchanged)
        // Finishing does not change what the other events do
        for event in Machine.Event.allCases where event != .finish {
            #expect(Machine.step(state, event, Self.finished) == Machine.step(state, event), "\(state) \(event)")
        }
    }

    @Test("applying a move sets the state, the error and the interruption on the record; other steps change nothing")
    func applyingSteps() {
        var record = TransactionRecord(
            id: "1", shard: 0,
            queue: .with {
                $0.appBundleID = "a"; $0.accountID = "b"; $0.deviceID = "c"
            }, state: .purchasing,
            payment: .with {
                $0.productIdentifier = "p"; $0.quantity = 1
            }, productType: .consumable, storefront: "USA",
            price: "0.99", currency: "USD", error: nil, policy: .with { $0.mode = .interrupt }, decideAtMS: 0, nowMS: 0, downloads: "[]"
        )
        record.decide(at: 5)
        #expect(record.state == .failed && record.interrupted && record.dateMS == 5)
        #expect(record.errorCode == Storebus_PaymentQueue_V1_SKError.paymentCancelled.rawValue)
        record.apply(.unchanged, at: 9)
        record.apply(.leaveQueue, at: 9)
        #expect(record.state == .failed && record.dateMS == 5)
    }
}
