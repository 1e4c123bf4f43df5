import CZeroMQ
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One frame kept as libzmq holds it, its bytes never copied into Swift's: a large frame received
/// and sent on (a chunk of hosted content on its way through the gateway) passes through without a
/// copy, and its receiver reads it where libzmq put it.
///
/// A held frame never changes. Sending it (``Socket/sendFrame(_:more:dontWait:)``) gives libzmq a
/// reference to its bytes, not a copy (libzmq counts the references to a buffer of more than 33
/// bytes and frees it with the last), so one frame can be sent again and read meanwhile, from any
/// thread.
public final class HeldFrame: @unchecked Sendable {
    /// The message, owned: closed and freed with this frame.
    private let message: UnsafeMutablePointer<zmq_msg_t>
    /// Taking a reference marks the message shared, a write to it: one at a time.
    private let referencing = Mutex(())
    /// The frame's size in bytes.
    public let count: Int

    /// Takes `message`, received, as the frame's (it closes and frees it).
    init(owning message: UnsafeMutablePointer<zmq_msg_t>) {
        self.message = message
        self.count = zmq_msg_size(message)
    }

    /// A frame of `size` bytes, not yet written.
    private init(size: Int) {
        message = .allocate(capacity: 1)
        guard zmq_msg_init_size(message, size) == 0 else {
            // libzmq fails only when it cannot allocate the buffer: as Swift does there, stop.
            fatalError("zmq_msg_init_size(\(size)): \(String(cString: zmq_strerror(zmq_errno())))")
        }
        count = size
    }

    /// A frame of a copy of `bytes`.
    public convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(size: bytes.count)
        fill(from: bytes)
    }

    /// A frame of a copy of `bytes`.
    public convenience init(_ bytes: [UInt8]) {
        self.init(size: bytes.count)
        bytes.withUnsafeBytes { fill(from: $0) }
    }

    /// Writes `bytes` (the frame's size) into a frame just made.
    private func fill(from bytes: UnsafeRawBufferPointer) {
        if let base = bytes.baseAddress, !bytes.isEmpty { zmq_msg_data(message).copyMemory(from: base, byteCount: bytes.count) }
    }

    deinit {
        zmq_msg_close(message)
        message.deallocate()
    }

    /// Calls `body` with the frame's bytes, valid during the call.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: count == 0 ? nil : zmq_msg_data(message), count: count))
    }

    /// A copy of the frame's bytes.
    public var bytes: [UInt8] {
        withUnsafeBytes { [UInt8]($0) }
    }

    /// Makes `target` (uninitialized) a message with the frame's bytes, to be sent: a reference to
    /// them, or a copy for a frame of at most 33 bytes (which libzmq keeps inside the message).
    func reference(into target: UnsafeMutablePointer<zmq_msg_t>) {
        zmq_msg_init(target)
        let rc = referencing.withLock { _ in zmq_msg_copy(target, message) }
        precondition(rc == 0, "zmq_msg_copy of a held frame: \(String(cString: zmq_strerror(zmq_errno())))")
    }
}

extension HeldFrame: Equatable {
    /// Frames of the same bytes are equal.
    public static func == (left: HeldFrame, right: HeldFrame) -> Bool {
        left.count == right.count && left.withUnsafeBytes { a in right.withUnsafeBytes { b in a.elementsEqual(b) } }
    }
}

extension HeldFrame: CustomStringConvertible {
    public var description: String { "HeldFrame(\(count) bytes)" }
}
