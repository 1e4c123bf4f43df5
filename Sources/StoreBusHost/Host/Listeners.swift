import Synchronization

/// The process's listening sockets outside the RPC server (its HTTP faces: metrics, verifyReceipt,
/// the App Store Server API, the console), which its ready line waits for: a launcher or a test
/// that sees the line may connect to any of them at once. A background service started beside the
/// line may otherwise bind its address after it (seen as a refused connection to the console's page
/// right after its ready line).
///
/// Each listener takes ``expect()`` before the process serves and calls what it returns once bound
/// (from Hummingbird's `onServerRunning`).
public final class Listeners: Sendable {
    private struct State {
        var pending = 0
        var waiter: CheckedContinuation<Void, Never>?
        var cancelled = false
    }

    private let state = Mutex(State())

    public init() {}

    /// One more listener to wait for; call the closure returned when it has bound its address (a
    /// second call changes nothing).
    public func expect() -> @Sendable () -> Void {
        state.withLock { $0.pending += 1 }
        let called = Mutex(false)
        return { [self] in
            let first = called.withLock { was in
                defer { was = true }
                return !was
            }
            guard first else { return }
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.pending -= 1
                guard state.pending == 0 else { return nil }
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    /// Returns once every listener expected has bound, or when the task is cancelled (a listener
    /// that failed to bind stops the process's services).
    public func allBound() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    guard state.pending > 0, !state.cancelled else { return true }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.cancelled = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}
