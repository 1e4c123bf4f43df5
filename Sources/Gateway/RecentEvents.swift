import StoreBus
import StoreBusServer
import StoreSchema
import Synchronization

/// The payment queue's newest events as its doorbells carried them, so that Observe can answer
/// without reading the log.
///
/// It keeps, per queue, one run of consecutive events (by key seq), and only what doorbells brought,
/// in the order they came. Doorbells carry the whole log's seq too, so a lost doorbell shows: the next
/// seq is not one more than the last. Everything kept is then dropped, because any run may miss an
/// event, and Observe reads the log until runs grow again. A doorbell without its event (too large to
/// carry) ends its queue's run the same way. It is a cache only: a queue it knows nothing about, or a
/// position before what it keeps, is read from the log as before. And the log is the truth: when the
/// connection to the payment queue's doorbells ends (the process stopped; it may come back on another
/// database), when a read shows a queue's head below what is kept here, or when a doorbell comes at a
/// position heard before with other content, everything kept is dropped.
///
/// Memory is bounded by the events' JSON size (oldest out first) and by a number of events per queue.
public final class RecentEvents: Sendable {
    /// What is known after a queue position.
    enum Lookup: Equatable {
        /// The callbacks after the position (consecutive, at most the limit asked for), each as
        /// ObserverEvent JSON, and the newest position known for the queue.
        case events([[UInt8]], newest: UInt64)
        /// Every event of the queue heard since the runs were last dropped is at or before the
        /// position. A newer one may still be on its way, or its doorbell lost: a caller that waits
        /// for a doorbell may skip reading the log first, but must read it when the wait times out.
        case caughtUp
        /// Nothing is known about what follows the position: read the log.
        case unknown
    }

    /// One queue's consecutive events.
    private struct Run {
        /// Key seq of `events[0]`.
        var first: UInt64
        /// Each event's callback, as ObserverEvent JSON.
        var events: [[UInt8]] = []
        var sizes: [Int] = []
        /// Each event's seq in the whole log: with its callback, what tells a doorbell heard twice
        /// from a new one at a position reused by a new log.
        var seqs: [UInt64] = []

        var last: UInt64 { first + UInt64(events.count) - 1 }

        mutating func dropFirst() -> Int {
            first += 1
            events.removeFirst()
            seqs.removeFirst()
            return sizes.removeFirst()
        }

        /// Whether the run holds this event: at this key seq, at this seq, with this callback.
        func holds(keySeq: UInt64, seq: UInt64, callback: [UInt8]?) -> Bool {
            guard !events.isEmpty, first <= keySeq, keySeq <= last else { return false }
            let index = Int(keySeq - first)
            return seqs[index] == seq && events[index] == callback
        }
    }

    private struct State {
        var runs: [String: Run] = [:]
        /// Every event kept, oldest first, as (queue, key seq); entries of runs since dropped are
        /// skipped when they come up.
        var order: [(key: String, keySeq: UInt64)] = []
        var orderStart = 0
        var bytes = 0
        /// Events kept in all runs.
        var live = 0
        /// Seq of the last doorbell heard (0: none yet).
        var lastSeq: UInt64 = 0

        mutating func dropAll() {
            runs.removeAll()
            order.removeAll()
            orderStart = 0
            bytes = 0
            live = 0
        }

        /// Removes the queue's run, if any.
        mutating func removeRun(_ key: String) {
            guard let run = runs.removeValue(forKey: key) else { return }
            bytes -= run.sizes.reduce(0, +)
            live -= run.events.count
        }
    }

    /// Most bytes of event JSON kept.
    let capacityBytes: Int
    /// Most events kept per queue (a client far behind reads the log).
    let eventsPerQueue: Int
    private let state = Mutex(State())

    /// An empty cache keeping at most `capacityBytes` of event JSON and `eventsPerQueue` per queue.
    public init(capacityBytes: Int = 8 * 1024 * 1024, eventsPerQueue: Int = 128) {
        self.capacityBytes = capacityBytes
        self.eventsPerQueue = max(1, eventsPerQueue)
    }

