import Synchronization

/// Positions that only grow, one per key (a log, a queue, a counter of pokes), and the tasks waiting
/// for one to reach a point: StoreBus's one "wait until position ≥ n" (read-your-writes on a
/// follower, a doorbell beyond a position, a poke since the last look).
///
/// A wait ends with true once its key's position reaches the target (at once when it already has),
/// and with false at its timeout, when its task is cancelled, or when the waiter is closed; it ends
/// exactly once, whichever comes first, however they interleave: a cancellation or a timeout that
/// comes before the wait is registered ends it as soon as it registers. Nothing polls.
///
/// Its hot paths (``advance(_:to:)``, ``bump(_:)``, ``position(_:)``: every doorbell a follower hears)
/// are inlinable, so that a module using it with its own key gets them specialized: called across
/// modules unspecialized, each call looked up the dictionaries' generic metadata at run time, a
/// tenth of the download service's CPU per purchase.
public final class PositionWaiter<Key: Hashable & Sendable>: Sendable {
    @usableFromInline
    struct Waiter {
        @usableFromInline let target: UInt64
        @usableFromInline let continuation: CheckedContinuation<Bool, Never>
    }

    @usableFromInline
    struct State {
        @usableFromInline var positions: [Key: UInt64] = [:]
        @usableFromInline var waiters: [Key: [UInt64: Waiter]] = [:]
        /// Waits issued and not yet registered, with their key.
        var pending: [UInt64: Key] = [:]
        /// Registered waits' keys.
        @usableFromInline var registered: [UInt64: Key] = [:]
        /// Waits ended (timeout, cancellation) before they registered.
        var ended: Set<UInt64> = []
        var nextID: UInt64 = 0
        var closed = false
        /// What ``gather(_:upTo:)`` waits on, made by its first call (until then no registration
        /// pays for it): rung with each key's count of registrations since, in ``registrations``.
        var bell: PositionWaiter<Key>?
        var registrations: [Key: UInt64] = [:]
    }

    @usableFromInline let state = Mutex(State())

    /// A waiter with every position at 0.
    public init() {}

    /// The position of `key` (0 until advanced).
    @inlinable
    public func position(_ key: Key) -> UInt64 {
        state.withLock { $0.positions[key] ?? 0 }
    }

    /// Moves `key` to `position` unless it is already there or beyond, and ends the waits it reaches.
    @inlinable
    public func advance(_ key: Key, to position: UInt64) {
        let ready = state.withLock { Self.move(&$0, key, to: position) }
        for continuation in ready { continuation.resume(returning: true) }
    }

    /// Moves `key` one step on and returns its new position.
    @inlinable @discardableResult
    public func bump(_ key: Key) -> UInt64 {
        let (next, ready) = state.withLock { state in
            let next = (state.positions[key] ?? 0) + 1
            return (next, Self.move(&state, key, to: next))
        }
        for continuation in ready { continuation.resume(returning: true) }
        return next
    }

    /// Moves `key` to `position` at least; the continuations of the waits it reaches.
    @inlinable
    static func move(_ state: inout State, _ key: Key, to position: UInt64) -> [CheckedContinuation<Bool, Never>] {
        let current = max(state.positions[key] ?? 0, position)
        state.positions[key] = current
        guard var waiting = state.waiters[key] else { return [] }
        var ready: [CheckedContinuation<Bool, Never>] = []
        for (id, waiter) in waiting where waiter.target <= current {
            ready.append(waiter.continuation)
            waiting.removeValue(forKey: id)
            state.registered.removeValue(forKey: id)
        }
        state.waiters[key] = waiting.isEmpty ? nil : waiting
        return ready
    }

    /// Puts `key` back to 0 (its log is followed again from the start). Waits stay waiting.
    public func reset(_ key: Key) {
        state.withLock { $0.positions[key] = 0 }
    }

