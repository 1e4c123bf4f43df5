import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A ZeroMQ socket.
///
/// libzmq sockets are not thread-safe, so `Socket` is deliberately not `Sendable`: the thread that
/// creates a socket is the one that uses and closes it. Components that serve many tasks give each
/// socket to one reactor thread and talk to that thread through a queue.
///
/// Receiving goes through `zmq_msg_recv` into a heap-allocated `zmq_msg_t` owned by the socket (a
/// `zmq_msg_t` stores messages of up to 33 bytes inside itself, so it must never be copied while in
/// use), and every frame is copied out into Swift-owned bytes before the next call; a frame too
/// large to copy cheaply can be received held instead (``receiveHeldFrame(dontWait:)``, a
/// ``HeldFrame``) and sent on as it is.
/// Interrupted calls (`EINTR`) are retried; every other failure is thrown as ``ZMQError``. Sending or
/// receiving on a closed socket throws `ENOTSOCK` instead of touching the freed handle.
public final class Socket {
    /// The libzmq socket handle, valid until ``close()``, for a call that may change what the socket
    /// has to read or room to write: any call may process the commands that libzmq's I/O threads
    /// queue for the socket, so each use marks the socket for a look by ``Poller``.
    var handle: UnsafeMutableRawPointer {
        needsLook = true
        return rawHandle
    }
    /// The handle, for the poller's own looks (which leave the mark alone).
    let rawHandle: UnsafeMutableRawPointer
    /// Whether a call may have consumed the wake-up of the socket's notification descriptor since
    /// ``Poller`` last read its `ZMQ_EVENTS`: until it looks again, that descriptor no longer tells
    /// whether the socket has a message (see ``Poller``).
    var needsLook = true
    /// The socket pattern.
    public let type: SocketType
    private let scratch: UnsafeMutablePointer<zmq_msg_t>
    /// Whether ``close()`` has run.
    public private(set) var isClosed = false
    /// The context's policy, applied at bind and connect.
    let endpointPolicy: (any EndpointPolicy)?
    /// Whether CURVE options were set on this socket itself with ``set(_:)`` (a policy should then
    /// leave its security alone).
    public internal(set) var hasOwnCurveOptions = false

