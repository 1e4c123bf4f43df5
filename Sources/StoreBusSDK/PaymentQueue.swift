import Foundation
import Logging
import StoreBus
import StoreSchema
import Synchronization

/// A device's payment queue (SKPaymentQueue): add payments, finish transactions, restore purchases,
/// and observe every change.
///
/// Observing starts with the first observer added (or the first `callbacks` sequence asked for): the
/// queue first re-sends its unfinished transactions, as at an app launch, then every change as it
/// happens. It acknowledges each callback once it has been handed over, and after a lost connection
/// or a gateway restart it continues from the last acknowledged position: nothing is lost or repeated.
/// While nobody listens (every observer removed, every sequence ended) it pauses, acknowledging
/// nothing; callbacks from that time wait in the store for the next observer.
///
/// ```swift
/// let queue = try PaymentQueue(configuration: configuration)
/// queue.add(observer)
/// queue.add(Payment(productIdentifier: "com.example.gems100"))
/// ```
public final class PaymentQueue: Sendable {
    /// The connection to the gateways.
    public let connection: StoreConnection

    struct State {
        var observers: [ObjectIdentifier: any PaymentTransactionObserver] = [:]
        var streams: [UInt64: (continuation: AsyncStream<PaymentQueueCallback>.Continuation, backlog: CallbackBacklog)] = [:]
        var nextStream: UInt64 = 0
        var transactions: [String: PaymentTransaction] = [:]
        var order: [String] = []
        /// Where the observer stream stands (``Observation``).
        var observation = Observation()
        var observing: Task<Void, Never>?
        var observingError: StoreError?
        /// The sequences of ``observingStates``.
        var stateStreams: [UInt64: AsyncStream<StoreError?>.Continuation] = [:]
        /// Fire-and-forget calls (`add`, `finishTransaction`) made and not ended yet, by number.
        var pending: [UInt64: PendingWork] = [:]
        var nextPending: UInt64 = 0
        /// Calls waiting for the launch replay, for the pending calls to end, for slow sequences.
        var replayWaiters = Waiters()
        var pendingWaiters = Waiters()
        var creditWaiters = Waiters()
        /// Callbacks of the SDK's own making (a payment or restore the store refused) that came while
        /// nobody listened, or before the launch replay: handed to the next listener after it.
        var held: [PaymentQueueCallback] = []
        /// The last of the fire-and-forget calls (`add`, `finishTransaction`): each starts after the
        /// one before, so they reach the store in the order the app made them.
        var lastCall: Task<Void, Never>?

        var listening: Bool { !observers.isEmpty || !streams.isEmpty }
        var closed: Bool { observation.phase == .closed }
    }

    let state = Mutex(State())
    /// Held while a callback is handed over, so that observers are never entered from two tasks, and
    /// by ``remove(_:)``, so that an observer removed is never entered afterwards. Recursive: an
    /// observer may remove itself (or another) from inside a callback.
    private let delivering = NSRecursiveLock()
    let logger: Logger
    /// The transfers of this device's downloads.
    let downloads: DownloadEngine

    /// A queue for the device `configuration` names.
    public convenience init(configuration: StoreConfiguration) throws {
        try self.init(connection: StoreConnection(configuration: configuration))
    }

    /// A queue over an existing connection.
    public init(connection: StoreConnection, logger: Logger = Logger(label: "storebus.sdk.queue")) {
        self.connection = connection
        self.logger = logger
        self.downloads = DownloadEngine(connection: connection, logger: logger)
        let reference = WeakReference(self)
        downloads.sink.withLock { $0 = { event in reference.value?.deliverLocal(event) } }
    }

    // MARK: Observing

    /// Adds an observer and, with the first one, starts observing.
    public func add(_ observer: any PaymentTransactionObserver) {
        state.withLock { $0.observers[ObjectIdentifier(observer)] = observer }
        startObserving()
        handOverHeldLater()
    }

    /// Removes an observer: once this returns, it hears no more callbacks. Observing goes on while
    /// other observers or sequences listen, and pauses when none is left.
    ///
    /// A callback that another thread is handing to the observers at that moment is finished first
    /// (this waits for it). Called from inside a callback, it returns at once; but an observer must
    /// not block its callback waiting for another thread that calls this.
    public func remove(_ observer: any PaymentTransactionObserver) {
        delivering.lock()
        defer { delivering.unlock() }
        _ = state.withLock { $0.observers.removeValue(forKey: ObjectIdentifier(observer)) }
        // With nobody listening any more, no call waits for a launch replay.
        wake(.replay)
    }

