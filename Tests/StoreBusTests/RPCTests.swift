import Foundation
import Logging
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
                        let reply = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .with {
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

    @Test("invalid JSON and a wrong field type are INVALID_ARGUMENT naming the field", arguments: [
        ("{not json", ""),
        ("[1,2]", ""),
        (#"{"payload": "x", "delayMs": "soon"}"#, "delayMs"),
        (#"{"payload": 12}"#, "payload"),
        (#"{"delayMs": -5}"#, "delayMs"),
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

    @Test("when the caller's deadline passes it gets DEADLINE_EXCEEDED and the server drops the work")
    func deadlineExceeded() async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            // Given a call whose handler would take 5 s, with a 200 ms deadline
            let started = ContinuousClock.now
            let error = await #expect(throws: RPCError.self) {
                _ = try await client.call(
                    Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.delayMs = 5_000 },
                    options: CallOptions(timeout: .milliseconds(200))
                )
            }
            // Then the caller hears DEADLINE_EXCEEDED at the deadline, long before the handler would end
            #expect(error?.code == .deadlineExceeded)
            #expect(started.duration(to: .now) < .seconds(4))
            // And the server cancelled the handler: nothing is running and nothing succeeded
            var stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            let waitUntil = ContinuousClock.now + .seconds(3)
            while stats.inFlight > 1 && ContinuousClock.now < waitUntil {  // 1: the GetServerStats call itself
                try await Task.sleep(for: .milliseconds(10))
                stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            }
            #expect(stats.deadlineExceeded == 1)
            #expect(stats.inFlight <= 1)
            #expect(stats.requestsSucceeded == stats.requestsReceived - 2, "only the stats calls succeeded")
            #expect(started.duration(to: .now) < .seconds(4))
        }
        await server.stop()
    }

    @Test("cancelling the calling task cancels the call on the server")
    func cancellation() async throws {
        let server = try TestServer()
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            let task = Task {
                try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.delayMs = 10_000 })
            }
            var stats = try await client.call(Storebus_Diagnostics_V1_Diagnostics.getServerStats, .init())
            while stats.inFlight < 2 {  // the echo is running on the server
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
