import Foundation
import Logging
import StoreBusServer
import StoreBusTesting
import StoreSchema
import Testing
import ZeroMQ

@testable import StoreBus

/// An in-process server on a free loopback port with the built-in services plus `extra` methods.
final class TestServer: Sendable {
    let context: ZeroMQ.Context
    let server: RPCServer
    let endpoint: String

    init(extra: RPCRouter = RPCRouter(), configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        context = try ZeroMQ.Context()
        var configuration = ServerConfiguration(endpoints: ["tcp://127.0.0.1:*"])
        configure(&configuration)
        let statistics = ServerStatistics()
        var router = BuiltinServices.router(process: "test-server", services: [], statistics: statistics)
        router.merge(extra)
        server = try RPCServer(configuration: configuration, router: router, context: context, statistics: statistics, logger: Logger(label: "test"))
        endpoint = server.boundEndpoints[0]
        server.start()
    }

    func stop() async {
        await server.shutdown()
        context.shutdown()
        context.terminate()
    }
}

/// Starts an Echo call that runs for 30 s on the server, and returns once the server counts it as
/// running. It is not safe to retry, so the client hands over the server's answer as it is.
private func startLongCall(_ client: RPCClient, sourceLocation: SourceLocation = #_sourceLocation) async -> Task<RawResponse, any Error> {
    let call = Task {
        try await client.callRaw(
            path: Storebus_Diagnostics_V1_Diagnostics.echo.path, idempotent: false,
            body: JSONCodec.encode(Storebus_Diagnostics_V1_EchoRequest.with { $0.delayMs = 30_000 }),
            options: CallOptions(timeout: .seconds(20))
        )
    }
    #expect(await waitUntil { (try? await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init()).inFlight) == 1 }, sourceLocation: sourceLocation)
    return call
}

/// Calls Echo with a handler delay of `delayMs` under a `timeout` deadline, and expects
/// DEADLINE_EXCEEDED within `bound` of the call's start.
private func expectDeadlineExceeded(
    _ client: RPCClient, delayMs: UInt32, timeout: Duration, within bound: Duration,
    sourceLocation: SourceLocation = #_sourceLocation
) async {
    let started = ContinuousClock.now
    let error = await #expect(throws: RPCError.self, sourceLocation: sourceLocation) {
        _ = try await client.call(
            Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.delayMs = delayMs },
            options: CallOptions(timeout: timeout)
        )
    }
    #expect(error?.code == .deadlineExceeded, sourceLocation: sourceLocation)
    #expect(started.duration(to: .now) < bound, "ended at its own deadline", sourceLocation: sourceLocation)
}

