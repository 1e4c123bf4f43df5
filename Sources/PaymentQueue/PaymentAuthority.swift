import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// The sandbox payment authority: decides PURCHASING transactions when their time comes, by the
/// policy copied onto each. It starts by deciding whatever a crash left PURCHASING, so no
/// transaction stays PURCHASING across a restart.
public final class PaymentAuthority: Service, Sendable {
    let store: TransactionStore
    let logger: Logger
    private struct Bell {
        /// A poke came while nobody waited: the next wait returns at once.
        var pending = false
        /// The waiting run loop's continuation.
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let bell = Mutex(Bell())
    private let stopping = Atomic<Bool>(false)

    /// An authority deciding the transactions of `store`.
    public init(store: TransactionStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    /// Tells the authority that a transaction was added (or that it should look again).
    public func poke() {
        let waiter = bell.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
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

    /// Returns at a poke (or at once for one that came meanwhile), after `timeout`, which a timer
    /// task turns into a poke, or when the calling task is cancelled, which pokes too (`run` then
    /// ends: the wait can be an hour long when nothing is due). The wait is in place before this call
    /// suspends, so no ordering can leave it waiting past its timeout or cancellation (a timer that
    /// fires just after a real poke only makes the next wait return at once: one more look at the due
    /// transactions).
    func waitForPoke(timeout: Duration) async {
        let timer = Task { [self] in
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { poke() }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = bell.withLock { state -> Bool in
                    if state.pending {
                        state.pending = false
                        return true
                    }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            poke()
        }
        timer.cancel()
    }
}
