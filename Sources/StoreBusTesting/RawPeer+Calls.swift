import StoreBus
import StoreSchema

extension RawPeer {
    /// The answer to a raw call: its code, its body, and the error status when it is not OK.
    public struct Answer: Sendable {
        /// The header's status code.
        public var code: StatusCode
        /// The body as it came.
        public var body: [UInt8]
        /// The error body decoded (nil for OK, or for a body that is not an ErrorStatus).
        public var status: Storebus_Common_V1_ErrorStatus? {
            code == .ok ? nil : try? JSONCodec.decode(Storebus_Common_V1_ErrorStatus.self, from: body)
        }
    }

    /// Sends one call (`metadata` as `key: value` lines, `timeoutMilliseconds` on the timeout line)
    /// and waits for its answer 10 s longer than its timeout; throws when none comes.
    public func call(_ path: String, body: String, metadata: [String] = [], id: String = "1", timeoutMilliseconds: Int = 30_000) async throws -> Answer {
        let header = (["SB1Q", id, "\(timeoutMilliseconds)", path] + metadata).joined(separator: "\n")
        try send([[], Array(header.utf8), Array(body.utf8)])
        guard let message = try await receive(timeout: .milliseconds(timeoutMilliseconds + 10_000)) else {
            throw ClusterFailure(description: "\(path) was not answered")
        }
        guard let answer = Frames.parseAtClient(message.frames) else { throw ClusterFailure(description: "\(path): an answer that is no answer") }
        return Answer(code: answer.code, body: answer.body)
    }

    /// Opens a gateway session for `account` on device `d` of the demo puzzle app with `key`: its
    /// `session: <token>` metadata line and the methods it may call.
    /// An empty `account` opens a server session (an app's server key: no account, no device).
    public func authenticate(key: String, account: String) async throws -> (metadata: String, token: String, methods: Set<String>) {
        let body =
            account.isEmpty
            ? "{\"apiKey\":\"\(key)\",\"appBundleId\":\"\(puzzle)\"}"
            : "{\"apiKey\":\"\(key)\",\"appBundleId\":\"\(puzzle)\",\"accountId\":\"\(account)\",\"deviceId\":\"d\"}"
        let answer = try await call(Storebus_Gateway_V1_Gateway.authenticate.path, body: body)
        guard answer.code == .ok else { throw ClusterFailure(description: "Authenticate answered \(answer.code.name)") }
        let session = try JSONCodec.decode(Storebus_Gateway_V1_AuthenticateResponse.self, from: answer.body)
        return ("session: \(session.sessionID)", session.sessionID, Set(session.allowedMethods))
    }
}
