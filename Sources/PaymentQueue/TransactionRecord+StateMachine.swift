import StoreBus
import StoreSchema

extension TransactionRecord {
    /// What the state machine needs to know of the transaction.
    var machineFacts: TransactionStateMachine.Facts {
        .init(asksToBuy: askToBuy, policy: policyMode, policyError: policyError, finished: finished)
    }

    /// Applies a step that moves the transaction (in memory; see ``saveDecision(_:)``). Other steps
    /// change nothing here.
    mutating func apply(_ step: TransactionStateMachine.Step, at ms: Int64) {
        guard case .move(let state, let failure, let interrupted) = step else { return }
        if let failure {
            setFailed(failure, at: ms, interrupted: interrupted)
        } else {
            setState(state, at: ms)
        }
    }
}
