import CZeroMQ
import Synchronization

/// Connection events a socket monitor reports.
public struct SocketEvents: OptionSet, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let connected = SocketEvents(rawValue: ZMQ_EVENT_CONNECTED)
    public static let connectDelayed = SocketEvents(rawValue: ZMQ_EVENT_CONNECT_DELAYED)
    public static let connectRetried = SocketEvents(rawValue: ZMQ_EVENT_CONNECT_RETRIED)
    public static let listening = SocketEvents(rawValue: ZMQ_EVENT_LISTENING)
    public static let bindFailed = SocketEvents(rawValue: ZMQ_EVENT_BIND_FAILED)
    public static let accepted = SocketEvents(rawValue: ZMQ_EVENT_ACCEPTED)
    public static let closed = SocketEvents(rawValue: ZMQ_EVENT_CLOSED)
    public static let disconnected = SocketEvents(rawValue: ZMQ_EVENT_DISCONNECTED)
    public static let monitorStopped = SocketEvents(rawValue: ZMQ_EVENT_MONITOR_STOPPED)
    /// The ZMTP handshake finished: the peer is ready for messages.
    public static let handshakeSucceeded = SocketEvents(rawValue: ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
    public static let handshakeFailedProtocol = SocketEvents(rawValue: ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
    public static let handshakeFailedAuth = SocketEvents(rawValue: ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
    public static let handshakeFailedNoDetail = SocketEvents(rawValue: ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
}

/// One event read from a monitor socket.
public struct SocketEvent: Sendable, Equatable {
    /// Which event (a single flag).
    public let event: SocketEvents
    /// The event's value: a file descriptor, an errno, or a retry interval, depending on the event.
    public let value: UInt32
    /// The endpoint concerned, for example `tcp://127.0.0.1:5555`.
    public let endpoint: String

    /// Parses a monitor message (frame 1: 16-bit event + 32-bit value, native byte order; frame 2:
    /// the endpoint). Returns nil for anything else.
    public init?(_ message: Message) {
        guard message.frames.count == 2, message.frames[0].count == 6 else { return nil }
        let head = message.frames[0]
        let event = head.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 0, as: UInt16.self) }
        let value = head.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 2, as: UInt32.self) }
        self.event = SocketEvents(rawValue: Int32(event))
        self.value = value
        self.endpoint = String(decoding: message.frames[1], as: UTF8.self)
    }
}

extension Socket {
    /// Starts publishing this socket's connection events on a PAIR endpoint (`inproc://...`).
    /// Connect a `.pair` socket to `endpoint` to read them as ``SocketEvent`` messages.
    public func monitor(endpoint: String, events: SocketEvents) throws(ZMQError) {
        if zmq_socket_monitor(handle, endpoint, events.rawValue) != 0 { throw ZMQError.last("zmq_socket_monitor") }
    }

    /// Starts this socket's monitor on an `inproc://` endpoint of its own and returns the connected
    /// PAIR socket that reads its events (``SocketEvent``). The caller owns the PAIR socket: call
    /// ``stopMonitor()`` on this socket before closing it.
    public func openMonitor(context: Context, events: SocketEvents) throws(ZMQError) -> Socket {
        let endpoint = "inproc://storebus-monitor-\(monitorEndpoints.wrappingAdd(1, ordering: .relaxed).oldValue)"
        try monitor(endpoint: endpoint, events: events)
        let pair = try Socket(context: context, type: .pair)
        do {
            try pair.connect(endpoint)
        } catch {
            stopMonitor()
            pair.close()
            throw error
        }
        return pair
    }

    /// Stops the monitor started by ``monitor(endpoint:events:)``.
    public func stopMonitor() {
        _ = zmq_socket_monitor(handle, nil, 0)
    }
}

/// Numbers the monitors' `inproc://` endpoints, which must be unique within a context.
private let monitorEndpoints = Atomic<UInt64>(0)