@Suite("RPC over ZeroMQ")
struct RPCTests {
    @Test("a call returns the handler's answer, and many pipelined calls are matched by request id")
    func pipelinedCalls() async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            let one = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.payload = "hello" })
            #expect(one.payload == "hello")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<500 {
                    group.addTask {
                        let reply = try await client.call(
                            Storebus_Diagnostics_V1_Diagnostics.echo,
                            .with {
                                $0.payload = "call-\(index)"
                                $0.delayMs = UInt32(index % 3)
                            })
                        #expect(reply.payload == "call-\(index)")
                    }
                }
                try await group.waitForAll()
            }
            let stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            #expect(stats.requestsSucceeded == 501)
        }
        await server.stop()
    }

    @Test("a timeout far too long to count (\".seconds(.max)\", meaning none) is a day, as servers read it: the call is answered, nothing overflows")
    func endlessTimeout() async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            for timeout in [Duration.seconds(Int64.max), .seconds(Int64.max / 1000), .seconds(365 * 86_400)] {
                let reply = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.payload = "patient" }, options: CallOptions(timeout: timeout))
                #expect(reply.payload == "patient")
            }
        }
        #expect(Duration.seconds(Int64.max).wireMilliseconds == .max)
        await server.stop()
    }

    @Test("metadata a server would refuse as a malformed header (too large, a line break, a bad key) is INVALID_ARGUMENT at once, nothing sent, not a wait for the deadline")
    func headerCheckedBeforeSending() async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            for metadata: Metadata in [
                ["note": String(repeating: "x", count: WireProtocol.maxHeaderBytes)], ["note": "two\nlines"], ["note": "carriage\rreturn"],
                ["session": String(repeating: "t", count: 300) + "\n"], ["Bad Key": "v"]
            ] {
                let started = ContinuousClock.now
                let refused = await #expect(throws: RPCError.self) {
                    _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.payload = "x" }, options: CallOptions(timeout: .seconds(10), metadata: metadata))
                }
                #expect(refused?.code == .invalidArgument && refused?.details.fieldViolations.first?.field == "metadata", "\(String(describing: refused))")
                #expect(started.duration(to: .now) < .seconds(5))
            }
            let stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            #expect(stats.requestsReceived == 1, "only the statistics call reached the server")
        }
        await server.stop()
    }

    @Test("a call still running when a graceful shutdown's grace period ends is answered UNAVAILABLE, without retry advice (it may have run), not left to its deadline")
    func drainAnswersWhatItStops() async throws {
        let server = try TestServer { $0.shutdownGracePeriod = .milliseconds(200) }
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            let call = await startLongCall(client)
            // From the shutdown: on a starved machine, the wait for the call to be in flight took
            // most of a margin counted from its start.
            let shutdown = ContinuousClock.now
            server.server.beginGracefulShutdown()
            let answer = try await call.value
            let error = answer.error
            #expect(answer.code == .unavailable && error?.details.hasRetry == false && error?.message.contains("may have run") == true, "\(answer.code) \(String(describing: error))")
            #expect(shutdown.duration(to: .now) < .seconds(10), "answered at the end of the grace period, not at its deadline")
        }
        await server.stop()
    }

    @Test("an answer that arrives just before its connection closes, while the client is busy, is delivered, not replaced by 'connection lost'")
    func answerBeforeCloseWhileBusy() async throws {
        let server = try TestServer { $0.shutdownGracePeriod = .milliseconds(100) }
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            let call = await startLongCall(client)
            // The client's loop has read everything and is busy when the answer comes, then the close:
            // it finds both at once (with ZMQ_IMMEDIATE, libzmq dropped the answer every time).
            let busy = Task(executorPreference: client.executor) { _ = usleep(600_000) }
            server.server.beginGracefulShutdown()
            await busy.value
            let answer = try await call.value
            #expect(answer.code == .unavailable && answer.error?.message.contains("may have run") == true, "\(answer.code) \(String(describing: answer.error))")
        }
        await server.stop()
    }

    @Test("a request sent as its connection drops, before the client hears of it, is failed and never delivered once the client reconnects")
    func requestSentIntoDroppedConnection() async throws {
        let first = try TestServer()
        let endpoint = first.endpoint
        try await withRPCClient(endpoints: [endpoint]) { client in
            _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            // The server goes away while the client's loop is busy; the call is then sent on the
            // connection the client still believes in, and waits in its socket.
            let call = Task(executorPreference: client.executor) { () async throws -> RawResponse in
                _ = usleep(500_000)
                return try await client.callRaw(
                    path: Storebus_Diagnostics_V1_Diagnostics.echo.path, idempotent: false,
                    body: JSONCodec.encode(Storebus_Diagnostics_V1_EchoRequest.with { $0.payload = "late" }),
                    options: CallOptions(timeout: .seconds(20))
                )
            }
            await first.stop()
            let failed = await #expect(throws: RPCError.self) { _ = try await call.value }
            #expect(failed?.code == .unavailable, "\(String(describing: failed))")
            let second = try TestServer { $0.endpoints = [endpoint] }
            let stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            #expect(stats.requestsReceived == 1, "only this call reached the new server: \(stats.requestsReceived)")
            await second.stop()
        }
    }

    @Test("tasks preferring the client's executor make calls on its loop: answered, matched, and held to deadlines")
    func callsOnClientExecutor() async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<200 {
                    group.addTask(executorPreference: client.executor) {
                        for round in 0..<5 {
                            let reply = try await client.call(
                                Storebus_Diagnostics_V1_Diagnostics.echo,
                                .with {
                                    $0.payload = "call-\(index)-\(round)"
                                    $0.delayMs = UInt32((index + round) % 3)
                                })
                            #expect(reply.payload == "call-\(index)-\(round)")
                        }
                    }
                }
                try await group.waitForAll()
            }
            let late = Task(executorPreference: client.executor) {
                try await client.call(
                    Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.delayMs = 5_000 },
                    options: CallOptions(timeout: .milliseconds(100))
                )
            }
            let error = await #expect(throws: RPCError.self) { _ = try await late.value }
            #expect(error?.code == .deadlineExceeded)
        }
        await server.stop()
    }

    @Test("a client and doorbell sockets on the server's reactor: a handler calls and waits on its own thread; closing them leaves the server serving")
    func sharedReactor() async throws {
        let upstream = try TestServer()
        let context = try ZeroMQ.Context()
        let reactor = Reactor(name: "sb-shared-test", context: context)
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [upstream.endpoint]), reactor: reactor)
        let publisher = try DoorbellPublisher(endpoints: ["tcp://127.0.0.1:*"], context: context, reactor: reactor)
        let board = try DoorbellBoard(endpoints: publisher.boundEndpoints, log: "test", context: context, reactor: reactor)
        let echo = Storebus_Diagnostics_V1_Diagnostics.echo
        var router = RPCRouter()
        // Loop-safe: the handler runs on the server's reactor, and comes back to it after each wait.
        router.register(echo, placement: .loop) { request, _ in
            #expect(reactor.isInLoop)
            if request.payload == "churn" {
                // Made and shut down at once on the loop: their sockets must never reach the poll set.
                for _ in 0..<3 {
                    let transient = try RPCClient(configuration: ClientConfiguration(endpoints: [upstream.endpoint]), reactor: reactor)
                    await transient.shutdown()
                    let transientBoard = try DoorbellBoard(endpoints: publisher.boundEndpoints, log: "test", context: context, reactor: reactor)
                    await transientBoard.shutdown()
                }
                return .with { $0.payload = "churned" }
            }
            let answer = try await client.call(echo, .with { $0.payload = "upstream:" + request.payload })
            #expect(reactor.isInLoop, "the answer resumed the handler on the reactor")
            // A subscription's first doorbells can be lost while it connects: ring until one is heard.
            var rung = false
            for seq in 1...50 where !rung {
                let ticket = board.ticket(key: "k", beyond: UInt64(seq - 1))
                publisher.ring([Doorbell(log: "test", key: "k", seq: UInt64(seq), keySeq: UInt64(seq))])
                let started = ContinuousClock.now
                await board.wait(ticket, timeout: .milliseconds(200))
                rung = started.duration(to: .now) < .milliseconds(150)
            }
            #expect(rung, "a doorbell woke the handler")
            #expect(reactor.isInLoop, "the doorbell resumed the handler on the reactor")
            return .with { $0.payload = answer.payload }
        }
        let server = try RPCServer(
            configuration: ServerConfiguration(endpoints: ["tcp://127.0.0.1:*"]), router: router,
            context: context, reactor: reactor, logger: Logger(label: "test")
        )
        server.start()
        try await withRPCClient(endpoints: server.boundEndpoints) { caller in
            let answer = try await caller.call(echo, .with { $0.payload = "x" })
            #expect(answer.payload == "upstream:x")
            let churned = try await caller.call(echo, .with { $0.payload = "churn" })
            #expect(churned.payload == "churned")
            let again = try await caller.call(echo, .with { $0.payload = "z" })
            #expect(again.payload == "upstream:z", "the reactor still runs and polls only open sockets")
            await client.shutdown()
            await publisher.shutdown()
            await board.shutdown()
            #expect(!reactor.isFinished, "closing the components left the reactor running")
            // The server still answers; its handler's call now fails, as the client was shut down.
            let error = await #expect(throws: RPCError.self) { _ = try await caller.call(echo, .with { $0.payload = "y" }) }
            #expect(error?.code == .cancelled)
        }
        await server.shutdown()
        #expect(reactor.isFinished, "the server stopped the reactor it was given")
        // Shutting down components whose reactor has stopped returns at once.
        await client.shutdown()
        await publisher.shutdown()
        context.shutdown()
        context.terminate()
        await upstream.stop()
    }

    @Test("an unknown method is UNIMPLEMENTED and names the method")
    func unknownMethod() async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            let response = try await client.callRaw(path: "/storebus.nothing.v1.Nothing/Call", idempotent: true, body: Array("{}".utf8))
            #expect(response.code == .unimplemented)
            #expect(response.error?.message.contains("/storebus.nothing.v1.Nothing/Call") == true)
            #expect(response.error?.details.info.reason == "UNKNOWN_METHOD")
        }
        await server.stop()
    }

    @Test(
        "invalid JSON and a wrong field type are INVALID_ARGUMENT naming the field",
        arguments: [
            ("{not json", ""),
            ("[1,2]", ""),
            (#"{"payload": "x", "delayMs": "soon"}"#, "delayMs"),
            (#"{"payload": 12}"#, "payload"),
            (#"{"delayMs": -5}"#, "delayMs")
        ])
    func invalidBodies(body: String, field: String) async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            let response = try await client.callRaw(path: Storebus_Diagnostics_V1_Diagnostics.echo.path, idempotent: true, body: Array(body.utf8))
            #expect(response.code == .invalidArgument)
            let error = try #require(response.error)
            #expect(error.details.fieldViolations.first?.field == field, "\(error)")
        }
        await server.stop()
    }

    @Test("a handler's RPCError reaches the caller with its code and details")
    func handlerErrors() async throws {
        var router = RPCRouter()
        router.registerRaw(path: "/test.Errors/NotFound") { _, _ in
            throw RPCError.resource(.notFound, type: "app", name: "com.example.none", "no such app")
        }
        router.registerRaw(path: "/test.Errors/Crash") { _, _ in
            struct Secret: Error {}
            throw Secret()
        }
        let server = try TestServer(extra: router)
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            let notFound = try await client.callRaw(path: "/test.Errors/NotFound", idempotent: true, body: [])
            #expect(notFound.code == .notFound)
            #expect(notFound.error?.details.resource.resourceName == "com.example.none")
            let crash = try await client.callRaw(path: "/test.Errors/Crash", idempotent: true, body: [])
            #expect(crash.code == .internalError)
            #expect(crash.error?.message == "internal error", "a handler's own error text is not exposed")
        }
        await server.stop()
    }

    @Test("an answer or a request over the message limit is refused with RESOURCE_EXHAUSTED; other calls on the connection go on")
    func oversizedAnswersAndRequests() async throws {
        let limit: Int64 = 64 * 1024
        var router = RPCRouter()
        router.registerRaw(path: "/test.Size/Big") { _, _ in
            RawReply(body: Array("\"".utf8) + [UInt8](repeating: 0x61, count: Int(limit)) + Array("\"".utf8))
        }
        router.registerRaw(path: "/test.Size/Slow") { _, _ in
            try await Task.sleep(for: .milliseconds(300))
            return RawReply(body: Array("{}".utf8))
        }
        let server = try TestServer(extra: router) { $0.maxMessageBytes = limit }
        try await withRPCClient(endpoints: [server.endpoint], configure: { $0.maxMessageBytes = limit }) { client in
            // Given a slow call in flight on the connection
            async let slow = client.callRaw(path: "/test.Size/Slow", idempotent: false, body: [])
            try await Task.sleep(for: .milliseconds(50))
            // When another call's answer would be over the limit, its caller hears why
            let big = try await client.callRaw(path: "/test.Size/Big", idempotent: false, body: [])
            #expect(big.code == .resourceExhausted)
            #expect(big.error?.message.contains("message limit") == true, "\(String(describing: big.error))")
            // And the slow call still gets its answer: the connection was never dropped
            #expect(try await slow.code == .ok)
            // A request over the limit is refused before it is sent
            let error = await #expect(throws: RPCError.self) {
                _ = try await client.callRaw(path: "/test.Size/Slow", idempotent: true, body: [UInt8](repeating: 0x20, count: Int(limit) + 1))
            }
            #expect(error?.code == .resourceExhausted)
            #expect(try await client.callRaw(path: "/test.Size/Slow", idempotent: true, body: []).code == .ok)
        }
        await server.stop()
    }

    @Test("when the caller's deadline passes it gets DEADLINE_EXCEEDED and the server drops the work")
    func deadlineExceeded() async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            // Given a call whose handler would take 30 s, with a 200 ms deadline, the caller hears
            // DEADLINE_EXCEEDED at the deadline, long before the handler would end (the bounds leave
            // room for a host that stalls the test process for seconds: one run took 4.4 s to hear
            // its 200 ms deadline while the hypervisor took the CPUs)
            let started = ContinuousClock.now
            await expectDeadlineExceeded(client, delayMs: 30_000, timeout: .milliseconds(200), within: .seconds(20))
            // And the server cancelled the handler: nothing is running and nothing succeeded
            var stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            // (The handler would still be sleeping until 30 s after the start; it must be gone well before.)
            let waitUntil = started + .seconds(25)
            // GetServerStats is answered inline on the reactor, so it never counts itself as running.
            while stats.inFlight > 0 && ContinuousClock.now < waitUntil {
                try await Task.sleep(for: .milliseconds(10))
                stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            }
            #expect(stats.deadlineExceeded == 1)
            #expect(stats.inFlight == 0)
            #expect(stats.requestsSucceeded == stats.requestsReceived - 2, "only the stats calls succeeded")
            #expect(started.duration(to: .now) < .seconds(30), "the handler was stopped, not waited for")
        }
        await server.stop()
    }

    @Test("a short deadline expires behind a long call in flight and after thousands of answered calls")
    func deadlineAmongOthers() async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            // Thousands of answered calls leave their deadlines behind in the client's heap.
            for _ in 0..<3_000 {
                _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .init())
            }
            // A long call is in flight...
            let long = Task {
                try await client.call(
                    Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.delayMs = 1_500 },
                    options: CallOptions(timeout: .seconds(60))
                )
            }
            try await Task.sleep(for: .milliseconds(50))
            // ...and a call with a 150 ms deadline still fails at its deadline, long before its handler ends.
            await expectDeadlineExceeded(client, delayMs: 5_000, timeout: .milliseconds(150), within: .seconds(4))
            // The long call is unaffected.
            #expect(try await long.value.payload == "")
        }
        await server.stop()
    }

    @Test("with a server that never answers, the client's own timer ends a call at its deadline, ahead of a longer one")
    func clientTimerAlone() async throws {
        let context = try ZeroMQ.Context()
        let silent = try Socket(context: context, type: .router)
        try silent.set(.linger(0))
        try silent.bind("tcp://127.0.0.1:*")
        try await withRPCClient(endpoints: [silent.lastEndpoint], context: context) { client in
            // A long call arms the client's deadline timer 60 s ahead...
            let long = Task {
                try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .init(), options: CallOptions(timeout: .seconds(60)))
            }
            try await Task.sleep(for: .milliseconds(50))
            // ...and a call with an earlier deadline moves it forward: nothing else would end this call.
            await expectDeadlineExceeded(client, delayMs: 0, timeout: .milliseconds(150), within: .seconds(10))
            long.cancel()
            let longError = await #expect(throws: RPCError.self) { _ = try await long.value }
            #expect(longError?.code == .cancelled)
        }
        silent.close()
        context.shutdown()
        context.terminate()
    }

    @Test("cancelling the calling task cancels the call on the server")
    func cancellation() async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            let task = Task {
                try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.delayMs = 10_000 })
            }
            var stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            while stats.inFlight < 1 { // the echo is running on the server
                try await Task.sleep(for: .milliseconds(5))
                stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            }
            task.cancel()
            let result = await task.result
            #expect((try? result.get()) == nil)
            #expect((result.error as? RPCError)?.code == .cancelled)
            while stats.cancelled == 0 {
                try await Task.sleep(for: .milliseconds(5))
                stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            }
            #expect(stats.cancelled == 1)
        }
        await server.stop()
    }
}

extension Result {
    var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