    /// Creates a socket of `type` in `context`.
    ///
    /// LINGER is set to 0 at once so that closing never blocks, whatever the caller configures
    /// afterwards; callers that want queued messages flushed on close set a small positive LINGER.
    public init(context: Context, type: SocketType) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle, type.raw) else { throw ZMQError.last("zmq_socket(\(type))") }
        self.rawHandle = handle
        self.type = type
        self.endpointPolicy = context.endpointPolicy
        self.scratch = .allocate(capacity: 1)
        var zero: Int32 = 0
        _ = zmq_setsockopt(handle, ZMQ_LINGER, &zero, MemoryLayout<Int32>.size)
    }

    deinit {
        close()
        scratch.deallocate()
    }

    /// Closes the socket. Pending outgoing messages are kept for at most the LINGER period by the
    /// I/O thread; this call itself does not block. Closing twice is harmless.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        _ = zmq_close(handle)
    }

    /// Binds to an endpoint such as `tcp://127.0.0.1:*`, `ipc:///tmp/x.sock` or `inproc://name`.
    /// The context's ``EndpointPolicy`` prepares the socket first.
    public func bind(_ endpoint: String) throws(ZMQError) {
        try endpointPolicy?.prepare(self, endpoint: endpoint, binding: true)
        if zmq_bind(handle, endpoint) != 0 { throw ZMQError.last("zmq_bind(\(endpoint))") }
    }

    /// Connects to an endpoint. libzmq connects in the background and reconnects after a loss.
    /// The context's ``EndpointPolicy`` prepares the socket first.
    public func connect(_ endpoint: String) throws(ZMQError) {
        try endpointPolicy?.prepare(self, endpoint: endpoint, binding: false)
        if zmq_connect(handle, endpoint) != 0 { throw ZMQError.last("zmq_connect(\(endpoint))") }
    }

    /// Stops listening on an endpoint given to ``bind(_:)`` (use ``lastEndpoint`` for wildcards).
    public func unbind(_ endpoint: String) throws(ZMQError) {
        if zmq_unbind(handle, endpoint) != 0 { throw ZMQError.last("zmq_unbind(\(endpoint))") }
    }

    /// Drops a connection made with ``connect(_:)``.
    public func disconnect(_ endpoint: String) throws(ZMQError) {
        if zmq_disconnect(handle, endpoint) != 0 { throw ZMQError.last("zmq_disconnect(\(endpoint))") }
    }

    /// Sends a multipart message: every frame is queued, or none is.
    ///
    /// With `dontWait`, a full queue (high-water mark reached, or nothing to queue for: a DEALER that
    /// never connected) throws an error whose ``ZMQError/isAgain`` is true. libzmq checks the
    /// high-water mark on the first frame only, so a message is never cut in two.
    public func send(_ message: Message, dontWait: Bool = false) throws(ZMQError) {
        try send(frames: message.frames, dontWait: dontWait)
    }

    /// Sends the frames as one multipart message; see ``send(_:dontWait:)``.
    public func send(frames: [[UInt8]], dontWait: Bool = false) throws(ZMQError) {
        precondition(!frames.isEmpty, "a ZeroMQ message has at least one frame")
        let base: Int32 = dontWait ? ZMQ_DONTWAIT : 0
        let last = frames.count - 1
        for (index, frame) in frames.enumerated() {
            try sendFrame(frame, flags: index == last ? base : base | ZMQ_SNDMORE)
        }
    }

    /// Sends one frame; `more` marks that further frames of the same message follow.
    public func sendFrame(_ frame: [UInt8], more: Bool, dontWait: Bool = false) throws(ZMQError) {
        try sendFrame(frame, flags: Self.sendFlags(more: more, dontWait: dontWait))
    }

    /// Sends `frames`, then `last` (when there is one) as the message's last frame, its bytes
    /// referenced, not copied; every frame is queued, or none is, as with ``send(frames:dontWait:)``.
    public func send(frames: [[UInt8]], last: HeldFrame?, dontWait: Bool = false) throws(ZMQError) {
        guard let last else { return try send(frames: frames, dontWait: dontWait) }
        for frame in frames { try sendFrame(frame, more: true, dontWait: dontWait) }
        try sendFrame(last, more: false, dontWait: dontWait)
    }

    /// Sends a held frame, its bytes referenced, not copied; `more` marks that further frames of
    /// the same message follow.
    public func sendFrame(_ frame: HeldFrame, more: Bool, dontWait: Bool = false) throws(ZMQError) {
        try sendFrame(frame, flags: Self.sendFlags(more: more, dontWait: dontWait))
    }

    private static func sendFlags(more: Bool, dontWait: Bool) -> Int32 {
        (dontWait ? ZMQ_DONTWAIT : 0) | (more ? ZMQ_SNDMORE : 0)
    }

    private func sendFrame(_ frame: HeldFrame, flags: Int32) throws(ZMQError) {
        guard !isClosed else { throw ZMQError(code: ENOTSOCK, operation: "zmq_msg_send") }
        while true {
            frame.reference(into: scratch)
            let rc = zmq_msg_send(scratch, handle, flags)
            if rc >= 0 { return } // libzmq has taken the message
            let error = ZMQError.last("zmq_msg_send")
            zmq_msg_close(scratch)
            if error.isInterrupted { continue }
            throw error
        }
    }

    private func sendFrame(_ frame: [UInt8], flags: Int32) throws(ZMQError) {
        guard !isClosed else { throw ZMQError(code: ENOTSOCK, operation: "zmq_send") }
        while true {
            let rc = frame.withUnsafeBytes { zmq_send(handle, $0.baseAddress, $0.count, flags) }
            if rc >= 0 { return }
            let error = ZMQError.last("zmq_send")
            if error.isInterrupted { continue }
            throw error
        }
    }

    /// Receives a whole multipart message.
    ///
    /// With `dontWait`, an empty queue throws an error whose ``ZMQError/isAgain`` is true. Once the
    /// first frame has arrived the rest are already queued (libzmq delivers messages atomically).
    public func receive(dontWait: Bool = false) throws(ZMQError) -> Message {
        var frames: [[UInt8]] = []
        var more = true
        var flags: Int32 = dontWait ? ZMQ_DONTWAIT : 0
        while more {
            let (frame, hasMore) = try receiveFrame(flags: flags)
            frames.append(frame)
            more = hasMore
            flags = 0
        }
        return Message(frames: frames)
    }

    /// Receives one frame, and whether more frames of the same message follow.
    public func receiveFrame(dontWait: Bool = false) throws(ZMQError) -> (frame: [UInt8], more: Bool) {
        try receiveFrame(flags: dontWait ? ZMQ_DONTWAIT : 0)
    }

    /// Receives one frame held as libzmq received it (see ``HeldFrame``), and whether more frames
    /// of the same message follow.
    public func receiveHeldFrame(dontWait: Bool = false) throws(ZMQError) -> (frame: HeldFrame, more: Bool) {
        let message = UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: 1)
        zmq_msg_init(message)
        do {
            try receive(into: message, flags: dontWait ? ZMQ_DONTWAIT : 0)
        } catch {
            zmq_msg_close(message)
            message.deallocate()
            throw error
        }
        let more = zmq_msg_more(message) != 0
        return (HeldFrame(owning: message), more)
    }

    /// Receives the next frame into `message` (initialized), interrupted calls retried.
    private func receive(into message: UnsafeMutablePointer<zmq_msg_t>, flags: Int32) throws(ZMQError) {
        guard !isClosed else { throw ZMQError(code: ENOTSOCK, operation: "zmq_msg_recv") }
        while zmq_msg_recv(message, handle, flags) < 0 {
            let error = ZMQError.last("zmq_msg_recv")
            if !error.isInterrupted { throw error }
        }
    }

    private func receiveFrame(flags: Int32) throws(ZMQError) -> (frame: [UInt8], more: Bool) {
        zmq_msg_init(scratch)
        defer { zmq_msg_close(scratch) }
        try receive(into: scratch, flags: flags)
        let size = zmq_msg_size(scratch)
        let frame: [UInt8]
        if size == 0 {
            frame = []
        } else {
            let source = zmq_msg_data(scratch)!
            frame = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                buffer.baseAddress!.update(from: source.assumingMemoryBound(to: UInt8.self), count: size)
                count = size
            }
        }
        return (frame, zmq_msg_more(scratch) != 0)
    }
}
