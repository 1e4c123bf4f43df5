import Foundation
import Histogram
import StoreBus
import StoreSchema
import ZeroMQ

/// The transport floor: a plain libzmq DEALER/ROUTER echo, with and without the JSON work.
struct TransportBench {
    let body: [UInt8]
    let iterations: Int
    let window: Int

    /// Starts an echo ROUTER thread; `transform` turns each request body into the reply body.
    static func startEcho(context: ZeroMQ.Context, transform: @escaping @Sendable ([UInt8]) -> [UInt8]) throws -> String {
        let ready = DispatchSemaphore(value: 0)
        let endpoint = LockedBox("")
        let thread = Thread {
            guard let router = try? Socket(context: context, type: .router) else { return }
            defer { router.close() }
            try? router.bind("tcp://127.0.0.1:*")
            endpoint.set(router.lastEndpoint)
            ready.signal()
            while true {
                guard let message = try? router.receive() else { return } // ETERM at shutdown
                var frames = message.frames
                frames[frames.count - 1] = transform(frames[frames.count - 1])
                do { try router.send(frames: frames) } catch { return }
            }
        }
        thread.start()
        ready.wait()
        return endpoint.get()
    }

    /// Round-trip latency percentiles in microseconds, one message at a time.
    func roundTrips(endpoint: String, context: ZeroMQ.Context) throws -> Histogram<UInt64> {
        let dealer = try Socket(context: context, type: .dealer)
        defer { dealer.close() }
        try dealer.connect(endpoint)
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
        for index in 0..<(iterations + iterations / 10) {
            let start = DispatchTime.now().uptimeNanoseconds
            try dealer.send(frames: [body])
            _ = try dealer.receive()
            if index >= iterations / 10 {
                _ = histogram.record(DispatchTime.now().uptimeNanoseconds - start)
            }
        }
        return histogram
    }

    /// Messages per second with `window` requests in flight, after a warm-up of a tenth of
    /// `iterations`; `encode`/`decode` stand for the client's JSON work.
    func pipelined(endpoint: String, context: ZeroMQ.Context, encode: () -> [UInt8], decode: ([UInt8]) -> Void) throws -> Double {
        Double(iterations) / (try pipelined(endpoint: endpoint, context: context, count: iterations, warmUp: true, encode: encode, decode: decode))
    }

    /// Seconds taken by `count` messages with `window` requests in flight, after a warm-up of a tenth
    /// of `count` if asked.
    func pipelined(
        endpoint: String, context: ZeroMQ.Context, count: Int, warmUp: Bool, encode: () -> [UInt8], decode: ([UInt8]) -> Void
    ) throws -> Double {
        let dealer = try Socket(context: context, type: .dealer)
        defer { dealer.close() }
        try dealer.set(.sendHighWaterMark(100_000))
        try dealer.set(.receiveHighWaterMark(100_000))
        try dealer.connect(endpoint)
        func run(_ count: Int) throws {
            var sent = 0
            var received = 0
            while sent < min(window, count) {
                try dealer.send(frames: [encode()])
                sent += 1
            }
            while received < count {
                decode(try dealer.receive().frames[0])
                received += 1
                if sent < count {
                    try dealer.send(frames: [encode()])
                    sent += 1
                }
            }
        }
        // The first round trips include the connection's set-up.
        try run(warmUp ? max(count / 10, window) : window)
        let start = DispatchTime.now().uptimeNanoseconds
        try run(count)
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }
}

/// A value two threads share.
final class LockedBox<Value: Sendable>: @unchecked Sendable {
    // Invariant: `value` is only touched while holding `lock`.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func set(_ newValue: Value) { lock.lock(); value = newValue; lock.unlock() }
    func get() -> Value { lock.lock(); defer { lock.unlock() }; return value }
}
