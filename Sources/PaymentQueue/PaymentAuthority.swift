import Foundation
import Logging
import ServiceLifecycle
import StoreBus
import Synchronization

/// The sandbox payment authority: decides PURCHASING transactions when their time comes, by the
/// policy copied onto each. It starts by deciding whatever a crash left PURCHASING, so no
/// transaction stays PURCHASING across a restart.
public final class PaymentAuthority: Service, Sendable {
    let store: TransactionStore
    let logger: Logger
    /// The pokes so far, counted; the run loop waits for one beyond those it has seen.
    private let pokes = PositionWaiter<PokeCount>()
    private enum PokeCount: Hashable { case pokes }
    /// The pokes the run loop has seen (touched by the run loop only).
    private let seen = Atomic<UInt64>(0)
    private let stopping = Atomic<Bool>(false)

    /// An authority deciding the transactions of `store`.
    public init(store: TransactionStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Tells the authority that a transaction was added (or that it should look again).
    public func poke() {
        pokes.bump(.pokes)
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            while !stopping.load(ordering: .acquiring) && !Task.isCancelled {
                let round: (decided: Int, moreDue: Bool, next: Date?)
                do {
                    round = try await store.decideDue()
                } catch {
                    logger.error("Deciding transactions failed; retrying", metadata: ["error": "\(error)"])
                    try? await Task.sleep(for: .milliseconds(100))
                    continue
                }
                if round.moreDue { continue }
                let seconds = round.next.map { max(0, $0.timeIntervalSinceNow) } ?? 3600
                await waitForPoke(timeout: .milliseconds(Int64(seconds * 1000) + 1))
            }
        } onGracefulShutdown: { [self] in
            stopping.store(true, ordering: .releasing)
            poke()
        }
    }

    /// Decides every PURCHASING transaction that is due.
    public func decideDue() async throws {
        while try await store.decideDue().moreDue {}
    }

    /// Returns at a poke (or at once for one that came since the last wait), after `timeout`, or when
    /// the calling task is cancelled (`run` then ends: the wait can be an hour long when nothing is due).
    func waitForPoke(timeout: Duration) async {
        let last = seen.load(ordering: .relaxed)
        _ = await pokes.wait(.pokes, beyond: last, timeout: timeout)
        seen.store(pokes.position(.pokes), ordering: .relaxed)
    }
}
