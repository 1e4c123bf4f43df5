/// A task executor that runs jobs on a reactor's loop thread.
///
/// An RPC server starts each handler's task with this executor as its preference, so a handler that
/// does not suspend runs start to finish on the loop that received the request and sends the answer
/// right away, with no hop through the cooperative pool. A handler that awaits something else (a
/// database, another service) suspends as usual and comes back to the loop to finish. Handlers must
/// therefore not block: long CPU work belongs in a task of its own.
public final class ReactorExecutor: TaskExecutor, @unchecked Sendable {
    // Invariant for @unchecked Sendable: the only stored property is a `let` to a Sendable reactor.
    let reactor: Reactor

    /// An executor for `reactor`.
    public init(reactor: Reactor) {
        self.reactor = reactor
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let accepted = reactor.execute { [self] in
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
        if !accepted {
            // The reactor has stopped: the task still runs to its end, on the global executor, in
            // its turn there (not here, on whichever thread resumed it: a commit thread, or a loop
            // in the middle of its own work).
            globalConcurrentExecutor.enqueue(ExecutorJob(job))
        }
    }
}
