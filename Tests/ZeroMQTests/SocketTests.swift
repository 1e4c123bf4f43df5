import CZeroMQ
import Foundation
import StoreBusTesting
import Testing

@testable import ZeroMQ

@Suite("ZeroMQ sockets")
struct SocketTests {
    @Test("a DEALER and a ROUTER exchange multipart messages, empty and large frames included")
    func dealerRouterRoundTrip() throws {
        let context = try Context()
        defer { context.terminate() }
        let router = try Socket(context: context, type: .router)
        defer { router.close() }
        try router.bind("tcp://127.0.0.1:*")
        let dealer = try Socket(context: context, type: .dealer)
        defer { dealer.close() }
        try dealer.connect(router.lastEndpoint)

        let big = [UInt8](repeating: 0xAB, count: 100_000)
        // 33 bytes is the largest message a zmq_msg_t stores inline; 34 goes to the heap.
        let frames: [[UInt8]] = [[], Array("x".utf8), [UInt8](repeating: 1, count: 33), [UInt8](repeating: 2, count: 34), big]
        try dealer.send(Message(frames: frames))
        let received = try router.receive()
        #expect(received.frames.count == frames.count + 1, "ROUTER prepends the routing id")
        #expect(Array(received.frames.dropFirst()) == frames)

        try router.send(Message(frames: [received.frames[0], Array("reply".utf8)]))
        #expect(try dealer.receive() == Message(strings: ["reply"]))
    }

    @Test("a non-blocking receive on an empty socket throws EAGAIN as a typed error")
    func againIsTyped() throws {
        let context = try Context()
        defer { context.terminate() }
        let pull = try Socket(context: context, type: .pull)
        defer { pull.close() }
        try pull.bind("inproc://again")
        let error = #expect(throws: ZMQError.self) { try pull.receive(dontWait: true) }
        #expect(error?.isAgain == true)
        #expect(error?.message.isEmpty == false)
    }

