import StoreBus
import Synchronization
import ZeroMQ

/// Doorbells of every key of one log, for servers that park many readers, each waiting on one key
/// (the gateway's observer calls, one per device).
///
/// A reader takes a ticket *before* it reads the log and waits on it only if the read came back
/// empty: a doorbell that rings between the read and the wait is then not missed. Doorbells may
/// still be lost on the way, so a reader never waits longer than it can afford to poll.
/// The board remembers nothing about keys nobody waits on, so its memory follows the waiters.
public final class DoorbellBoard: Sendable {
    /// A reader's place in line for one key.
    public struct Ticket: Sendable, Hashable {
        fileprivate let id: UInt64
        fileprivate let key: String
    }

    private struct Waiter {
        var beyond: UInt64
        var rung = false
        var continuation: CheckedContinuation<Void, Never>?
        /// The wait's timeout, a timer of the board's reactor (set on its loop once the wait began).
        var timer: TimerID?
    }

    private struct State {
        var waiters: [String: [UInt64: Waiter]] = [:]
        var nextID: UInt64 = 0
        var closed = false
    }

    private let reactor: Reactor
    /// Whether the reactor is the board's own (stopped by ``shutdown()``) or shared.
    private let ownsReactor: Bool
    private let closeSubscription: LoopBound<() -> Void>?
    private let state = Mutex(State())

    /// Subscribes to every key of `log` on the publishers at `endpoints`. `heard`, when given, sees
    /// each doorbell on the subscription's thread before anyone waiting on its key is woken;
    /// `disconnected`, when given, hears there that a publisher's connection ended.
    ///
    /// With a `reactor` (a service host's), the subscription lives on it and its owner starts and
    /// stops it: a waiter resumed by a doorbell then continues on that thread, if it prefers it (an
    /// RPC handler does), without a hop. Without one, the board runs a reactor of its own.
    public init(
        endpoints: [String], log: String, context: ZeroMQ.Context, reactor shared: Reactor? = nil,
        heard: (@Sendable (Doorbell) -> Void)? = nil, disconnected: (@Sendable () -> Void)? = nil
    ) throws {
        let reactor = shared ?? Reactor(name: "sb-doorbell-brd", context: context)
        self.reactor = reactor
        ownsReactor = shared == nil
        if !endpoints.isEmpty {
            // The closure is built before `self` is complete: it reaches the board through a box
            // filled in below.
            let board = WeakBox<DoorbellBoard>()
            closeSubscription = try DoorbellSubscription.start(
                endpoints: endpoints, prefixes: [Doorbell.topicPrefix(log: log)], context: context, reactor: reactor,
                startReactor: shared == nil,
                heard: { doorbell in
                    heard?(doorbell)
                    board.value?.rang(key: doorbell.key, position: doorbell.keySeq)
                },
                disconnected: disconnected
            )
            board.value = self
        } else {
            closeSubscription = nil
            if shared == nil { reactor.start() }
        }
    }

    /// Takes a ticket that a doorbell of `key` past `position` will ring.
    public func ticket(key: String, beyond position: UInt64) -> Ticket {
        state.withLock { state in
            state.nextID += 1
            state.waiters[key, default: [:]][state.nextID] = Waiter(beyond: position, rung: state.closed)
            return Ticket(id: state.nextID, key: key)
        }
    }

