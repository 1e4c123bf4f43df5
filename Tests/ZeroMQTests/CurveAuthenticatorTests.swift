import Foundation
import StoreBusTesting
import Testing
import ZeroMQ

/// The Ironhouse pattern: a CURVE server hears only clients whose public key is allowed.
struct CurveAuthenticatorTests {
    @Test("with an authenticator, a client with an allowed key is heard; one with the server's key but a key of its own that is not allowed, or without CURVE, is refused at the handshake")
    func allowList() async throws {
        try #require(Context.has("curve"))
        let server = try CurveKeyPair.generate()
        let allowed = try CurveKeyPair.generate()
        let stranger = try CurveKeyPair.generate()
        let (received, later, refused) = try await onThread("zap") { () throws -> (Message, Int, Int) in
            let context = try Context()
            defer { context.terminate() }
            let authenticator = try CurveAuthenticator(context: context, allowedPublicKeys: [allowed.publicKey])
            defer { authenticator.stop() }
            let router = try Socket(context: context, type: .router)
            defer { router.close() }
            try router.set(.curveServer(secretKey: server.secretKey))
            try router.bind("tcp://127.0.0.1:*")

            // Knows the server's key, but its own is not on the list.
            let outsider = try Socket(context: context, type: .dealer)
            defer { outsider.close() }
            try outsider.set(.linger(0))
            try outsider.set(.curveClient(serverKey: server.publicKey, publicKey: stranger.publicKey, secretKey: stranger.secretKey))
            try outsider.connect(router.lastEndpoint)
            try outsider.send(Message(strings: ["let me in"]))
            // Plain TCP to a CURVE server.
            let plain = try Socket(context: context, type: .dealer)
            defer { plain.close() }
            try plain.set(.linger(0))
            try plain.connect(router.lastEndpoint)
            try plain.send(Message(strings: ["in clear"]))

            let insider = try Socket(context: context, type: .dealer)
            defer { insider.close() }
            try insider.set(.curveClient(serverKey: server.publicKey, publicKey: allowed.publicKey, secretKey: allowed.secretKey))
            try insider.connect(router.lastEndpoint)
            try insider.send(Message(strings: ["allowed"]))

            let received = try router.receive()
            var poller = Poller()
            poller.add(router)
            let later = try poller.poll(timeoutMilliseconds: 500)
            return (received, later, authenticator.refused)
        }
        #expect(received.frames.last == Array("allowed".utf8))
        #expect(later == 0, "nothing from the outsider reaches the server")
        #expect(refused >= 1, "the outsider's handshake was refused by the authenticator")
    }

    @Test("a server socket in an open ZAP domain admits any CURVE client; beside it, one in another domain keeps to the allow-list")
    func openDomain() async throws {
        try #require(Context.has("curve"))
        let server = try CurveKeyPair.generate()
        let anyone = try CurveKeyPair.generate()
        let (open, closed) = try await onThread("zap-domains") { () throws -> (Message?, Int) in
            let context = try Context()
            defer { context.terminate() }
            let authenticator = try CurveAuthenticator(context: context, allowedPublicKeys: [], openDomains: ["clients"])
            defer { authenticator.stop() }
            let outside = try Socket(context: context, type: .router)
            defer { outside.close() }
            try outside.set(.zapDomain("clients"))
            try outside.set(.curveServer(secretKey: server.secretKey))
            try outside.bind("tcp://127.0.0.1:*")
            let inside = try Socket(context: context, type: .router)
            defer { inside.close() }
            try inside.set(.zapDomain("internal"))
            try inside.set(.curveServer(secretKey: server.secretKey))
            try inside.bind("tcp://127.0.0.1:*")

            let client = try Socket(context: context, type: .dealer)
            defer { client.close() }
            try client.set(.linger(0))
            try client.set(.curveClient(serverKey: server.publicKey, publicKey: anyone.publicKey, secretKey: anyone.secretKey))
            try client.connect(outside.lastEndpoint)
            try client.connect(inside.lastEndpoint)
            // Round-robin over both connections: the internal one never completes its handshake,
            // so every message goes to the open one.
            for index in 0..<4 { try client.send(Message(strings: ["hello \(index)"])) }
            var poller = Poller()
            poller.add(outside)
            let heard = try poller.poll(timeoutMilliseconds: 5000) > 0 ? try outside.receive() : nil
            var internalPoller = Poller()
            internalPoller.add(inside)
            return (heard, try internalPoller.poll(timeoutMilliseconds: 500))
        }
        #expect(open?.frames.last?.starts(with: Array("hello".utf8)) == true)
        #expect(closed == 0, "nothing reaches the server in the other domain")
    }

    @Test("keys that are not 40 characters of Z85 are refused when the allow-list is made")
    func badKeys() throws {
        let context = try Context()
        defer { context.terminate() }
        #expect(throws: ZMQError.self) { _ = try CurveAuthenticator(context: context, allowedPublicKeys: ["short"]) }
    }
}
