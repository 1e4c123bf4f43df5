import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a poll waits for, and what it reports.
public struct PollEvents: OptionSet, Sendable {
    public let rawValue: Int16
    public init(rawValue: Int16) { self.rawValue = rawValue }
    /// A message can be received (a file descriptor is readable).
    public static let readable = PollEvents(rawValue: Int16(ZMQ_POLLIN))
    /// A message can be sent without blocking.
    public static let writable = PollEvents(rawValue: Int16(ZMQ_POLLOUT))
    /// An error condition on a file descriptor.
    public static let error = PollEvents(rawValue: Int16(ZMQ_POLLERR))
}

/// A reusable set of sockets and file descriptors to wait on, level-triggered as `zmq_poll` is.
///
/// The arrays are kept between calls so that a reactor loop allocates nothing per iteration. The
/// sockets stay owned by their creator, who removes a socket before closing it.
///
/// It does what `zmq_poll` does with fewer system calls. `zmq_poll` reads every socket's
/// `ZMQ_EVENTS` before it blocks and again after (the look after the block as many times as it
/// wakes), and each look at a socket with no command queued for it costs libzmq a `poll` and a
/// `getpid` of its own: with the seven sockets of a gateway's loop, most of the gateway's system
/// calls. A socket's notification descriptor (`ZMQ_FD`) is readable while commands from libzmq's
/// I/O threads (a message arrived, room to write again) wait for the socket. Only a call on the
/// socket processes them, and one that does may leave the socket with a message to read and
/// nothing on the descriptor. So the poller looks (`ZMQ_EVENTS`) at the sockets that had such a
/// call since their last look (``Socket`` marks each use of its handle) and at those whose descriptor
/// is readable, and at no other: a socket looked at and left alone since has nothing new unless
/// its descriptor says so. A socket reported ready stays marked, so a caller that does not read it
/// hears of it again. Debian's libzmq has no draft `zmq_poller_*` API, and that one looks at every
/// socket on every call too.
public struct Poller {
    /// One entry: a socket (nil for a plain file descriptor), what it waits for, and what the last
    /// poll reported.
    private struct Entry {
        let socket: Socket?
        var events: Int16
        var returned: Int16 = 0
    }

    private var entries: [Entry] = []
    /// Each entry's descriptor for poll(2): a socket's `ZMQ_FD`, always waited on for reading.
    private var descriptors: [pollfd] = []

    /// Whether ``poll(timeoutMilliseconds:)`` is `zmq_poll` itself: the plain implementation this
    /// poller's shortcut stands in for (StoreBus's fast paths off).
    public let plain: Bool

    /// An empty poller; `plain` polls with `zmq_poll`.
    public init(plain: Bool = false) {
        self.plain = plain
    }

    /// Number of items.
    public var count: Int { entries.count }