    @Test("ROUTER_MANDATORY turns a send to an unknown peer into EHOSTUNREACH")
    func routerMandatory() throws {
        let context = try Context()
        defer { context.terminate() }
        let router = try Socket(context: context, type: .router)
        defer { router.close() }
        try router.set(.routerMandatory(true))
        try router.bind("inproc://mandatory")
        let error = #expect(throws: ZMQError.self) {
            try router.send(Message(strings: ["nobody", "hello"]), dontWait: true)
        }
        #expect(error?.isHostUnreachable == true)
    }

    @Test("context shutdown wakes a blocked receive with ETERM, and terminate then returns")
    func shutdownWakesBlockedReceive() async throws {
        let context = try Context()
        let finished = DispatchSemaphore(value: 0)
        let sawTerm = LockedFlag()
        let thread = Thread {
            do {
                let pull = try Socket(context: context, type: .pull)
                try pull.bind("inproc://blocked")
                do { _ = try pull.receive() } catch let error as ZMQError { sawTerm.set(error.isTerminated) }
                pull.close()
            } catch {}
            finished.signal()
        }
        thread.start()
        try await Task.sleep(for: .milliseconds(50))
        context.shutdown()
        #expect(finished.wait(timeout: .now() + 5) == .success)
        context.terminate()
        #expect(sawTerm.value)
    }

    @Test("a message over MAXMSGSIZE is never delivered and the peer is disconnected")
    func maxMessageSize() async throws {
        // The waits below run on a thread of their own: polling on the cooperative pool would hold
        // one of its two threads (on a 2-core machine) away from other tests for up to seconds.
        let (deliveredSizes, gotAfter) = try await onThread("max-message-size") { () throws -> ([Int], Bool) in
            let context = try Context()
            defer { context.terminate() }
            let router = try Socket(context: context, type: .router)
            defer { router.close() }
            try router.set(.maxMessageSize(1024))
            try router.bind("tcp://127.0.0.1:*")
            let dealer = try Socket(context: context, type: .dealer)
            defer { dealer.close() }
            try dealer.connect(router.lastEndpoint)
            try dealer.send(Message(frames: [[UInt8](repeating: 7, count: 4096)]))
            try dealer.send(Message(strings: ["small"]))
            var poller = Poller()
            poller.add(router)
            // The oversized message kills the connection; the small one behind it on the same
            // connection is lost with it. The DEALER reconnects, and a new small message gets through.
            _ = try poller.poll(timeoutMilliseconds: 300)
            var delivered: [Message] = []
            while let message = try? router.receive(dontWait: true) { delivered.append(message) }
            try dealer.send(Message(strings: ["after"]))
            let deadline = Date().addingTimeInterval(5)
            var gotAfter = false
            while !gotAfter && Date() < deadline {
                if try poller.poll(timeoutMilliseconds: 100) > 0, let message = try? router.receive(dontWait: true) {
                    gotAfter = message.frames.last == Array("after".utf8)
                }
            }
            return (delivered.map(\.byteCount), gotAfter)
        }
        #expect(deliveredSizes.allSatisfy { $0 < 1024 + 64 })
        #expect(gotAfter)
    }

    @Test("a socket monitor reports the handshake and the disconnect")
    func monitorReportsConnections() throws {
        let context = try Context()
        defer { context.terminate() }
        let router = try Socket(context: context, type: .router)
        try router.bind("tcp://127.0.0.1:*")
        let endpoint = router.lastEndpoint
        let dealer = try Socket(context: context, type: .dealer)
        defer { dealer.close() }
        try dealer.monitor(endpoint: "inproc://monitor-test", events: [.handshakeSucceeded, .disconnected])
        let monitor = try Socket(context: context, type: .pair)
        defer { monitor.close() }
        try monitor.connect("inproc://monitor-test")
        try dealer.connect(endpoint)
        let first = try #require(SocketEvent(try monitor.receive()))
        #expect(first.event == .handshakeSucceeded)
        #expect(first.endpoint == endpoint)
        router.close()
        let second = try #require(SocketEvent(try monitor.receive()))
        #expect(second.event == .disconnected)
        dealer.stopMonitor()
    }

    @Test("CURVE: a client with the server's key talks; one with a wrong key is never heard")
    func curveEncryption() async throws {
        try #require(Context.has("curve"))
        let server = try CurveKeyPair.generate()
        let client = try CurveKeyPair.generate()
        let impostor = try CurveKeyPair.generate()
        #expect(server.publicKey.count == 40 && server.secretKey.count == 40)
        #expect(try CurveKeyPair.publicKey(forSecretKey: server.secretKey) == server.publicKey)

        // The blocking receive and the 200 ms poll run on a thread of their own, off the pool.
        let (received, laterMessages) = try await onThread("curve") { () throws -> (Message, Int) in
            let context = try Context()
            defer { context.terminate() }
            let router = try Socket(context: context, type: .router)
            defer { router.close() }
            try router.set(.curveServer(secretKey: server.secretKey))
            try router.bind("tcp://127.0.0.1:*")

            let wrong = try Socket(context: context, type: .dealer)
            defer { wrong.close() }
            try wrong.set(.curveClient(serverKey: impostor.publicKey, publicKey: client.publicKey, secretKey: client.secretKey))
            try wrong.connect(router.lastEndpoint)
            try wrong.send(Message(strings: ["spoofed"]))

            let good = try Socket(context: context, type: .dealer)
            defer { good.close() }
            try good.set(.curveClient(serverKey: server.publicKey, publicKey: client.publicKey, secretKey: client.secretKey))
            try good.connect(router.lastEndpoint)
            try good.send(Message(strings: ["sealed"]))

            let received = try router.receive()
            var poller = Poller()
            poller.add(router)
            return (received, try poller.poll(timeoutMilliseconds: 200))
        }
        #expect(received.frames.last == Array("sealed".utf8))
        #expect(laterMessages == 0, "the wrongly keyed client's message never arrives")
    }

    @Test("the poller reports a readable eventfd-like descriptor and a readable socket")
    func pollerMixesSocketsAndDescriptors() throws {
        let context = try Context()
        defer { context.terminate() }
        let pull = try Socket(context: context, type: .pull)
        defer { pull.close() }
        try pull.bind("inproc://poller")
        let push = try Socket(context: context, type: .push)
        defer { push.close() }
        try push.connect("inproc://poller")
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }

        var poller = Poller()
        let socketIndex = poller.add(pull)
        let pipeIndex = poller.add(fileDescriptor: fds[0])
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0)
        var byte: UInt8 = 1
        #expect(write(fds[1], &byte, 1) == 1)
        try push.send(Message(strings: ["ping"]))
        #expect(try poller.poll(timeoutMilliseconds: 1000) == 2)
        #expect(poller.returnedEvents(at: socketIndex).contains(.readable))
        #expect(poller.returnedEvents(at: pipeIndex).contains(.readable))
    }
}

extension SocketTests {
    @Test("the poller reports a message whose wake-up a call on the socket consumed, and one left unread again")
    func pollerAfterConsumedWakeUp() throws {
        let context = try Context()
        defer { context.terminate() }
        // b is polled; a sends to it.
        let (a, b) = (try Socket(context: context, type: .pair), try Socket(context: context, type: .pair))
        defer { a.close(); b.close() }
        try b.bind("inproc://consumed")
        try a.connect("inproc://consumed")
        var poller = Poller()
        let index = poller.add(b)
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0)

