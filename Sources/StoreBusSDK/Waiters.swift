/// Tasks waiting for a payment queue's state to change, kept in that state under its lock and
/// resumed by whoever changes it: no polling. Each wait holds a token; a wait that ends for another
/// reason (its limit, its task cancelled) dismisses the token, so that a continuation is resumed
/// exactly once whichever comes first.
struct Waiters {
    private var nextToken: UInt64 = 0
    private var parked: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var dismissed: Set<UInt64> = []

    /// A token for one wait.
    mutating func token() -> UInt64 {
        nextToken += 1
        return nextToken
    }

    /// Parks `continuation` under `token`; false (nothing kept) when the token was dismissed.
    mutating func park(_ token: UInt64, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
        guard dismissed.remove(token) == nil else { return false }
        parked[token] = continuation
        return true
    }

    /// Ends the wait of `token`: its continuation when parked (for the caller to resume), or nil,
    /// and then a later ``park(_:_:)`` of it fails.
    mutating func dismiss(_ token: UInt64) -> CheckedContinuation<Void, Never>? {
        if let continuation = parked.removeValue(forKey: token) { return continuation }
        dismissed.insert(token)
        return nil
    }

    /// Forgets `token` once its wait is over.
    mutating func forget(_ token: UInt64) {
        dismissed.remove(token)
    }

    /// Every parked continuation (each waiter looks at the state again and parks anew if it must).
    mutating func wakeAll() -> [CheckedContinuation<Void, Never>] {
        defer { parked.removeAll() }
        return Array(parked.values)
    }
}

extension PaymentQueue {
    /// Which of the queue's waits a change concerns.
    enum WaitKind {
        /// For the launch replay to be handed over.
        case replay
        /// For the fire-and-forget calls to end.
        case pendingCalls
        /// For slow callbacks sequences to take what they were given.
        case sequenceCredit
    }

    /// Returns when `blocked` no longer holds of the state, after `limit`, or when the task is
    /// cancelled, whichever comes first. Woken by ``wake(_:)`` after every change that can end it.
    func wait(_ kind: WaitKind, until limit: ContinuousClock.Instant? = nil, while blocked: @escaping @Sendable (State) -> Bool) async {
        while !Task.isCancelled, state.withLock({ blocked($0) }) {
            if let limit, ContinuousClock.now >= limit { return }
            let token = state.withLock { $0[keyPath: Self.waiters(kind)].token() }
            let timer = limit.map { limit in
                Task { [weak self] in
                    try? await Task.sleep(until: limit, clock: .continuous)
                    self?.dismiss(kind, token)
                }
            }
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let parked = state.withLock { state in
                        // Looked at again under the lock: a change made since the check above has
                        // woken the waiters already, and this one would not hear of it.
                        blocked(state) && state[keyPath: Self.waiters(kind)].park(token, continuation)
                    }
                    if !parked { continuation.resume() }
                }
            } onCancel: {
                dismiss(kind, token)
            }
            timer?.cancel()
            state.withLock { $0[keyPath: Self.waiters(kind)].forget(token) }
        }
    }

    /// Resumes every wait of `kind`; each looks at the state again.
    func wake(_ kind: WaitKind) {
        for continuation in state.withLock({ $0[keyPath: Self.waiters(kind)].wakeAll() }) { continuation.resume() }
    }

    private func dismiss(_ kind: WaitKind, _ token: UInt64) {
        state.withLock { $0[keyPath: Self.waiters(kind)].dismiss(token) }?.resume()
    }

    private static func waiters(_ kind: WaitKind) -> WritableKeyPath<State, Waiters> {
        switch kind {
        case .replay: \.replayWaiters
        case .pendingCalls: \.pendingWaiters
        case .sequenceCredit: \.creditWaiters
        }
    }
}