    /// Waits until `key` reaches `target`: true, or false after `timeout` (nil: none), on
    /// cancellation, or when closed.
    public func wait(_ key: Key, reaching target: UInt64, timeout: Duration?) async -> Bool {
        let id: UInt64
        switch state.withLock({ state -> UInt64? in
            if (state.positions[key] ?? 0) >= target { return nil }
            state.nextID += 1
            state.pending[state.nextID] = key
            return state.nextID
        }) {
        case nil: return true
        case let issued?: id = issued
        }
        let timer = timeout.map { timeout in
            Task { [weak self] in
                try? await Task.sleep(for: timeout)
                if !Task.isCancelled { self?.end(id) }
            }
        }
        defer { timer?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let outcome = state.withLock { state -> Registration in
                    state.pending.removeValue(forKey: id)
                    if state.ended.remove(id) != nil || state.closed { return .ended(false) }
                    if (state.positions[key] ?? 0) >= target { return .ended(true) }
                    state.waiters[key, default: [:]][id] = Waiter(target: target, continuation: continuation)
                    state.registered[id] = key
                    guard let bell = state.bell else { return .waiting(ring: nil) }
                    let count = (state.registrations[key] ?? 0) &+ 1
                    state.registrations[key] = count
                    return .waiting(ring: (bell, count))
                }
                switch outcome {
                case .ended(let value): continuation.resume(returning: value)
                case .waiting(let ring): if let (bell, count) = ring { bell.advance(key, to: count) }
                }
            }
        } onCancel: { [weak self] in
            self?.end(id)
        }
    }

    /// What registering a wait came to: ended at once with its outcome, or waiting, with the bell
    /// to ring and the key's count of registrations so far when something gathers.
    private enum Registration {
        case ended(Bool)
        case waiting(ring: (PositionWaiter<Key>, UInt64)?)
    }

    /// Returns after `window`, or as soon as a wait for `key` is registered that its position has
    /// not reached (at once when one is already): a follower's batch window, which gathers events
    /// into one read while nobody waits for them, and ends when a call starts waiting for its
    /// effects (read-your-writes is never held up by the window). True when a wait ended it (or
    /// one waited already); false when the window ran out, or at cancellation or shutdown.
    @discardableResult
    public func gather(_ key: Key, upTo window: Duration) async -> Bool {
        let gathering = state.withLock { state -> Gathering in
            if state.closed { return .closed }
            if state.waiters[key] != nil { return .waited }
            let bell = state.bell ?? PositionWaiter()
            state.bell = bell
            return .window(bell: bell, registrations: state.registrations[key] ?? 0)
        }
        switch gathering {
        case .closed: return false
        case .waited: return true
        case .window(let bell, let count):
            // A registration after the count was read moves the bell beyond it, before or during this wait.
            return await bell.wait(key, beyond: count, timeout: window)
        }
    }

    /// How a gather begins: at once (closed, or a wait already registered), or a window on the bell.
    private enum Gathering {
        case closed
        case waited
        case window(bell: PositionWaiter<Key>, registrations: UInt64)
    }

    /// Waits until `key` is beyond `position` (reaches `position + 1`).
    public func wait(_ key: Key, beyond position: UInt64, timeout: Duration?) async -> Bool {
        await wait(key, reaching: position + 1, timeout: timeout)
    }

    /// Ends every wait with false, and every later one at once (shutdown).
    public func close() {
        let (all, bell) = state.withLock { state -> ([CheckedContinuation<Bool, Never>], PositionWaiter<Key>?) in
            state.closed = true
            let all = state.waiters.values.flatMap { $0.values.map(\.continuation) }
            state.waiters.removeAll()
            state.registered.removeAll()
            return (all, state.bell)
        }
        for continuation in all { continuation.resume(returning: false) }
        bell?.close()
    }

    /// Ends wait `id` with false: now if it waits, when it registers if it has not yet.
    private func end(_ id: UInt64) {
        let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            if state.pending[id] != nil {
                state.ended.insert(id)
                return nil
            }
            guard let key = state.registered.removeValue(forKey: id), var waiting = state.waiters[key],
                let waiter = waiting.removeValue(forKey: id)
            else { return nil }
            state.waiters[key] = waiting.isEmpty ? nil : waiting
            return waiter.continuation
        }
        continuation?.resume(returning: false)
    }

    /// How many waits are registered (for tests).
    public var waitingCount: Int {
        state.withLock { $0.waiters.values.reduce(0) { $0 + $1.count } }
    }
}