        // The message's command wakes b's descriptor; reading ZMQ_EVENTS (as a send or a receive
        // would) processes it, and the descriptor goes quiet with the message still queued.
        try a.send(Message(strings: ["one"]))
        #expect(try b.intOption(ZMQ_EVENTS) & ZMQ_POLLIN != 0)
        #expect(try poller.poll(timeoutMilliseconds: 1000) == 1)
        #expect(poller.returnedEvents(at: index).contains(.readable))
        // Not read: reported again, at once.
        #expect(try poller.poll(timeoutMilliseconds: 0) == 1)
        #expect(try b.receive(dontWait: true) == Message(strings: ["one"]))
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0)
        #expect(!poller.returnedEvents(at: index).contains(.readable))

        // Two messages, one read: the other is still reported.
        try a.send(Message(strings: ["two"]))
        try a.send(Message(strings: ["three"]))
        #expect(try poller.poll(timeoutMilliseconds: 1000) == 1)
        #expect(try b.receive(dontWait: true) == Message(strings: ["two"]))
        #expect(try poller.poll(timeoutMilliseconds: 1000) == 1)
        #expect(try b.receive(dontWait: true) == Message(strings: ["three"]))
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0)
    }

    @Test("the poller waits out its timeout through wake-ups that bring no message, and wakes for one")
    func pollerWaitsThroughCommands() async throws {
        let context = try Context()
        defer { context.terminate() }
        let router = try Socket(context: context, type: .router)
        defer { router.close() }
        try router.bind("tcp://127.0.0.1:*")
        var poller = Poller()
        let index = poller.add(router)
        #expect(try poller.poll(timeoutMilliseconds: 0) == 0)
        // A peer connects (commands for the router: a new pipe) and sends nothing.
        let dealer = try Socket(context: context, type: .dealer)
        defer { dealer.close() }
        try dealer.connect(router.lastEndpoint)
        let start = ContinuousClock.now
        #expect(try poller.poll(timeoutMilliseconds: 300) == 0)
        #expect(ContinuousClock.now - start >= .milliseconds(290))

        try dealer.send(Message(strings: ["hello"]))
        #expect(try poller.poll(timeoutMilliseconds: 5000) == 1)
        #expect(poller.returnedEvents(at: index).contains(.readable))
        #expect(try router.receive(dontWait: true).frames.last == Array("hello".utf8))
    }
}

extension SocketTests {
    /// This process's threads named like libzmq's I/O threads, by thread id, with their scheduling
    /// policy (field 41 of /proc/<tid>/stat).
    static func ioThreadPolicies() throws -> [Int: Int] {
        var policies: [Int: Int] = [:]
        for entry in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") {
            guard let tid = Int(entry),
                let name = try? String(contentsOfFile: "/proc/self/task/\(entry)/comm", encoding: .utf8),
                name.hasPrefix("ZMQbg/IO"),
                let fields = ProcessStat.fields(of: pid_t(tid))
            else { continue }
            // From field 3 (the state) on, so the policy, field 41, is the 39th.
            if fields.count > 38, let policy = Int(fields[38]) { policies[tid] = policy }
        }
        return policies
    }

    /// The I/O threads that are not among `known`, once one of them satisfies `enough` (a thread
    /// names itself after it starts), or what there is after two seconds.
    static func newIOThreads(besides known: [Int: Int], until enough: (Int) -> Bool = { _ in true }) async throws -> [Int: Int] {
        let end = ContinuousClock.now + .seconds(2)
        while true {
            let found = try ioThreadPolicies().filter { known[$0.key] == nil }
            if found.values.contains(where: enough) || ContinuousClock.now > end { return found }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test("a context's I/O threads run under SCHED_BATCH, unless it is made without")
    func ioThreadsBatchScheduled() async throws {
        let before = try Self.ioThreadPolicies()
        let batched = try Context()
        defer { batched.terminate() }
        // The first socket starts the I/O threads.
        let first = try Socket(context: batched, type: .pair)
        first.close()
        let newBatched = try await Self.newIOThreads(besides: before)
        #expect(!newBatched.isEmpty)
        // Other tests running meanwhile make contexts with the default too.
        #expect(newBatched.values.allSatisfy { $0 == Int(storebus_sched_batch) }, "\(newBatched)")

        let known = before.merging(newBatched) { old, _ in old }
        let plain = try Context(batchScheduledIO: false)
        defer { plain.terminate() }
        let second = try Socket(context: plain, type: .pair)
        second.close()
        // Another test's thread may name itself meanwhile: wait for this context's.
        let newPlain = try await Self.newIOThreads(besides: known) { $0 == Int(SCHED_OTHER) }
        #expect(newPlain.values.contains(Int(SCHED_OTHER)), "\(newPlain)")
    }
}

/// A Bool that two threads can share.
final class LockedFlag: @unchecked Sendable {
    // Invariant: `stored` is only touched while holding `lock`.
    private let lock = NSLock()
    private var stored = false
    func set(_ value: Bool) { lock.lock(); stored = value; lock.unlock() }
    var value: Bool { lock.lock(); defer { lock.unlock() }; return stored }
}
