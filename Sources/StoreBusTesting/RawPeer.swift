import Foundation
import ZeroMQ

/// A DEALER socket speaking raw frames to a server, for tests of malformed and hostile input.
public final class RawPeer: @unchecked Sendable {
    // Invariant for @unchecked Sendable: one test task owns the peer and makes one call at a time; a
    // blocking receive runs on a thread of its own (``receive(timeout:)``) while that task waits for
    // it, so the socket is only ever used by one thread at a time, with the hand-over ordered by the
    // continuation (the full memory barrier ZeroMQ asks for when a socket changes threads).
    public let context: ZeroMQ.Context
    public let socket: Socket

    public init(endpoint: String, context: ZeroMQ.Context = ZeroMQContextForTests.shared) throws {
        self.context = context
        socket = try Socket(context: context, type: .dealer)
        try socket.set(.receiveHighWaterMark(0))
        try socket.set(.sendHighWaterMark(0))
        try socket.connect(endpoint)
    }

    deinit { socket.close() }

    public func send(_ frames: [[UInt8]]) throws {
        try socket.send(frames: frames)
    }

    public func send(strings: [String]) throws {
        try socket.send(frames: strings.map { Array($0.utf8) })
    }

    /// The next message, or nil when none arrives within `timeout`. The wait runs off Swift's
    /// cooperative pool: with two cores it has two threads, and a test blocking one of them for
    /// half a second delayed other tests' deadlines past their bounds.
    public func receive(timeout: Duration = .seconds(5)) async throws -> Message? {
        try await onThread("raw-peer") { try self.receiveBlocking(timeout: timeout) }
    }

    /// ``receive(timeout:)`` on the calling thread, for loops already running off the pool.
    public func receiveBlocking(timeout: Duration = .seconds(5)) throws -> Message? {
        var poller = Poller()
        poller.add(socket)
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let message = try? socket.receive(dontWait: true) { return message }
            let left = ContinuousClock.now.duration(to: deadline)
            _ = try poller.poll(timeoutMilliseconds: max(1, Int(left.components.seconds * 1000) + Int(left.components.attoseconds / 1_000_000_000_000_000)))
        }
        return try? socket.receive(dontWait: true)
    }
}

/// A small deterministic random generator (SplitMix64), so a fuzz failure can be replayed.
public struct SeededRandom: RandomNumberGenerator {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// One ZeroMQ context for a test process's sockets (never terminated: it lives as long as the test
/// process).
public enum ZeroMQContextForTests {
    public static let shared: ZeroMQ.Context = try! ZeroMQ.Context()
}