    /// Every callback from now on, as an asynchronous sequence (starts observing). Each call returns a
    /// sequence of its own; it ends when the queue is closed.
    ///
    /// A callback counts as handed over (and is acknowledged) when it enters the sequence's buffer.
    /// The queue asks the store for more only when every sequence has taken all but one answer's
    /// worth (`observerCredit`), so a slow consumer slows the stream instead of growing the buffer.
    public var callbacks: PaymentQueueCallbacks {
        let (stream, continuation) = AsyncStream.makeStream(of: PaymentQueueCallback.self)
        let reference = WeakReference(self)
        let backlog = CallbackBacklog { reference.value?.wake(.sequenceCredit) }
        let id = state.withLock { state -> UInt64? in
            guard !state.closed else { return nil }
            state.nextStream += 1
            state.streams[state.nextStream] = (continuation, backlog)
            return state.nextStream
        }
        guard let id else {
            continuation.finish()
            return PaymentQueueCallbacks(stream: stream, backlog: backlog)
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
            self?.wake(.sequenceCredit)
            self?.wake(.replay)
        }
        startObserving()
        handOverHeldLater()
        return PaymentQueueCallbacks(stream: stream, backlog: backlog)
    }

    /// The queue's unfinished transactions, as the callbacks so far describe them, oldest first.
    public var transactions: [PaymentTransaction] {
        state.withLock { state in state.order.compactMap { state.transactions[$0] } }
    }

    /// The position of the last callback handed over (acknowledged to the gateway with the next call).
    public var acknowledgedPosition: UInt64 {
        state.withLock { $0.observation.position }
    }

    /// Why the observer stream is interrupted: the error of the observing loop's last call while it
    /// retries (no gateway reachable, a service behind it down, a refused key), nil once a call is
    /// answered again. Callbacks are never lost meanwhile; this only tells an app or a tool that
    /// none can arrive until the stream is back.
    public var observingError: StoreError? {
        state.withLock { $0.observingError }
    }

