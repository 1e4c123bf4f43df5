import Foundation
import Logging
import ServiceLifecycle
import StoreBus

/// The sandbox payment authority: decides PURCHASING transactions when their time comes, by the
/// policy copied onto each. It starts by deciding whatever a crash left PURCHASING, so no
/// transaction stays PURCHASING across a restart.
public final class PaymentAuthority: Service, Sendable {
    let store: TransactionStore
    private let rounds: DueRounds

    /// An authority deciding the transactions of `store`.
    public init(store: TransactionStore, logger: Logger) {
        self.store = store
        rounds = DueRounds(name: "Deciding transactions", logger: logger) {
            let round = try await store.decideDue()
            return DueRounds.Outcome(moreDue: round.moreDue, next: round.next)
        }
    }

    /// Tells the authority that a transaction was added (or that it should look again).
    public func poke() {
        rounds.poke()
    }

    public func run() async throws {
        await rounds.run()
    }

    /// Returns at a poke, after `timeout`, or when the calling task is cancelled.
    func waitForPoke(timeout: Duration) async {
        await rounds.waitForPoke(timeout: timeout)
    }

    /// Decides every PURCHASING transaction that is due.
    public func decideDue() async throws {
        while try await store.decideDue().moreDue {}
    }
}
