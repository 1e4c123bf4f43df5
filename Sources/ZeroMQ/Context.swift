import CZeroMQ

/// A libzmq context: the I/O threads and the registry of every socket made from it.
///
/// A context is thread-safe (libzmq guarantees it), so it may be shared freely. Shutting down is
/// explicit and in two steps, as libzmq requires: ``shutdown()`` makes every blocking call on the
/// context's sockets fail with `ETERM`, the owners then close their sockets, and ``terminate()``
/// waits for that and frees the context. Nothing is done from `deinit`: terminating there would
/// block forever whenever a socket was still open somewhere.
public final class Context: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `handle` is immutable after init, and libzmq documents
    // contexts as thread-safe; `terminated` is only read and written under libzmq's own locking
    // order (terminate is called once, by the owner, after all sockets are closed).
    let handle: UnsafeMutableRawPointer
    /// What the context's sockets do before binding or connecting (none: libzmq's defaults).
    public let endpointPolicy: (any EndpointPolicy)?

    /// Creates a context with `ioThreads` I/O threads and room for `maxSockets` sockets.
    ///
    /// With `batchScheduledIO` (on Linux), the I/O threads run under `SCHED_BATCH`: a thread that
    /// wakes does not preempt the one running on its CPU, and runs once a CPU is free. A message
    /// crossing a process wakes the I/O threads of both ends; preempting the loops that queue and
    /// read messages, they cost each hop two context switches more. Measured under the flow
    /// benchmark (two runs side by side, one with and one without, at 600 flows a second each):
    /// about 7% less CPU per flow over all the processes, a tenth less in the gateway's.
    ///
    /// `endpointPolicy` is applied by every socket of the context when it binds or connects. A
    /// context whose policy makes CURVE servers needs a ``CurveAuthenticator`` before its first bind.
    public init(ioThreads: Int32 = 1, maxSockets: Int32 = 16384, batchScheduledIO: Bool = true, endpointPolicy: (any EndpointPolicy)? = nil) throws(ZMQError) {
        guard let handle = zmq_ctx_new() else { throw ZMQError.last("zmq_ctx_new") }
        self.handle = handle
        self.endpointPolicy = endpointPolicy
        if zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads) != 0 { throw ZMQError.last("zmq_ctx_set(ZMQ_IO_THREADS)") }
        if zmq_ctx_set(handle, ZMQ_MAX_SOCKETS, maxSockets) != 0 { throw ZMQError.last("zmq_ctx_set(ZMQ_MAX_SOCKETS)") }
        #if os(Linux)
        // The policy applies to threads started after this, and the first socket starts them.
        // SCHED_BATCH takes the static priority 0 that a normal thread already has, so no
        // privilege is needed. libzmq aborts when setting it fails, but Debian's libzmq (4.3.4)
        // sets a policy on each of its threads whatever was asked, SCHED_OTHER by default, and
        // aborts the same way: where the system refuses sched_setscheduler (seen with the call
        // failed on purpose under strace), no libzmq program runs, with this or without.
        if batchScheduledIO, zmq_ctx_set(handle, ZMQ_THREAD_SCHED_POLICY, storebus_sched_batch) != 0 {
            throw ZMQError.last("zmq_ctx_set(ZMQ_THREAD_SCHED_POLICY)")
        }
        #endif
        // Blocking close is never wanted: every socket sets its own LINGER, this is the fallback.
        _ = zmq_ctx_set(handle, ZMQ_BLOCKY, 0)
    }

    /// Makes every blocking operation on this context's sockets return `ETERM`. Safe from any thread,
    /// and safe to call more than once.
    public func shutdown() {
        _ = zmq_ctx_shutdown(handle)
    }

    /// Waits until every socket of the context is closed, then frees it. Call once, after
    /// ``shutdown()`` and after every owner closed its sockets. Retries on `EINTR`.
    public func terminate() {
        while zmq_ctx_term(handle) != 0 {
            if zmq_errno() != EINTR { return }
        }
    }

    /// libzmq's version as (major, minor, patch).
    public static var version: (major: Int32, minor: Int32, patch: Int32) {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return (major, minor, patch)
    }

    /// Whether libzmq was built with a capability, such as `"curve"` or `"ipc"`.
    public static func has(_ capability: String) -> Bool {
        zmq_has(capability) != 0
    }
}
