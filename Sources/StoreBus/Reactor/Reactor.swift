import Foundation
import Synchronization
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// One OS thread that owns ZeroMQ sockets and waits on them with a ``Poller``.
///
/// ZeroMQ sockets are not thread-safe, and a `zmq_*` call may block, so StoreBus never touches a
/// socket from Swift's cooperative thread pool. Each component (an RPC server, an RPC client, an event
/// follower) gives its sockets to a reactor. Tasks talk to the reactor with ``execute(_:)``, which
/// queues a job and wakes the loop through a pipe; the loop runs jobs, socket handlers, timers and
/// idle work (``whenIdle(hasWork:run:)``) on its own thread, one at a time.
///
/// Methods marked "loop only" must be called on the reactor's thread (from a job, a handler or a
/// timer); they check it with a precondition.
public final class Reactor: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `jobs` is a lock-free queue, `lifecycle` is guarded by its
    // Mutex, `finished` is atomic; `loopThread` is written
    // once by the loop thread before any job runs and read through an Atomic; every other stored var
    // (`poller`, `handlers`, `timers`, `stopActions`, `localJobs`, `spareJobs`) is touched only on
    // the loop thread.

    /// The name of the reactor's thread (shown by top, perf and debuggers; Linux keeps 15 bytes).
    public let name: String
    /// The ZeroMQ context sockets of this reactor are made from.
    public let context: ZeroMQ.Context

    private struct Lifecycle {
        var stopRequested = false
        var finished = false
        var joiners: [CheckedContinuation<Void, Never>] = []
    }

    private let jobs = JobQueue()
    private let finished = Atomic<Bool>(false)
    /// Producers between their look at `finished` and their push (see `execute`).
    private let entering = Atomic<Int>(0)
    private let lifecycle = Mutex(Lifecycle())
    /// Wake-up pipe: jobs write a byte to `wakeWriteFD`; the loop polls `wakeReadFD`.
    private let wakeReadFD: Int32
    private let wakeWriteFD: Int32
    private let loopThread = Atomic<UInt>(0)
    private let started = Atomic<Bool>(false)
    /// Set by the loop just before it blocks in poll, cleared when it wakes. Producers write to the
    /// wake pipe only while it is set (the first of them clears it), so jobs queued while the loop is
    /// busy cost no system call. The loop sets it, then looks at the queue once more before blocking;
    /// producers push, then look at it; with both sides sequentially consistent, one of the two
    /// always sees the other (a job is never left waiting for a poll that nothing will wake).
    private let sleeping = Atomic<Bool>(false)

    /// Polls with `zmq_poll` itself when the fast paths are off (see ``FastPaths``).
    private var poller = Poller(plain: !FastPaths.enabled)
    /// Jobs queued from the loop thread itself: no lock and no wake-up needed.
    private var localJobs: [@Sendable () -> Void] = []
    private var spareJobs: [@Sendable () -> Void] = []
    private var handlers: [(socket: Socket, onReadable: () -> Void)] = []
    private var timers = TimerQueue()
    private var stopActions: [(id: UInt64, action: () -> Void)] = []
    private var nextStopActionID: UInt64 = 0
    private var idleWork: [IdleWork] = []

    /// Creates a reactor; its thread starts with ``start()``.
    public init(name: String, context: ZeroMQ.Context) {
        self.name = name
        self.context = context
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0, "pipe failed: \(String(cString: strerror(errno)))")
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeReadFD = fds[0]
        wakeWriteFD = fds[1]
        poller.add(fileDescriptor: wakeReadFD)
    }

    deinit {
        close(wakeReadFD)
        close(wakeWriteFD)
    }

    /// Starts the loop thread; later calls do nothing (components sharing a reactor may each call it).
    public func start() {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let thread = Thread { [self] in
            nameCurrentThread(self.name)
            self.loop()
        }
        thread.name = name
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Queues a job to run on the loop thread and wakes the loop; returns false, without queueing,
    /// once the reactor has finished. Jobs run in the order queued; every job accepted runs, those
    /// accepted while the reactor stops included. A job queued from the loop thread itself (a task
    /// resuming there, see ``ReactorExecutor``) costs neither a lock nor a wake-up.
    @discardableResult
    public func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        if isInLoop {
            localJobs.append(job)
            return true
        }
        entering.wrappingAdd(1, ordering: .sequentiallyConsistent)
        defer { entering.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
        if finished.load(ordering: .sequentiallyConsistent) { return false }
        _ = jobs.push(job)
        if sleeping.load(ordering: .sequentiallyConsistent) && sleeping.exchange(false, ordering: .sequentiallyConsistent) {
            signal()
        }
        return true
    }

    /// Runs `job` on the loop thread, after the jobs queued before it, and returns once it has run,
    /// true; false, without running it, when the reactor has finished (its stop actions have run) or
    /// was never started. Called on the loop thread itself, the caller suspends while the loop runs
    /// the queued jobs and this one.
    public func perform(_ job: @escaping @Sendable () -> Void) async -> Bool {
        guard started.load(ordering: .acquiring) else { return false }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let accepted = execute {
                job()
                continuation.resume(returning: true)
            }
            if !accepted { continuation.resume(returning: false) }
        }
    }

    /// Whether the caller runs on the loop thread.
    public var isInLoop: Bool {
        loopThread.load(ordering: .acquiring) == UInt(pthread_self())
    }

    /// Asks the loop to stop after the jobs already queued. Stop actions then run on the loop thread.
    public func stop() {
        lifecycle.withLock { $0.stopRequested = true }
        signal()
    }

    /// Waits until the loop thread has run its stop actions and exited.
    public func join() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = lifecycle.withLock { lifecycle -> Bool in
                if lifecycle.finished { return true }
                lifecycle.joiners.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Whether the loop has exited.
    public var isFinished: Bool { finished.load(ordering: .acquiring) }

    // MARK: Loop only

    /// Calls `onReadable` whenever `socket` has a message. The handler should receive with `dontWait`
    /// until EAGAIN, or up to a batch limit (polling is level-triggered, so the rest comes next round).
    /// Loop only.
    public func register(_ socket: Socket, onReadable: @escaping () -> Void) {
        precondition(isInLoop, "Reactor.register called off the loop thread")
        poller.add(socket)
        handlers.append((socket, onReadable))
    }

    /// Stops polling `socket` (before it is closed). Loop only.
    public func unregister(_ socket: Socket) {
        precondition(isInLoop, "Reactor.unregister called off the loop thread")
        guard let index = handlers.firstIndex(where: { $0.socket === socket }) else { return }
        handlers.remove(at: index)
        poller.remove(at: index + 1)
    }

    /// Runs `action` on the loop at `deadline`. Loop only.
    @discardableResult
    public func schedule(at deadline: ContinuousClock.Instant, _ action: @escaping () -> Void) -> TimerID {
        precondition(isInLoop, "Reactor.schedule called off the loop thread")
        return timers.add(deadline, action)
    }

    /// Cancels a timer that has not fired. Loop only.
    public func cancel(_ timer: TimerID) {
        timers.cancel(timer)
    }

    /// Runs `action` on the loop thread when the reactor stops (closing sockets, failing waiters).
    /// Loop only.
    @discardableResult
    public func onStop(_ action: @escaping () -> Void) -> StopActionID {
        precondition(isInLoop, "Reactor.onStop called off the loop thread")
        nextStopActionID += 1
        stopActions.append((nextStopActionID, action))
        return StopActionID(raw: nextStopActionID)
    }

    /// Forgets a stop action that is no longer needed (its component closed early, on a reactor that
    /// goes on running). Loop only.
    public func removeStopAction(_ id: StopActionID) {
        precondition(isInLoop, "Reactor.removeStopAction called off the loop thread")
        stopActions.removeAll { $0.id == id.raw }
    }

    /// Registers work for the end of each turn of the loop: once the loop has run the jobs, socket
    /// handlers and timers that were ready, and before it waits for more, it calls `run` if
    /// `hasWork` says there is something to do. Work batched this way (a group commit) takes in all
    /// that the turn's messages asked for. Jobs `run` queues on the loop (tasks it resumes) run right
    /// after it; while `hasWork` stays true, the loop looks at its sockets without blocking and comes
    /// back. `run` blocks the loop while it runs. Loop only.
    public func whenIdle(hasWork: @escaping () -> Bool, run: @escaping () -> Void) {
        precondition(isInLoop, "Reactor.whenIdle called off the loop thread")
        idleWork.append(IdleWork(hasWork: hasWork, run: run))
    }

    private struct IdleWork {
        let hasWork: () -> Bool
        let run: () -> Void
    }

    /// Runs the idle work that has something to do, and the jobs it queues; true when some still has
    /// work afterwards.
    private func runIdleWork() -> Bool {
        var more = false
        for work in idleWork where work.hasWork() {
            work.run()
            runLocalJobs()
            more = more || work.hasWork()
        }
        return more
    }

    // MARK: The loop

    private func signal() {
        var byte: UInt8 = 1
        _ = write(wakeWriteFD, &byte, 1)
    }

    /// Runs jobs queued from the loop thread, including those they queue in turn. The loop runs them
    /// after each socket handler; a handler may also run them itself between messages. The two arrays
    /// trade places with a spare one, so none is reallocated while the loop is busy. Loop only.
    func runLocalJobs() {
        precondition(isInLoop, "Reactor.runLocalJobs called off the loop thread")
        while !localJobs.isEmpty {
            var jobs = spareJobs
            spareJobs = []
            swap(&jobs, &localJobs)
            for job in jobs { job() }
            jobs.removeAll(keepingCapacity: true)
            spareJobs = jobs
        }
    }

    /// Runs the stop actions and the jobs they queue, again and again while these register more.
    private func runStopActions() {
        repeat {
            let actions = stopActions
            stopActions.removeAll()
            for entry in actions { entry.action() }
            runLocalJobs()
        } while !stopActions.isEmpty
    }

    private func loop() {
        loopThread.store(UInt(pthread_self()), ordering: .releasing)
        var running = true
        while running {
            // Read the stop request first: every job queued before stop() was called then runs.
            let stopRequested = lifecycle.withLock { $0.stopRequested }
            for job in jobs.takeAll() { job() }
            runLocalJobs()
            if stopRequested { break }
            for action in timers.takeExpired(now: .now) { action() }
            runLocalJobs()
            let idleWorkLeft = runIdleWork()

            let timeout = idleWorkLeft ? 0 : timers.millisecondsUntilNext(now: .now)
            sleeping.store(true, ordering: .sequentiallyConsistent)
            if !jobs.isEmpty || lifecycle.withLock({ $0.stopRequested }) {
                sleeping.store(false, ordering: .sequentiallyConsistent)
                continue
            }
            do {
                _ = try poller.poll(timeoutMilliseconds: timeout)
                sleeping.store(false, ordering: .sequentiallyConsistent)
            } catch {
                // ETERM: the context is shutting down; anything else is a bug in the poll set.
                running = false
                continue
            }
            if poller.returnedEvents(at: 0).contains(.readable) {
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { drain in
                    while read(wakeReadFD, drain.baseAddress, 64) == 64 {}
                }
            }
            // Handlers may unregister sockets, which renumbers handlers and poll items alike (an item
            // keeps its reported events as it moves): walk a snapshot, and read an item's events only
            // once its socket is known to be still at that place.
            let snapshot = handlers
            for (index, entry) in snapshot.enumerated() {
                guard index < handlers.count, handlers[index].socket === entry.socket,
                    poller.returnedEvents(at: index + 1).contains(.readable)
                else { continue }
                entry.onReadable()
                runLocalJobs()
            }
        }
        runStopActions()
        handlers.removeAll()
        timers.removeAll()
        // From here on `execute` refuses jobs. Producers that looked before the flag was set are
        // counted in `entering`; once they have pushed, the last jobs run here, on the loop thread,
        // against components that are stopped (they fail their callers instead of using sockets).
        finished.store(true, ordering: .sequentiallyConsistent)
        while entering.load(ordering: .sequentiallyConsistent) > 0 { sched_yield() }
        for job in jobs.takeAll() { job() }
        // A component attached by one of these last jobs (made by a caller resumed above) registered
        // a stop action after the first round: run those too, so every socket is closed.
        runStopActions()
        loopThread.store(0, ordering: .releasing)
        let joiners = lifecycle.withLock { lifecycle -> [CheckedContinuation<Void, Never>] in
            lifecycle.finished = true
            let joiners = lifecycle.joiners
            lifecycle.joiners.removeAll()
            return joiners
        }
        for joiner in joiners { joiner.resume() }
    }
}

