import CZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An error reported by libzmq: the `errno` value it set and the operation that failed.
///
/// The common cases have names (`isAgain`, `isTerminated`, `isHostUnreachable`) so callers can branch
/// on them without comparing raw numbers; every other errno still travels with its `zmq_strerror` text.
public struct ZMQError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The `errno` value (`EAGAIN`, `ETERM`, `EHOSTUNREACH`, ...).
    public let code: Int32
    /// The libzmq call that failed, for example `"zmq_bind"`.
    public let operation: String

    /// Creates an error for `code` raised by `operation`.
    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// Captures the calling thread's current `zmq_errno()`.
    static func last(_ operation: String) -> ZMQError {
        ZMQError(code: zmq_errno(), operation: operation)
    }

    /// `zmq_strerror` text for the code.
    public var message: String { String(cString: zmq_strerror(code)) }

    /// The operation would block (`EAGAIN`): a non-blocking send found the queue full, or a
    /// non-blocking receive found nothing.
    public var isAgain: Bool { code == EAGAIN }
    /// The context was shut down or terminated (`ETERM`); the socket must be closed.
    public var isTerminated: Bool { code == ETERM_CODE }
    /// A ROUTER with ROUTER_MANDATORY could not route the message: the peer is unknown or gone.
    public var isHostUnreachable: Bool { code == EHOSTUNREACH }
    /// The call was interrupted by a signal (`EINTR`); the binding retries these itself.
    public var isInterrupted: Bool { code == EINTR }

    public var description: String { "\(operation): \(message) (errno \(code))" }
}

/// libzmq's own errno for a terminated context (it is not a system errno).
let ETERM_CODE: Int32 = storebus_zmq_eterm
