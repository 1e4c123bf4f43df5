import Foundation
import ReceiptFormat
import Logging
import ServiceLifecycle
import StoreBus
import StoreBusServer
import StoreSchema
import Synchronization

/// The position of the payment queue's log applied so far, and the calls waiting for it to pass a
/// point (read-your-writes through `min_seq`).
public final class AppliedPosition: Sendable {
    private struct State {
        var seq: UInt64 = 0
        var waiters: [(id: Int, seq: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextID = 0
    }

    private let state = Mutex(State())

    init() {}

    /// The position applied.
    public var seq: UInt64 { state.withLock { $0.seq } }

    /// Back to 0, when the log is applied again from its start.
    func reset() {
        state.withLock { $0.seq = 0 }
    }

    func advance(to seq: UInt64) {
        let ready = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.seq = max(state.seq, seq)
            var ready: [CheckedContinuation<Bool, Never>] = []
            state.waiters.removeAll { waiter in
                guard waiter.seq <= state.seq else { return false }
                ready.append(waiter.continuation)
                return true
            }
            return ready
        }
        for continuation in ready { continuation.resume(returning: true) }
    }

    /// Waits until the position reaches `seq`: true, or false after `timeout`.
    func wait(for seq: UInt64, timeout: Duration) async -> Bool {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.release(id)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let reached = state.withLock { state -> Bool in
                    if state.seq >= seq { return true }
                    state.waiters.append((id, seq, continuation))
                    return false
                }
                if reached { continuation.resume(returning: true) }
            }
        } onCancel: { [weak self] in
            self?.release(id)
        }
    }

    private func release(_ id: Int) {
        let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
        continuation?.resume(returning: false)
    }
}

/// Applies the payment queue's event log to the receipt store, from the store's own position, a
/// page per transaction, until the process stops. A log that ends before the position (the payment
/// queue's database was replaced) is applied again from its start.
struct ReceiptFollower: Service {
    let follower: EventFollower
    let store: ReceiptStore
    let applied: AppliedPosition
    let logger: Logger

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            try await follower.followAlways(as: Storebus_PaymentQueue_V1_QueueEventPage.self, start: {
                let start = try await store.position()
                applied.advance(to: start)
                return start
            }, { events in
                try await store.apply(events)
                if let last = events.last?.seq { applied.advance(to: last) }
            }, replaced: { error in
                logger.warning("The payment queue's event log was replaced; rebuilding receipts from its start", metadata: ["error": "\(error.message)"])
                try await store.forgetLog()
                applied.reset()
            })
        }
        await follower.shutdown()
    }
}
