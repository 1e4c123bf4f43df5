import Foundation
import Logging
import ServiceLifecycle
import StoreBus

/// The renewal engine: renews each auto-renewable subscription whose period has ended, on the
/// store's clock (``RenewalClock``), in rounds of at most ``TransactionStore/renewalsPerRound``
/// renewals, each round one write. At start it catches up: periods that ended while the process was
/// down are renewed then, each its own transaction.
public final class RenewalEngine: Service, Sendable {
    let store: TransactionStore
    private let rounds: DueRounds

    /// Longest the engine sleeps between looks at the next period's end: a subscription bought
    /// meanwhile may end sooner than the one it planned for (a two-second rate), and a look is one
    /// indexed read.
    public static let longestSleep = Duration.seconds(1)

    /// An engine renewing the subscriptions of `store`.
    public init(store: TransactionStore, logger: Logger) {
        self.store = store
        rounds = DueRounds(name: "Renewing subscriptions", logger: logger) {
            let next = try await store.nextRenewal()
            let soonest = Date().addingTimeInterval(Double(Self.longestSleep.components.seconds))
            guard let next, next <= Date() else {
                return DueRounds.Outcome(moreDue: false, next: min(next ?? soonest, soonest))
            }
            let round = try await store.renewDue()
            return DueRounds.Outcome(
                moreDue: round.moreDue, next: round.next.map { min($0, soonest) } ?? soonest, progressed: round.renewed > 0 || round.blocked == 0
            )
        }
    }

    /// Tells the engine to look again now.
    public func poke() {
        rounds.poke()
    }

    public func run() async throws {
        await rounds.run()
    }

    /// Renews every subscription that is due now (tests, tools).
    public func renewDue() async throws {
        while try await store.renewDue().moreDue {}
    }
}