/// Identifies a stop action registered on a ``Reactor``.
public struct StopActionID: Hashable, Sendable {
    let raw: UInt64
}

/// Identifies a timer scheduled on a ``Reactor``.
public struct TimerID: Hashable, Sendable {
    let raw: UInt64
}

/// A min-heap of deadlines with lazy cancellation.
///
/// Cancelling only forgets the action (O(1)); the heap entry stays until it reaches the top or until
/// cancelled entries outnumber live ones, when the heap is rebuilt without them. Most timers (call
/// deadlines) are cancelled long before they are due, so this keeps cancellation off the hot path
/// while bounding memory to a small multiple of the live timers.
struct TimerQueue {
    private var heap = DeadlineHeap()
    private var actions: [UInt64: () -> Void] = [:]
    private var nextID: UInt64 = 1

    mutating func add(_ deadline: ContinuousClock.Instant, _ action: @escaping () -> Void) -> TimerID {
        let id = nextID
        nextID += 1
        actions[id] = action
        heap.push(deadline, id)
        return TimerID(raw: id)
    }

    mutating func cancel(_ timer: TimerID) {
        guard actions.removeValue(forKey: timer.raw) != nil else { return }
        if heap.count > 64 && heap.count > 2 * actions.count {
            heap.removeAll { actions[$0] == nil }
        }
    }

