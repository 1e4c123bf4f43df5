import Foundation
import Logging
import StoreBusServer
import StoreBusTesting
import StoreSchema
import Testing
import ZeroMQ

@testable import StoreBus

@Suite("RPC client balancing and retries")
struct RPCBalancingTests {
    @Test("calls spread over every connected instance")
    func balancing() async throws {
        let first = try TestServer(), second = try TestServer()
        try await withRPCClient(endpoints: [first.endpoint, second.endpoint]) { client in
            // Wait for both connections, then make concurrent calls
            _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .init())
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<200 {
                    group.addTask { _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.delayMs = 1 }) }
                }
                try await group.waitForAll()
            }
        }
        #expect(first.server.statistics.snapshot.requestsSucceeded > 20)
        #expect(second.server.statistics.snapshot.requestsSucceeded > 20)
        await first.stop()
        await second.stop()
    }

    @Test("a request never waits on an endpoint that is not connected")
    func skipsUnconnectedEndpoints() async throws {
        let live = try TestServer()
        let deadEndpoint = "tcp://127.0.0.1:9" // discard port: nothing listens there
        try await withRPCClient(endpoints: [deadEndpoint, live.endpoint]) { client in
            for index in 0..<50 {
                let reply = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.payload = "\(index)" }, options: CallOptions(timeout: .seconds(5)))
                #expect(reply.payload == "\(index)")
            }
        }
        try await withRPCClient(endpoints: [deadEndpoint]) { client in
            let error = await #expect(throws: RPCError.self) {
                _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .init(), options: CallOptions(timeout: .milliseconds(300)))
            }
            #expect(error?.code == .unavailable)
            // Never sent, so it did not run: a forwarder passing this on tells its caller so.
            #expect(error?.details.info.reason == "NOT_SENT" && error?.details.retry.retryDelayMs ?? 0 > 0, "\(String(describing: error?.details))")
        }
        await live.stop()
    }

    @Test("an instance that refused a call with retry advice (as a draining one does) is passed over while another is connected, though it looks the least busy")
    func refusingInstanceRests() async throws {
        // Given A, which answers Echo at once and refuses Flaky with retry advice, as a draining
        // server refuses everything, and B, which answers Echo after the delay asked and Flaky at once
        var refusing = RPCRouter()
        refusing.register(Storebus_Diagnostics_V1_Diagnostics.echo) { request, _ in .with { $0.payload = request.payload } }
        refusing.registerRaw(path: "/test.Flaky/Call") { _, _ in
            throw RPCError(.unavailable, "the server is shutting down", details: .with { $0.retry.retryDelayMs = 100 })
        }
        var answering = RPCRouter()
        answering.registerRaw(path: "/test.Flaky/Call") { _, _ in RawReply(body: Array("{}".utf8)) }
        let a = try TestServer(extra: refusing), b = try TestServer(extra: answering)
        try await withRPCClient(endpoints: [a.endpoint, b.endpoint]) { client in
            // (Both connected: quick calls reach each of them.)
            try await Task.sleep(for: .milliseconds(300))
            // And this client's slow calls in flight on B only (those sent to A came back at once),
            // so that A looks the least busy
            let slow = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<8 {
                        group.addTask { _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .with { $0.delayMs = 3000 }, options: CallOptions(timeout: .seconds(10))) }
                    }
                    try await group.waitForAll()
                }
            }
            try await Task.sleep(for: .milliseconds(300))
            // When idempotent Flaky calls are made
            var answered = 0
            for _ in 0..<10 {
                let answer = try await client.callRaw(path: "/test.Flaky/Call", idempotent: true, body: [], options: CallOptions(timeout: .seconds(5)))
                if answer.code == .ok { answered += 1 }
            }
            // Then every one is answered by B: after A's refusal, its retries go there
            #expect(answered == 10)
            try await slow.value
        }
        await a.stop()
        await b.stop()
    }

    @Test("UNAVAILABLE is retried for idempotent calls and calls with an idempotency key, and returned for others")
    func retriesOnlyWhenSafe() async throws {
        var refusing = RPCRouter()
        refusing.registerRaw(path: "/test.Retry/Call") { _, _ in throw RPCError(.unavailable, "busy") }
        var answering = RPCRouter()
        answering.registerRaw(path: "/test.Retry/Call") { _, _ in RawReply(body: Array("{}".utf8)) }
        let busy = try TestServer(extra: refusing), healthy = try TestServer(extra: answering)
        try await withRPCClient(endpoints: [busy.endpoint, healthy.endpoint]) { client in
            _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .init())
            for _ in 0..<20 {
                let idempotent = try await client.callRaw(path: "/test.Retry/Call", idempotent: true, body: [])
                #expect(idempotent.code == .ok)
                let keyed = try await client.callRaw(path: "/test.Retry/Call", idempotent: false, body: [], options: CallOptions(idempotencyKey: UUID().uuidString))
                #expect(keyed.code == .ok)
            }
            var sawUnavailable = false
            for _ in 0..<20 {
                let unsafe = try await client.callRaw(path: "/test.Retry/Call", idempotent: false, body: [])
                sawUnavailable = sawUnavailable || unsafe.code == .unavailable
            }
            #expect(sawUnavailable, "a non-idempotent call is never retried")
        }
        await busy.stop()
        await healthy.stop()
    }
}

