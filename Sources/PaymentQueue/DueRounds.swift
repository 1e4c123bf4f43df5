import Foundation
import Logging
import ServiceLifecycle
import StoreBus
import Synchronization

/// A background loop that does whatever work has come due, in rounds, and sleeps until the next is
/// due or something pokes it: the payment authority's decisions, the renewal engine's renewals.
///
/// A round does a bounded amount of work in one write and says whether more is due already and
/// when the next work comes due. A round that fails is retried after a pause; so is a round that
/// found work due but could do none of it (the work waits on something else: a queue with no room).
final class DueRounds: Sendable {
    /// One round's outcome.
    struct Outcome: Sendable {
        /// Whether work is already due beyond what the round did: the next round starts at once.
        var moreDue: Bool
        /// When the next work comes due, if any is planned.
        var next: Date?
        /// Whether the round did anything (a round that did nothing while work is due pauses).
        var progressed: Bool = true
    }

    let name: String
    let logger: Logger
    let round: @Sendable () async throws -> Outcome
    /// The pokes so far, counted; the loop waits for one beyond those it has seen.
    private let pokes = PositionWaiter<PokeCount>()
    private enum PokeCount: Hashable { case pokes }
    /// The pokes the loop has seen (touched by the loop only).
    private let seen = Atomic<UInt64>(0)
    private let stopping = Atomic<Bool>(false)

    /// How long a round that failed, or made no progress on due work, waits before the next.
    static let pause = Duration.milliseconds(500)

    /// A loop of `round`s; `name` says what it does, in logs.
    init(name: String, logger: Logger, round: @escaping @Sendable () async throws -> Outcome) {
        self.name = name
        self.logger = logger
        self.round = round
    }

    /// Tells the loop that new work may be due (or due sooner than it planned).
    func poke() {
        pokes.bump(.pokes)
    }

    /// Runs rounds until graceful shutdown or cancellation.
    func run() async {
        await withGracefulShutdownHandler {
            while !stopping.load(ordering: .acquiring) && !Task.isCancelled {
                let outcome: Outcome
                do {
                    outcome = try await round()
                } catch {
                    logger.error("\(name) failed; retrying", metadata: ["error": "\(error)"])
                    await waitForPoke(timeout: Self.pause)
                    continue
                }
                if outcome.moreDue && outcome.progressed { continue }
                var wait = outcome.next.map { Duration.milliseconds(Int64(max(0, $0.timeIntervalSinceNow) * 1000) + 1) } ?? .seconds(3600)
                if !outcome.progressed { wait = max(wait, Self.pause) }
                await waitForPoke(timeout: wait)
            }
        } onGracefulShutdown: { [self] in
            stopping.store(true, ordering: .releasing)
            poke()
        }
    }

    /// Returns at a poke (or at once for one that came since the last wait), after `timeout`, or when
    /// the calling task is cancelled (the run then ends: the wait can be an hour long when nothing is due).
    func waitForPoke(timeout: Duration) async {
        let last = seen.load(ordering: .relaxed)
        _ = await pokes.wait(.pokes, beyond: last, timeout: timeout)
        seen.store(pokes.position(.pokes), ordering: .relaxed)
    }
}