    /// ``observingError`` as it changes, from now on (the current value first): an error while the
    /// stream is interrupted, nil once it is back. Ends when the queue is closed.
    public var observingStates: AsyncStream<StoreError?> {
        let (stream, continuation) = AsyncStream.makeStream(of: StoreError?.self)
        let id = state.withLock { state -> UInt64? in
            guard !state.closed else { return nil }
            state.nextStream += 1
            state.stateStreams[state.nextStream] = continuation
            continuation.yield(state.observingError)
            return state.nextStream
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.stateStreams.removeValue(forKey: id) }
        }
        return stream
    }

    private func startObserving() {
        state.withLock { state in
            guard state.listening, state.observation.listenerAdded().contains(.startLoop) else { return }
            // The loop holds the queue only while it runs a call: a queue dropped without close()
            // ends its loop at the next pass (see deinit).
            let reference = WeakReference(self)
            state.observing = Task { await Self.observe(reference) }
        }
    }

    deinit {
        // Dropped without close(): end the loop and every sequence (a consumer waiting in `for await`
        // would otherwise wait forever).
        let (task, streams) = state.withLock { state in (state.observing, state.streams.values.map(\.continuation)) }
        task?.cancel()
        for stream in streams { stream.finish() }
    }

    /// The long-poll chain: each call acknowledges the position reached and asks for what follows.
    private static func observe(_ queue: WeakReference) async {
        guard let configuration = queue.value?.connection.configuration else { return }
        var backoff = Backoff(first: configuration.reconnectDelay)
        let hold = Duration.milliseconds(Int64(configuration.observerHoldMilliseconds))
        while !Task.isCancelled {
            guard let current = queue.value else { return }
            // Nobody listens: stop here, acknowledging nothing more. The next observer or sequence
            // starts a new loop (the check and the reset are one step under the lock that
            // `startObserving` takes, so an observer added meanwhile is never left without one).
            guard current.continueObserving() else { return }
            // A sequence that has not taken the last answer's callbacks yet: wait for it.
            await current.waitForSlowSequences(credit: Int(configuration.boundedObserverCredit))
            if Task.isCancelled { return }
            let started = ContinuousClock.now
            let outcome = await current.observeOnce(configuration)
            current.state.withLock { state in
                let now: StoreError?
                if case .failed(let error) = outcome { now = error } else { now = nil }
                if now != state.observingError {
                    for stream in state.stateStreams.values { stream.yield(now) }
                }
                state.observingError = now
            }
            switch outcome {
            case .delivered(let count) where count == 0 && (hold < Self.shortestHold || started.duration(to: .now) < hold / 2):
                // Nothing, and long before the hold was up: the gateway could not hold the call (it is
                // busy or stopping). Calling again at once would only add to its load: back off.
                await backoff.wait()
            case .delivered:
                backoff.reset()
            case .failed(let error):
                if Task.isCancelled { return }
                // The connection was closed (a queue sharing it closed it): no call can succeed again.
                if current.connection.isClosed {
                    current.logger.error("Observing stopped: the connection was closed")
                    // Nothing can arrive any more: the queue is closed, and its sequences end (a
                    // `for await` loop would otherwise wait forever).
                    let streams = current.state.withLock { state in
                        state.observing = nil
                        _ = state.observation.closed()
                        defer { state.streams.removeAll() }
                        return state.streams.values.map(\.continuation)
                    }
                    for stream in streams { stream.finish() }
                    current.wakeEveryWait()
                    return
                }
                let level: Logger.Level = error.isTransient ? .debug : .error
                current.logger.log(level: level, "Observing failed; retrying", metadata: ["error": "\(error)", "delay": "\(backoff.next)"])
                await backoff.wait()
            }
        }
    }

    /// Under this hold the queue polls: every empty answer backs off (a hold of zero would otherwise
    /// call again at once, in a tight loop). With a longer hold, only an empty answer that came before
    /// half of it does (the gateway could not hold the call).
    static let shortestHold = Duration.milliseconds(100)

    /// Whether the loop should go on; when nobody listens, pauses the stream and returns false.
    private func continueObserving() -> Bool {
        let actions = state.withLock { state in
            let actions = state.observation.loopPass(listening: state.listening)
            if actions.contains(.endLoop) { state.observing = nil }
            return actions
        }
        if actions.contains(.resumeReplayWaiters) { wake(.replay) }
        return !actions.contains(.endLoop)
    }

    /// Returns when every sequence still listening holds fewer than `credit` callbacks not yet taken
    /// (a sequence that ends meanwhile, its buffer dropped, no longer counts): woken as consumers
    /// take callbacks.
    private func waitForSlowSequences(credit: Int) async {
        await wait(.sequenceCredit) { state in state.streams.values.contains { $0.backlog.count >= credit } }
    }

    /// Resumes every wait (the queue closed: none has anything left to wait for).
    func wakeEveryWait() {
        wake(.replay)
        wake(.pendingCalls)
        wake(.sequenceCredit)
    }

    private enum ObserveOutcome {
        /// The call was answered with this many callbacks (delivered).
        case delivered(Int)
        case failed(StoreError)
    }

    /// One Observe call and the delivery of what it brought.
    private func observeOnce(_ configuration: StoreConfiguration) async -> ObserveOutcome {
        let (position, replayed) = state.withLock { ($0.observation.position, !$0.observation.asksForReplay) }
        let response: Storebus_Gateway_V1_ObserveResponse
        do {
            response = try await connection.call(
                Storebus_Gateway_V1_Gateway.observe,
                .with {
                    $0.replay = !replayed
                    $0.afterSeq = position
                    // A replay answer always holds two callbacks (the transactions, then its end).
                    $0.credit = replayed ? configuration.boundedObserverCredit : max(2, configuration.boundedObserverCredit)
                    $0.waitMs = configuration.observerHoldMilliseconds
                }, timeout: .milliseconds(Int64(configuration.observerHoldMilliseconds)) + configuration.callTimeout)
        } catch let error as StoreError {
            if error.status == .outOfRange {
                // The queue's log is behind our position (its database was replaced): start over as
                // at a launch, so the app hears the queue's present state.
                state.withLock { $0.observation.logReplaced() }
            }
            return .failed(error)
        } catch {
            return .failed(StoreError(RPCError(.unknown, "\(error)")))
        }
        // Answered: the stream is back before its callbacks are handed over, so that whoever hears
        // them (storectl watch, say) finds it so.
        state.withLock { $0.observingError = nil }
        var delivered = 0
        for event in response.events {
            // The last listener left while the call was out: the rest stays unacknowledged, for the next.
            guard deliver(event) else { break }
            delivered += 1
        }
        return .delivered(delivered)
    }

    /// Hands a store callback to every observer and sequence (one callback at a time whichever task
    /// delivers it) and moves the acknowledged position to its seq; then, once the launch replay is
    /// over, the SDK's own callbacks that were held. Returns false, changing nothing, when nobody
    /// listens.
    private func deliver(_ event: Storebus_Gateway_V1_ObserverEvent) -> Bool {
        delivering.lock()
        defer { delivering.unlock() }
        guard deliverSerially(PaymentQueueCallback(seq: event.seq, event: Self.translate(event)), advances: true) else { return false }
        handOverHeld()
        return true
    }

    /// Hands a callback of the SDK's own making (position 0, nothing acknowledged) to the observers
    /// and sequences, after any held before it; while nobody listens, or before the launch replay has
    /// been handed over, it is held for later instead (see ``State/held``).
    func deliverLocal(_ event: PaymentQueueCallback.Event) {
        delivering.lock()
        defer { delivering.unlock() }
        state.withLock { if !$0.closed { $0.held.append(PaymentQueueCallback(seq: 0, event: event)) } }
        handOverHeld()
    }

    /// Hands over the held callbacks, in order, if someone listens and the launch replay is over.
    /// Called with `delivering` held.
    private func handOverHeld() {
        while let next = state.withLock({ state -> PaymentQueueCallback? in
            guard state.observation.mayHandOverHeld(listening: state.listening), !state.held.isEmpty else { return nil }
            return state.held.removeFirst()
        }) {
            if !deliverSerially(next, advances: false) {
                state.withLock { if !$0.closed { $0.held.insert(next, at: 0) } }
                return
            }
        }
    }

    /// For a listener just added: hands over the held callbacks from another task (StoreKit never
    /// calls an observer from inside `add`), if the replay is already over; otherwise the observing
    /// loop does after it.
    private func handOverHeldLater() {
        guard state.withLock({ !$0.held.isEmpty && !$0.observation.asksForReplay }) else { return }
        Task { handOverHeldNow() }
    }

    private func handOverHeldNow() {
        delivering.lock()
        defer { delivering.unlock() }
        handOverHeld()
    }

    private func deliverSerially(_ callback: PaymentQueueCallback, advances: Bool) -> Bool {
        var actions: Observation.Actions = []
        let listeners = state.withLock { state -> ([any PaymentTransactionObserver], [(continuation: AsyncStream<PaymentQueueCallback>.Continuation, backlog: CallbackBacklog)])? in
            // After close() nobody hears anything more (a restore failing as the connection closes).
            guard state.listening, !state.closed else { return nil }
            switch callback.event {
            case .updatedTransactions(let transactions, let replayed):
                if replayed {
                    state.transactions.removeAll()
                    state.order.removeAll()
                }
                for transaction in transactions {
                    if state.transactions.updateValue(transaction, forKey: transaction.transactionIdentifier) == nil {
                        state.order.append(transaction.transactionIdentifier)
                    }
                }
            case .removedTransactions(let transactions):
                let removed = Set(transactions.map(\.transactionIdentifier))
                for id in removed { state.transactions[id] = nil }
                state.order.removeAll { removed.contains($0) }
            case .updatedDownloads(let downloads) where advances:
                for download in downloads {
                    guard var transaction = state.transactions[download.transactionIdentifier],
                        let index = transaction.downloads.firstIndex(where: { $0.contentIdentifier == download.contentIdentifier })
                    else { continue }
                    transaction.downloads[index] = download
                    transaction.rawRecord.downloads[index] = download.rawRecord
                    state.transactions[download.transactionIdentifier] = transaction
                }
            case .replayCompleted(let count):
                // A replay with transactions opened with them (and cleared the list); an empty one
                // says the queue has none, whatever the list held before (a replay after OUT_OF_RANGE).
                if count == 0 {
                    state.transactions.removeAll()
                    state.order.removeAll()
                }
            default:
                break
            }
            if advances {
                var replayCompleted = false
                if case .replayCompleted = callback.event { replayCompleted = true }
                actions = state.observation.handedOver(seq: callback.seq, replayCompleted: replayCompleted)
            }
            return (Array(state.observers.values), Array(state.streams.values))
        }
        guard let (observers, streams) = listeners else { return false }
        if actions.contains(.resumeReplayWaiters) { wake(.replay) }
        if advances, case .updatedDownloads(let changed) = callback.event {
            for download in changed { downloads.announced(download, seq: callback.seq) }
        }
        for observer in observers {
            // Removed by an observer before it in this delivery (remove(_:) returns at once inside a
            // callback): it hears nothing more, this callback included.
            guard state.withLock({ $0.observers[ObjectIdentifier(observer)] != nil }) else { continue }
            switch callback.event {
            case .updatedTransactions(let transactions, _):
                observer.paymentQueue(self, updatedTransactions: transactions)
            case .removedTransactions(let transactions):
                observer.paymentQueue(self, removedTransactions: transactions)
            case .restoreCompletedTransactionsFinished:
                observer.paymentQueueRestoreCompletedTransactionsFinished(self)
            case .restoreCompletedTransactionsFailed(_, let error):
                observer.paymentQueue(self, restoreCompletedTransactionsFailedWithError: error)
            case .updatedDownloads(let downloads):
                observer.paymentQueue(self, updatedDownloads: downloads)
            case .didRevokeEntitlements(let products):
                observer.paymentQueue(self, didRevokeEntitlementsForProductIdentifiers: products)
            case .replayCompleted, .unknown:
                break
            }
        }
        for stream in streams {
            stream.backlog.add()
            if case .terminated = stream.continuation.yield(callback) { stream.backlog.take() }
        }
        return true
    }

    static func translate(_ event: Storebus_Gateway_V1_ObserverEvent) -> PaymentQueueCallback.Event {
        switch event.callback {
        case .updatedTransactions(let updated):
            .updatedTransactions(updated.transactions.map { PaymentTransaction($0) }, replayed: event.replayed)
        case .removedTransactions(let removed):
            .removedTransactions(removed.transactions.map { PaymentTransaction($0) })
        case .restoreCompletedTransactionsFinished(let finished):
            .restoreCompletedTransactionsFinished(restoreID: finished.restoreID, restoredCount: Int(finished.restoredCount))
        case .restoreCompletedTransactionsFailedWithError(let failed):
            .restoreCompletedTransactionsFailed(restoreID: failed.restoreID, error: StoreKitError(failed.error))
        case .updatedDownloads(let updated):
            .updatedDownloads(updated.downloads.map(Download.init))
        case .didRevokeEntitlementsForProductIdentifiers(let revoked):
            .didRevokeEntitlements(productIdentifiers: revoked.productIdentifiers)
        case .replayComplete(let done):
            .replayCompleted(count: Int(done.replayedCount))
        case nil:
            .unknown
        }
    }

    /// Returns once the launch replay has been handed over, when something listens and it has not
    /// been yet (at most `callTimeout`): a payment, finish or restore sent before the replay's
    /// snapshot would otherwise be taken into it, and its callbacks that the snapshot does not
    /// show (a restore's end, a removal) would be lost. With nobody listening there is no replay to
    /// wait for, and after the limit the call goes ahead (it fails on its own if the store is out
    /// of reach).
    func afterLaunchReplay() async {
        await wait(.replay, until: .now + connection.configuration.callTimeout) { state in
            state.observation.replayAwaited(listening: state.listening)
        }
    }

    public func close() async {
        let (task, streams, stateStreams) = state.withLock { state in
            _ = state.observation.closed()
            let streams = state.streams.values.map(\.continuation)
            let stateStreams = Array(state.stateStreams.values)
            state.streams.removeAll()
            state.stateStreams.removeAll()
            return (state.observing, streams, stateStreams)
        }
        wakeEveryWait()
        task?.cancel()
        await task?.value
        await downloads.stopAll()
        for stream in streams { stream.finish() }
        for stream in stateStreams { stream.finish() }
        await connection.close()
    }

    /// Lets the payments and finishes made with ``add(_:)`` and ``finishTransaction(_:)`` reach the
    /// store (each is tried up to three times, see ``add(_:)``), at most `limit` (default: three
    /// times `callTimeout`), then closes the queue as ``close()`` does. Returns those still being
    /// sent when it closed, in the order they were made: none means every one reached the store or
    /// failed for good (and its observers heard so). A payment cut off may still have reached the
    /// store; a finish cut off leaves its transaction to come back at the next launch.
    @discardableResult
    public func shutdown(waitingAtMost limit: Duration? = nil) async -> [PendingWork] {
        await wait(.pendingCalls, until: .now + (limit ?? connection.configuration.callTimeout * 3)) { state in !state.pending.isEmpty }
        let cutOff = state.withLock { $0.pending.sorted { $0.key < $1.key }.map(\.value) }
        if !cutOff.isEmpty {
            logger.warning("Closing with payments or finishes still being sent", metadata: ["count": "\(cutOff.count)"])
        }
        await close()
        return cutOff
    }
}

/// A weak reference to a queue that a task can hold without keeping the queue alive.
final class WeakReference: Sendable {
    weak let value: PaymentQueue?

    init(_ value: PaymentQueue) { self.value = value }
}