@Suite("JSON bodies")
struct JSONCodecTests {
    @Test(
        "the error names the field whose value has the wrong shape, not a path inside it",
        arguments: [
            (#"{"payload":{"a":{"b":1}}}"#, "payload"),
            (#"{"payload":[1]}"#, "payload"),
            (#"{"delayMs":{"x":1}}"#, "delayMs")
        ])
    func wrongShapes(body: String, field: String) {
        let error = #expect(throws: RPCError.self) {
            _ = try JSONCodec.decode(Storebus_Diagnostics_V1_EchoRequest.self, from: Array(body.utf8))
        }
        #expect(error?.details.fieldViolations.first?.field == field)
    }

    @Test("a body over 64 KiB that fails to decode is refused with the decoder's reason, without the field-by-field search")
    func largeBadBody() {
        // Unknown members are ignored, so only the last one fails; the search would try each member.
        let members = (0..<20_000).map { "\"unknown\($0)\":0" }.joined(separator: ",")
        let body = Array("{\(members),\"delayMs\":\"soon\"}".utf8)
        #expect(body.count > JSONCodec.maxDiagnosedBytes)
        let error = #expect(throws: RPCError.self) {
            _ = try JSONCodec.decode(Storebus_Diagnostics_V1_EchoRequest.self, from: body)
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.fieldViolations.first?.field == "", "not located: the search is skipped")
        #expect(error?.message.contains("EchoRequest") == true, "\(String(describing: error?.message))")
        // The same fault in a small body is still named.
        let small = #expect(throws: RPCError.self) {
            _ = try JSONCodec.decode(Storebus_Diagnostics_V1_EchoRequest.self, from: Array(#"{"unknown":0,"delayMs":"soon"}"#.utf8))
        }
        #expect(small?.details.fieldViolations.first?.field == "delayMs")
    }

    @Test("a nested message field is named by its path")
    func nestedPath() {
        let error = #expect(throws: RPCError.self) {
            _ = try JSONCodec.decode(Storebus_Common_V1_ErrorStatus.self, from: Array(#"{"resource":{"resourceName":7}}"#.utf8))
        }
        #expect(error?.details.fieldViolations.first?.field == "resource.resourceName")
    }

    @Test("a body that is not JSON says so, without an empty field name")
    func notJSON() {
        let error = #expect(throws: RPCError.self) {
            _ = try JSONCodec.decode(Storebus_Diagnostics_V1_EchoRequest.self, from: Array("{oops".utf8))
        }
        #expect(error?.message == "the body is not valid JSON")
    }

    @Test("unknown fields are ignored, so an older server accepts a newer client's request")
    func unknownFields() throws {
        let request = try JSONCodec.decode(Storebus_Diagnostics_V1_EchoRequest.self, from: Array(#"{"payload":"x","addedLater":true}"#.utf8))
        #expect(request.payload == "x")
    }
}
