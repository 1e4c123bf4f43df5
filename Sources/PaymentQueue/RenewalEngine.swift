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

    /// The renewals a second a backlog is worked through at by default (``init(store:renewalsPerSecond:logger:)``).
    public static let defaultRenewalsPerSecond = 250

    /// An engine renewing the subscriptions of `store`, at most `renewalsPerSecond` a second when a
    /// backlog has come due (0: as fast as rounds go): each round of renewals is followed by a pause
    /// long enough to keep to that rate, so that the work a renewal causes (its event, a receipt
    /// entry, a signed notification) leaves room for purchases.
    public init(store: TransactionStore, renewalsPerSecond: Int = RenewalEngine.defaultRenewalsPerSecond, logger: Logger) {
        self.store = store
        let perRound = renewalsPerSecond > 0 ? min(TransactionStore.renewalsPerRound, max(1, renewalsPerSecond / 10)) : TransactionStore.renewalsPerRound
        rounds = DueRounds(name: "Renewing subscriptions", logger: logger) {
            let next = try await store.nextRenewal()
            let soonest = Date().addingTimeInterval(Double(Self.longestSleep.components.seconds))
            guard let next, next <= Date() else {
                return DueRounds.Outcome(moreDue: false, next: min(next ?? soonest, soonest))
            }
            let started = ContinuousClock.now
            let round = try await store.renewDue(limit: perRound)
            if renewalsPerSecond > 0, round.renewed > 0 {
                // The round's share of a second at the rate, less what the round itself took.
                let share = Duration.milliseconds(Int64(round.renewed) * 1000 / Int64(renewalsPerSecond))
                let left = share - (ContinuousClock.now - started)
                if left > .zero { try await Task.sleep(for: left) }
            }
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