    /// Takes in a doorbell of the payment queue's log (on the subscription's thread).
    public func heard(_ doorbell: Doorbell) {
        // Made once, however many calls read it: answers are then put together from these bytes.
        let callback = doorbell.event.flatMap {
            ObserverEventJSON.callback(record: $0, seq: doorbell.seq, key: doorbell.key, keySeq: doorbell.keySeq)
        }
        let size = doorbell.event?.count ?? 0
        state.withLock { state in
            if state.lastSeq != 0 && doorbell.seq <= state.lastSeq {
                // Heard before (a publisher reached on two endpoints), or the log started over (its
                // database was replaced): only a run already holding this very event tells them apart.
                if state.runs[doorbell.key]?.holds(keySeq: doorbell.keySeq, seq: doorbell.seq, callback: callback) == true { return }
                state.dropAll()
            } else if state.lastSeq != 0 && doorbell.seq != state.lastSeq + 1 {
                state.dropAll() // doorbells were lost: any run may miss an event
            }
            state.lastSeq = doorbell.seq
            guard let callback else {
                // Not carried: this queue's run cannot go on past it.
                state.removeRun(doorbell.key)
                return
            }
            // Taken out of the dictionary while it grows, so that its arrays are not copied.
            var run = Run(first: doorbell.keySeq)
            if let kept = state.runs[doorbell.key], !kept.events.isEmpty, kept.last + 1 == doorbell.keySeq {
                run = state.runs.removeValue(forKey: doorbell.key)!
            } else {
                state.removeRun(doorbell.key)
            }
            run.events.append(callback)
            run.sizes.append(size)
            run.seqs.append(doorbell.seq)
            state.bytes += size
            state.live += 1
            if run.events.count > eventsPerQueue {
                state.bytes -= run.dropFirst()
                state.live -= 1
            }
            state.runs[doorbell.key] = run
            state.order.append((doorbell.key, doorbell.keySeq))
            evict(&state)
        }
    }

    /// What is known after `position` in the queue `key`, at most `limit` callbacks.
    func lookup(key: String, after position: UInt64, limit: Int) -> Lookup {
        state.withLock { state in
            guard let run = state.runs[key], !run.events.isEmpty else { return .unknown }
            if position == run.last { return .caughtUp }
            // `position < run.last` first: a client's position can be as large as UInt64 goes.
            guard position < run.last, run.first <= position + 1 else { return .unknown }
            let start = Int(position + 1 - run.first)
            let end = min(run.events.count, start + max(1, limit))
            return .events(Array(run.events[start..<end]), newest: run.last)
        }
    }

    /// Drops everything kept: the payment queue's doorbell connection ended, so the process may have
    /// restarted on another database, whose log can reuse the positions kept here.
    public func forget() {
        state.withLock { state in
            state.dropAll()
            state.lastSeq = 0
        }
    }

    /// Checks what is kept against a read of the log: when the log's head for the queue `key` is
    /// below the newest event kept for it, the log was replaced and nothing kept can be trusted.
    func check(key: String, logHead: UInt64) {
        state.withLock { state in
            if let run = state.runs[key], !run.events.isEmpty, run.last > logHead { state.dropAll() }
        }
    }

    /// Events kept now (for tests).
    var count: Int {
        state.withLock { $0.runs.values.reduce(0) { $0 + $1.events.count } }
    }

    /// Entries of the eviction order, stale ones included (for tests).
    var orderLength: Int {
        state.withLock { $0.order.count - $0.orderStart }
    }

    private func evict(_ state: inout State) {
        while state.bytes > capacityBytes && state.orderStart < state.order.count {
            let (key, keySeq) = state.order[state.orderStart]
            state.orderStart += 1
            guard var run = state.runs[key], run.first == keySeq else { continue } // already gone
            state.bytes -= run.dropFirst()
            state.live -= 1
            state.runs[key] = run.events.isEmpty ? nil : run
        }
        // The order list sheds what it has passed once that is most of it.
        if state.orderStart > 1024 && state.orderStart * 2 > state.order.count {
            state.order.removeFirst(state.orderStart)
            state.orderStart = 0
        }
        // Entries of events no longer kept (runs dropped, or cut to their share) leave only when they
        // reach the head, which needs eviction; bound them by the events kept all the same.
        if state.order.count - state.orderStart > 2 * state.live + 1024 {
            let runs = state.runs
            state.order = state.order[state.orderStart...].filter { entry in
                guard let run = runs[entry.key] else { return false }
                return run.first <= entry.keySeq && entry.keySeq <= run.last
            }
            state.orderStart = 0
        }
    }
}