    /// Returns when the ticket's doorbell has rung (maybe already), after `timeout`, or when the
    /// calling task is cancelled. The ticket is used up either way.
    ///
    /// The timeout is a timer of the board's reactor, the loop that rings the doorbells, so a wait
    /// costs no thread of its own: each parked observer call of the gateway used to sleep in a task
    /// of its own (a dispatch timer, and a pool thread woken to start it and again to cancel it),
    /// which took a third of the gateway's CPU once every device kept a call parked, as the SDK does.
    public func wait(_ ticket: Ticket, timeout: Duration) async {
        let deadline = ContinuousClock.now + timeout
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { state -> Bool in
                    guard var waiter = state.waiters[ticket.key]?[ticket.id], !waiter.rung else { return true }
                    waiter.continuation = continuation
                    state.waiters[ticket.key]?[ticket.id] = waiter
                    return false
                }
                if ready {
                    release(ticket)
                    continuation.resume()
                } else if !reactor.execute({ [weak self] in self?.arm(ticket, deadline: deadline) }) {
                    // The reactor has stopped: no timer could end the wait, and no doorbell ring.
                    release(ticket)
                }
            }
        } onCancel: {
            release(ticket)
        }
    }

    /// On the loop: sets the timer that ends a wait still going on at `deadline`.
    private func arm(_ ticket: Ticket, deadline: ContinuousClock.Instant) {
        state.withLock { state in
            guard state.waiters[ticket.key]?[ticket.id]?.continuation != nil else { return }
            state.waiters[ticket.key]?[ticket.id]?.timer = reactor.schedule(at: deadline) { [weak self] in
                self?.release(ticket)
            }
        }
    }

    /// Cancels a wait's timer, on the loop (a timer that has fired meanwhile is left alone). Called
    /// on the loop itself, the job runs in the loop's current turn.
    private func disarm(_ timer: TimerID?) {
        guard let timer else { return }
        _ = reactor.execute { [reactor] in reactor.cancel(timer) }
    }

    /// Gives a ticket back unused (the read found something).
    public func cancel(_ ticket: Ticket) {
        release(ticket)
    }

    /// Readers currently holding tickets (for statistics and tests).
    public var waiting: Int {
        state.withLock { $0.waiters.values.reduce(0) { $0 + $1.count } }
    }

    /// On the loop (the subscription's handler): wakes the waiters of `key` behind `position`.
    private func rang(key: String, position: UInt64) {
        let ready = state.withLock { state -> [Waiter] in
            guard var waiters = state.waiters[key] else { return [] }
            var ready: [Waiter] = []
            for (id, var waiter) in waiters where !waiter.rung && position > waiter.beyond {
                waiter.rung = true
                if waiter.continuation != nil {
                    ready.append(waiter)
                    waiters[id] = nil
                } else {
                    waiters[id] = waiter
                }
            }
            state.waiters[key] = waiters.isEmpty ? nil : waiters
            return ready
        }
        for waiter in ready {
            disarm(waiter.timer)
            waiter.continuation?.resume()
        }
    }

    private func release(_ ticket: Ticket) {
        let waiter = state.withLock { state -> Waiter? in
            guard let waiter = state.waiters[ticket.key]?.removeValue(forKey: ticket.id) else { return nil }
            if state.waiters[ticket.key]?.isEmpty == true { state.waiters[ticket.key] = nil }
            return waiter
        }
        disarm(waiter?.timer)
        waiter?.continuation?.resume()
    }

    /// Wakes every waiter and closes the subscription.
    public func shutdown() async {
        let waiters = state.withLock { state -> [Waiter] in
            state.closed = true
            let all = state.waiters.values.flatMap(\.values)
            state.waiters.removeAll()
            return all
        }
        for waiter in waiters {
            disarm(waiter.timer)
            waiter.continuation?.resume()
        }
        guard ownsReactor else {
            if let closeSubscription { _ = await reactor.perform { closeSubscription.value() } }
            return
        }
        reactor.stop()
        await reactor.join()
    }
}

/// A weak reference that can be filled in after the closure holding it was made.
private final class WeakBox<Value: AnyObject & Sendable>: Sendable {
    // Set once, in the board's init; read on the subscription's thread.
    private let storage = Mutex<Weak?>(nil)
    private struct Weak: @unchecked Sendable {
        // Invariant for @unchecked Sendable: Value is Sendable; a weak reference to it is too.
        weak var value: Value?
    }

    var value: Value? {
        get { storage.withLock { $0?.value } }
        set { storage.withLock { $0 = Weak(value: newValue) } }
    }
}
