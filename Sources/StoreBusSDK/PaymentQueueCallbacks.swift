import Synchronization

/// Callbacks of a payment queue as an asynchronous sequence (``PaymentQueue/callbacks``).
public struct PaymentQueueCallbacks: AsyncSequence, Sendable {
    /// Each element is one callback, in the order the observers hear them.
    public typealias Element = PaymentQueueCallback
    let stream: AsyncStream<PaymentQueueCallback>
    let backlog: CallbackBacklog

    /// Iterates over the callbacks; the queue holds back the stream while this sequence's consumer
    /// is behind (see ``PaymentQueue/callbacks``).
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<PaymentQueueCallback>.AsyncIterator
        let backlog: CallbackBacklog

        /// The next callback, or nil once the queue is closed.
        public mutating func next() async -> PaymentQueueCallback? {
            let callback = await base.next()
            if callback != nil { backlog.take() }
            return callback
        }
    }

    /// An iterator over the callbacks from now on.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), backlog: backlog)
    }
}

/// Callbacks handed to one sequence and not yet taken by its consumer.
final class CallbackBacklog: Sendable {
    private let pending = Atomic<Int>(0)
    /// Called after each take (the queue wakes its loop if it waits for this sequence).
    private let taken: @Sendable () -> Void

    init(taken: @escaping @Sendable () -> Void = {}) {
        self.taken = taken
    }

    var count: Int { pending.load(ordering: .relaxed) }
    func add() { pending.wrappingAdd(1, ordering: .relaxed) }
    func take() {
        pending.wrappingSubtract(1, ordering: .relaxed)
        taken()
    }
}