    mutating func removeAll() {
        heap.removeAll { _ in true }
        actions.removeAll()
    }

    /// Milliseconds until the next timer, rounded up; -1 when there is none. A cancelled entry at the
    /// top may make the loop wake early once; it is dropped then.
    mutating func millisecondsUntilNext(now: ContinuousClock.Instant) -> Int {
        while let top = heap.peek(), actions[top.id] == nil { heap.pop() }
        guard let top = heap.peek() else { return -1 }
        let remaining = now.duration(to: top.deadline)
        if remaining <= .zero { return 0 }
        // A timer days away: wake within the hour and look again (the arithmetic below would overflow
        // for durations of centuries, and poll takes an Int32 anyway).
        if remaining >= .seconds(3600) { return 3_600_000 }
        let (seconds, attoseconds) = remaining.components
        return Int(seconds) * 1000 + Int((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }

    /// Removes and returns the actions that are due. The caller runs them after this mutating call
    /// has returned, so an action may schedule or cancel timers (Swift's exclusivity checks would stop
    /// the process if it did so during the call).
    mutating func takeExpired(now: ContinuousClock.Instant) -> [() -> Void] {
        var due: [() -> Void] = []
        while let top = heap.peek(), top.deadline <= now {
            heap.pop()
            if let action = actions.removeValue(forKey: top.id) { due.append(action) }
        }
        return due
    }
}

/// A value that may only be used on one reactor's loop thread, carried through `@Sendable` jobs.
///
/// This is how loop-confined state (sockets, tables of pending calls) is reached from jobs queued by
/// tasks: the box is `Sendable`, its content is only read on the loop, which the accessor checks.
public final class LoopBound<Value>: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `storage` is only accessed through `value`, which checks
    // that the caller is on `reactor`'s loop thread (or that the loop has not started yet).
    private let storage: Value
    private let reactor: Reactor

    /// Wraps a value created before the loop started, or on the loop.
    public init(_ value: Value, on reactor: Reactor) {
        self.storage = value
        self.reactor = reactor
    }

    /// The value. Loop only.
    public var value: Value {
        precondition(reactor.isInLoop, "LoopBound value used off its reactor's thread")
        return storage
    }
}
