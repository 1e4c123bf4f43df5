import Synchronization

/// A lock-free multi-producer, single-consumer queue of jobs for a reactor.
///
/// Producers push onto an atomic stack (a Treiber stack: compare-and-swap on the head); the loop
/// takes the whole stack with one exchange and reverses it to run jobs in the order they were queued.
/// No producer ever waits for the loop or another producer. `push` reports whether the queue was
/// empty, which is exactly when the loop may be asleep and needs a wake-up.
///
/// Nodes link to each other by address only, and a producer never dereferences the head it read:
/// the consumer may free that node at any moment. The compare-and-swap succeeds only if the address
/// is still the head, whichever node lives there by then, so the link it wrote is right (no ABA
/// problem without a dereference).
final class JobQueue: Sendable {
    final class Node {
        let job: @Sendable () -> Void
        /// Address of the next (older) node, retained by the queue; 0 at the end.
        var next: UInt = 0
        init(_ job: @escaping @Sendable () -> Void) { self.job = job }
    }

    // Address of the newest node, retained by the queue, or 0.
    private let head = Atomic<UInt>(0)

    /// Pushes a job; returns true when the queue was empty before.
    func push(_ job: @escaping @Sendable () -> Void) -> Bool {
        let node = Node(job)
        let address = UInt(bitPattern: Unmanaged.passRetained(node).toOpaque())
        var current = head.load(ordering: .relaxed)
        while true {
            node.next = current
            // Sequentially consistent: the reactor's "sleeping" handshake relies on it (see Reactor.execute).
            let (exchanged, original) = head.compareExchange(expected: current, desired: address, ordering: .sequentiallyConsistent)
            if exchanged { return original == 0 }
            current = original
        }
    }

    /// Whether no job is queued (a sequentially consistent look).
    var isEmpty: Bool { head.load(ordering: .sequentiallyConsistent) == 0 }

    /// Takes every queued job, oldest first. Consumer only.
    func takeAll() -> [@Sendable () -> Void] {
        var address = head.exchange(0, ordering: .acquiringAndReleasing)
        var jobs: [@Sendable () -> Void] = []
        while address != 0 {
            let node = Unmanaged<Node>.fromOpaque(UnsafeRawPointer(bitPattern: address)!).takeRetainedValue()
            jobs.append(node.job)
            address = node.next
        }
        jobs.reverse()
        return jobs
    }

    deinit {
        _ = takeAll()
    }
}
