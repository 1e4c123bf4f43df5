import Foundation
import StoreBus
import StoreBusTesting
import Testing
import ZeroMQ

/// A context's TCPSecurity, applied by its sockets at bind and connect.
struct TCPSecurityTests {
    @Test("loopback endpoints are 127.0.0.0/8, [::1] and localhost; wildcards and other addresses are not")
    func loopback() {
        for endpoint in ["tcp://127.0.0.1:7301", "tcp://127.9.8.7:1", "tcp://localhost:7300", "tcp://[::1]:7300", "tcp://10.0.0.1:5;127.0.0.1:7300"] {
            #expect(TCPSecurity.isLoopback(endpoint), "\(endpoint)")
        }
        for endpoint in [
            "tcp://0.0.0.0:7300", "tcp://*:7300", "tcp://10.0.0.1:7300", "tcp://127.0.0.1.example.com:1", "tcp://[::]:7300", "tcp://eth0:7300", "ipc:///tmp/x", "tcp://127.0.0.1:5;10.0.0.1:7300"
        ] {
            #expect(!TCPSecurity.isLoopback(endpoint), "\(endpoint)")
        }
    }

    @Test("plain TCP on loopback only: binding a wildcard or connecting elsewhere is refused with EACCES, saying why; loopback and IPC work")
    func plainOnLoopback() async throws {
        let outcomes = try await onThread("plain-loopback") { () throws -> [String] in
            // The IPC endpoint's socket file goes with the test (after the socket closes).
            let ipcPath = "\(NSTemporaryDirectory())sb-tcpsec-\(getpid())"
            defer { unlink(ipcPath) }
            let context = try Context(tcpSecurity: .plainOnLoopback)
            defer { context.terminate() }
            let socket = try Socket(context: context, type: .router)
            defer { socket.close() }
            var outcomes: [String] = []
            for attempt in [("bind", "tcp://0.0.0.0:*"), ("connect", "tcp://10.1.2.3:9"), ("bind", "tcp://127.0.0.1:*"), ("bind", "ipc://\(ipcPath)")] {
                do {
                    if attempt.0 == "bind" { try socket.bind(attempt.1) } else { try socket.connect(attempt.1) }
                    outcomes.append("ok")
                } catch let error as ZMQError {
                    outcomes.append(error.code == EACCES ? "refused: \(error.operation)" : "other: \(error)")
                }
            }
            return outcomes
        }
        #expect(outcomes[0].hasPrefix("refused: zmq_bind(tcp://0.0.0.0:*): plain TCP is allowed on loopback only"), "\(outcomes)")
        #expect(outcomes[1].hasPrefix("refused: zmq_connect(tcp://10.1.2.3:9)"), "\(outcomes)")
        #expect(outcomes[2] == "ok" && outcomes[3] == "ok", "\(outcomes)")
    }

    @Test("CURVE links: a bound socket is a CURVE server, a connecting one a client with the server's key from the links; an endpoint without a key cannot be connected")
    func curveLinks() async throws {
        try #require(Context.has("curve"))
        let server = try CurveKeyPair.generate()
        let client = try CurveKeyPair.generate()
        let (received, missing, plainHeard) = try await onThread("curve-links") { () throws -> (Message, String, Int) in
            let serverContext = try Context(tcpSecurity: .curve(CurveLinks(keyPair: server)))
            defer { serverContext.terminate() }
            let authenticator = try CurveAuthenticator(context: serverContext, allowedPublicKeys: [client.publicKey])
            defer { authenticator.stop() }
            let router = try Socket(context: serverContext, type: .router)
            defer { router.close() }
            try router.bind("tcp://127.0.0.1:*")
            let endpoint = router.lastEndpoint

            // A plain client is not heard: the policy made the router a CURVE server.
            let plainContext = try Context()
            defer { plainContext.terminate() }
            let plain = try Socket(context: plainContext, type: .dealer)
            defer { plain.close() }
            try plain.connect(endpoint)
            try plain.send(Message(strings: ["in clear"]))

            let clientContext = try Context(tcpSecurity: .curve(CurveLinks(keyPair: client, serverKeys: [endpoint: server.publicKey])))
            defer { clientContext.terminate() }
            let dealer = try Socket(context: clientContext, type: .dealer)
            defer { dealer.close() }
            var missing = ""
            do { try dealer.connect("tcp://127.0.0.1:1") } catch let error as ZMQError { missing = error.operation }
            try dealer.connect(endpoint)
            try dealer.send(Message(strings: ["over CURVE"]))
            let received = try router.receive()
            var poller = Poller()
            poller.add(router)
            return (received, missing, try poller.poll(timeoutMilliseconds: 300))
        }
        #expect(received.frames.last == Array("over CURVE".utf8))
        #expect(missing.contains("no CURVE server key is configured for this endpoint"), "\(missing)")
        #expect(plainHeard == 0)
    }
}
