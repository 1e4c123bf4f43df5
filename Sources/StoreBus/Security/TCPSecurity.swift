import ZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How StoreBus's sockets secure their TCP links: the ``ZeroMQ/EndpointPolicy`` of a process's
/// context, applied by `Socket.bind` and `Socket.connect` to every `tcp://` endpoint (in-process and
/// IPC endpoints never cross a network and are left alone). A socket given CURVE options of its own
/// (`SocketOption.curveServer`, `.curveClient`) keeps them.
public enum TCPSecurity: EndpointPolicy, Equatable {
    /// Plain TCP everywhere: libzmq's default.
    case plain
    /// Plain TCP on loopback addresses only: binding or connecting anywhere else fails with
    /// `EACCES`, so that a process nobody gave keys cannot be put on a network by a stray address.
    case plainOnLoopback
    /// CURVE on every TCP link but the listed exceptions (see ``CurveLinks``).
    case curve(CurveLinks)
}

/// The CURVE settings of a context whose links follow the Ironhouse pattern: one long-term key
/// pair for the process; bound sockets are CURVE servers whose clients a ``CurveAuthenticator``
/// admits by public key; connecting sockets are CURVE clients that know each server's public key.
public struct CurveLinks: Sendable, Equatable {
    /// The ZAP domain of bound sockets whose clients must hold an allowed key.
    public static let serviceDomain = "storebus"
    /// The ZAP domain of ``openEndpoints``: any CURVE client is admitted (and must prove itself
    /// otherwise, such as with an API key).
    public static let clientDomain = "storebus-clients"

    /// The process's own key pair.
    public var keyPair: CurveKeyPair
    /// The public key of the server at each endpoint this process connects to, by endpoint as
    /// written in the configuration (`tcp://10.0.0.2:7302`).
    public var serverKeys: [String: String]
    /// Bound endpoints that admit any CURVE client (ZAP domain ``clientDomain``).
    public var openEndpoints: Set<String>
    /// Endpoints left plain because a configuration says so.
    public var plainEndpoints: Set<String>

    /// Settings for `keyPair`.
    public init(keyPair: CurveKeyPair, serverKeys: [String: String] = [:], openEndpoints: Set<String> = [], plainEndpoints: Set<String> = []) {
        self.keyPair = keyPair
        self.serverKeys = serverKeys
        self.openEndpoints = openEndpoints
        self.plainEndpoints = plainEndpoints
    }
}

extension TCPSecurity {
    /// Whether `endpoint` is TCP (what this policy governs).
    static func isTCP(_ endpoint: String) -> Bool {
        endpoint.hasPrefix("tcp://")
    }

    /// Whether a TCP endpoint names a loopback address: 127.0.0.0/8, `[::1]` or `localhost`. A
    /// wildcard (`*`, `0.0.0.0`) is not loopback. For a connect endpoint with a source address
    /// (`tcp://source;destination`) the destination counts.
    public static func isLoopback(_ endpoint: String) -> Bool {
        guard isTCP(endpoint) else { return false }
        var address = Substring(endpoint.dropFirst("tcp://".count))
        if let semicolon = address.lastIndex(of: ";") { address = address[address.index(after: semicolon)...] }
        let host: Substring
        if address.hasPrefix("[") {
            guard let close = address.firstIndex(of: "]") else { return false }
            host = address[address.index(after: address.startIndex)..<close]
        } else {
            host = address.split(separator: ":", maxSplits: 1).first ?? ""
        }
        if host == "localhost" || host == "::1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// Sets the options a socket needs before binding or connecting `endpoint`.
    public func prepare(_ socket: Socket, endpoint: String, binding: Bool) throws(ZMQError) {
        guard Self.isTCP(endpoint), !socket.hasOwnCurveOptions else { return }
        switch self {
        case .plain:
            return
        case .plainOnLoopback:
            guard Self.isLoopback(endpoint) else {
                throw ZMQError(
                    code: EACCES, operation: "\(binding ? "zmq_bind" : "zmq_connect")(\(endpoint)): plain TCP is allowed on loopback only; configure CURVE keys, or say plain TCP explicitly")
            }
        case .curve(let links):
            if links.plainEndpoints.contains(endpoint) { return }
            if binding {
                try socket.applyPolicyOption(.curveServer(secretKey: links.keyPair.secretKey))
                try socket.applyPolicyOption(.zapDomain(links.openEndpoints.contains(endpoint) ? CurveLinks.clientDomain : CurveLinks.serviceDomain))
            } else {
                guard let serverKey = links.serverKeys[endpoint] else {
                    throw ZMQError(code: EACCES, operation: "zmq_connect(\(endpoint)): no CURVE server key is configured for this endpoint")
                }
                try socket.applyPolicyOption(.curveClient(serverKey: serverKey, publicKey: links.keyPair.publicKey, secretKey: links.keyPair.secretKey))
            }
        }
    }
}

extension ZeroMQ.Context {
    /// A context whose sockets secure their TCP links as `tcpSecurity` says.
    public convenience init(ioThreads: Int32 = 1, batchScheduledIO: Bool = true, tcpSecurity: TCPSecurity) throws(ZMQError) {
        try self.init(ioThreads: ioThreads, batchScheduledIO: batchScheduledIO, endpointPolicy: tcpSecurity)
    }
}
