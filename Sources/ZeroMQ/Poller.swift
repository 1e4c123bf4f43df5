import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `zmq_poll` waits for, and what it reports.
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

/// A reusable set of sockets and file descriptors for `zmq_poll`.
///
/// The items array is kept between calls so that a reactor loop allocates nothing per iteration.
/// The sockets stay owned by their creator; the poller only borrows their handles, so the caller must
/// remove a socket before closing it. Debian's libzmq has no draft `zmq_poller_*` API, hence `zmq_poll`.
public struct Poller {
    private var items: [zmq_pollitem_t] = []

    /// An empty poller.
    public init() {}

    /// Number of items.
    public var count: Int { items.count }

    /// Adds a socket and returns its index.
    @discardableResult
    public mutating func add(_ socket: Socket, events: PollEvents = .readable) -> Int {
        items.append(zmq_pollitem_t(socket: socket.handle, fd: 0, events: events.rawValue, revents: 0))
        return items.count - 1
    }

    /// Adds a file descriptor (an eventfd, a pipe) and returns its index.
    @discardableResult
    public mutating func add(fileDescriptor: Int32, events: PollEvents = .readable) -> Int {
        items.append(zmq_pollitem_t(socket: nil, fd: fileDescriptor, events: events.rawValue, revents: 0))
        return items.count - 1
    }

    /// Removes the item at `index`; later items move down by one.
    public mutating func remove(at index: Int) {
        items.remove(at: index)
    }

    /// Changes what the item at `index` waits for.
    public mutating func setEvents(_ events: PollEvents, at index: Int) {
        items[index].events = events.rawValue
    }

    /// Waits until an item is ready or `timeoutMilliseconds` pass (-1: no limit; 0: just look).
    /// Returns how many items are ready. `EINTR` returns 0 so the caller re-checks its own state.
    public mutating func poll(timeoutMilliseconds: Int) throws(ZMQError) -> Int {
        let rc = items.withUnsafeMutableBufferPointer { zmq_poll($0.baseAddress, Int32($0.count), timeoutMilliseconds) }
        if rc >= 0 { return Int(rc) }
        let error = ZMQError.last("zmq_poll")
        if error.isInterrupted { return 0 }
        throw error
    }

    /// What the last ``poll(timeoutMilliseconds:)`` reported for the item at `index`.
    public func returnedEvents(at index: Int) -> PollEvents {
        PollEvents(rawValue: items[index].revents)
    }
}