    /// Adds a socket and returns its index.
    @discardableResult
    public mutating func add(_ socket: Socket, events: PollEvents = .readable) -> Int {
        var descriptor: Int32 = -1
        var size = MemoryLayout<Int32>.size
        // ZMQ_FD of a socket of this library (never thread-safe) is its mailbox's, fixed for its
        // lifetime; reading it fails only for a closed socket, which the poll below then ignores
        // (poll(2) skips negative descriptors) while ZMQ_EVENTS reports the failure.
        _ = zmq_getsockopt(socket.rawHandle, ZMQ_FD, &descriptor, &size)
        // Its first look is due: what arrived before it was added may have no wake-up left.
        socket.needsLook = true
        entries.append(Entry(socket: socket, events: events.rawValue))
        descriptors.append(pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0))
        return entries.count - 1
    }

    /// Adds a file descriptor (an eventfd, a pipe) and returns its index.
    @discardableResult
    public mutating func add(fileDescriptor: Int32, events: PollEvents = .readable) -> Int {
        entries.append(Entry(socket: nil, events: events.rawValue))
        descriptors.append(pollfd(fd: fileDescriptor, events: Self.systemEvents(events.rawValue), revents: 0))
        return entries.count - 1
    }

    /// Removes the item at `index`; later items move down by one.
    public mutating func remove(at index: Int) {
        entries.remove(at: index)
        descriptors.remove(at: index)
    }

    /// Changes what the item at `index` waits for.
    public mutating func setEvents(_ events: PollEvents, at index: Int) {
        entries[index].events = events.rawValue
        if let socket = entries[index].socket {
            socket.needsLook = true
        } else {
            descriptors[index].events = Self.systemEvents(events.rawValue)
        }
    }

    /// Waits until an item is ready or `timeoutMilliseconds` pass (-1: no limit; 0: just look).
    /// Returns how many items are ready. `EINTR` returns what was ready before it (often 0), so the
    /// caller re-checks its own state. Throws what a socket's look throws (`ETERM` once the context
    /// is shutting down).
    public mutating func poll(timeoutMilliseconds: Int) throws(ZMQError) -> Int {
        if plain { return try zmqPoll(timeoutMilliseconds: timeoutMilliseconds) }
        var ready = 0
        for index in entries.indices {
            entries[index].returned = 0
            if let socket = entries[index].socket, socket.needsLook {
                ready += try look(at: index, socket)
            }
        }
        // Even with a socket ready, the descriptors are polled (without waiting): a busy socket must
        // not keep the others from being heard.
        var timeout = ready > 0 ? 0 : Int32(clamping: timeoutMilliseconds)
        // A wake-up that brings nothing ready (commands that were not messages) waits on until the
        // deadline, as `zmq_poll` does.
        let deadline = timeout > 0 ? Self.nowMilliseconds() + Int64(timeout) : 0
        while true {
            let rc = descriptors.withUnsafeMutableBufferPointer { systemPoll($0.baseAddress, nfds_t($0.count), timeout) }
            if rc < 0 {
                let code = errno
                if code == EINTR { return ready }
                throw ZMQError(code: code, operation: "poll")
            }
            guard rc > 0 else { return ready }
            for index in entries.indices where descriptors[index].revents != 0 {
                if let socket = entries[index].socket {
                    if entries[index].returned == 0 { ready += try look(at: index, socket) }
                } else {
                    let returned = Self.zmqEvents(descriptors[index].revents) & (entries[index].events | Int16(ZMQ_POLLERR))
                    entries[index].returned = returned
                    if returned != 0 { ready += 1 }
                }
            }
            if ready > 0 || timeout == 0 { return ready }
            if timeout > 0 {
                let left = deadline - Self.nowMilliseconds()
                if left <= 0 { return 0 }
                timeout = Int32(clamping: left)
            }
        }
    }

    /// ``poll(timeoutMilliseconds:)`` as `zmq_poll` does it: every socket's `ZMQ_EVENTS` read before
    /// and after the wait.
    private mutating func zmqPoll(timeoutMilliseconds: Int) throws(ZMQError) -> Int {
        var items = entries.indices.map { index in
            zmq_pollitem_t(
                socket: entries[index].socket?.rawHandle, fd: entries[index].socket == nil ? descriptors[index].fd : 0,
                events: entries[index].events, revents: 0
            )
        }
        let rc = items.withUnsafeMutableBufferPointer { zmq_poll($0.baseAddress, Int32($0.count), timeoutMilliseconds) }
        if rc < 0 {
            let error = ZMQError.last("zmq_poll")
            if error.isInterrupted { return 0 }
            throw error
        }
        for index in entries.indices {
            entries[index].returned = items[index].revents & (entries[index].events | Int16(ZMQ_POLLERR))
        }
        return Int(rc)
    }

    /// The monotonic clock, in milliseconds.
    private static func nowMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// Reads a socket's `ZMQ_EVENTS` (processing its queued commands) into its entry; 1 when it
    /// is ready for what it waits for. A ready socket stays marked for the next poll.
    private mutating func look(at index: Int, _ socket: Socket) throws(ZMQError) -> Int {
        guard !socket.isClosed else { throw ZMQError(code: ENOTSOCK, operation: "zmq_getsockopt(ZMQ_EVENTS)") }
        var events: Int32 = 0
        var size = MemoryLayout<Int32>.size
        while zmq_getsockopt(socket.rawHandle, ZMQ_EVENTS, &events, &size) != 0 {
            let error = ZMQError.last("zmq_getsockopt(ZMQ_EVENTS)")
            if !error.isInterrupted { throw error }
        }
        let returned = Int16(truncatingIfNeeded: events) & entries[index].events
        entries[index].returned = returned
        socket.needsLook = returned != 0
        return returned != 0 ? 1 : 0
    }

    /// What the last ``poll(timeoutMilliseconds:)`` reported for the item at `index`.
    public func returnedEvents(at index: Int) -> PollEvents {
        PollEvents(rawValue: entries[index].returned)
    }

    /// poll(2)'s flags for ZeroMQ's (which number them differently).
    private static func systemEvents(_ events: Int16) -> Int16 {
        var flags: Int16 = 0
        if events & Int16(ZMQ_POLLIN) != 0 { flags |= Int16(POLLIN) }
        if events & Int16(ZMQ_POLLOUT) != 0 { flags |= Int16(POLLOUT) }
        return flags
    }

    /// ZeroMQ's flags for poll(2)'s, as `zmq_poll` gives them: anything but readable or writable
    /// (a hang-up, an error) is an error.
    private static func zmqEvents(_ flags: Int16) -> Int16 {
        var events: Int16 = 0
        if flags & Int16(POLLIN) != 0 { events |= Int16(ZMQ_POLLIN) }
        if flags & Int16(POLLOUT) != 0 { events |= Int16(ZMQ_POLLOUT) }
        if flags & ~Int16(POLLIN | POLLOUT | POLLPRI) != 0 { events |= Int16(ZMQ_POLLERR) }
        return events
    }
}

/// poll(2), under a name the poller's own `poll` does not hide.
private func systemPoll(_ descriptors: UnsafeMutablePointer<pollfd>?, _ count: nfds_t, _ timeout: Int32) -> Int32 {
    poll(descriptors, count, timeout)
}
