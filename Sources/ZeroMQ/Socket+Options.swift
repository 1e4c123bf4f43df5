import CZeroMQ

/// A socket option StoreBus sets on purpose, with its value.
public enum SocketOption: Sendable {
    /// Milliseconds pending messages may linger after close (0: drop at once; -1: forever, never used).
    case linger(Int32)
    /// Most messages queued for sending per peer before sends block or fail with EAGAIN.
    case sendHighWaterMark(Int32)
    /// Most messages queued on receipt per peer before libzmq stops reading from it.
    case receiveHighWaterMark(Int32)
    /// Largest inbound message in bytes; a peer sending a larger one is disconnected. -1: no limit.
    case maxMessageSize(Int64)
    /// ROUTER: fail with EHOSTUNREACH instead of silently dropping a message to an unknown peer.
    case routerMandatory(Bool)
    /// ROUTER: a new connection with a known routing id takes it over from the old one.
    case routerHandover(Bool)
    /// ZMTP heartbeat: PING every `interval` ms, give up on a peer silent for `timeout` ms, and ask
    /// the peer to time us out after `ttl` ms.
    case heartbeat(interval: Int32, timeout: Int32, ttl: Int32)
    /// Reconnect back-off: first retry after `interval` ms, doubling up to `max` ms.
    case reconnect(interval: Int32, max: Int32)
    /// Milliseconds a TCP connect may take before it is retried.
    case connectTimeout(Int32)
    /// Milliseconds the ZMTP handshake may take.
    case handshakeInterval(Int32)
    /// SUB: receive messages whose first frame starts with these bytes.
    case subscribe([UInt8])
    /// SUB: stop receiving a prefix given to `subscribe`.
    case unsubscribe([UInt8])
    /// The identity a ROUTER peer sees for this socket (1 to 255 bytes, not starting with 0).
    case routingID([UInt8])
    /// TCP keep-alive (1 on, 0 off, -1 system default).
    case tcpKeepAlive(Int32)
    /// CURVE server: this socket accepts CURVE clients using its secret key (Z85, 40 characters).
    case curveServer(secretKey: String)
    /// CURVE client: the server's public key and this socket's own key pair (Z85, 40 characters each).
    case curveClient(serverKey: String, publicKey: String, secretKey: String)
    /// The ZAP domain a server socket's handshakes are authenticated in (what a ZAP handler such as
    /// ``CurveAuthenticator`` reads to choose its rule), at most 254 bytes.
    case zapDomain(String)
}

extension Socket {
    /// Applies an option. CURVE options set here are the socket's own (``hasOwnCurveOptions``): a
    /// context's ``EndpointPolicy`` should leave them alone.
    public func set(_ option: SocketOption) throws(ZMQError) {
        switch option {
        case .curveServer, .curveClient: hasOwnCurveOptions = true
        default: break
        }
        try applyOption(option)
    }

    /// Applies an option on behalf of the context's ``EndpointPolicy``, not as the socket's own
    /// choice.
    public func applyPolicyOption(_ option: SocketOption) throws(ZMQError) {
        try applyOption(option)
    }

    /// Applies an option.
    func applyOption(_ option: SocketOption) throws(ZMQError) {
        switch option {
        case .linger(let value): try setInt(ZMQ_LINGER, value, "ZMQ_LINGER")
        case .sendHighWaterMark(let value): try setInt(ZMQ_SNDHWM, value, "ZMQ_SNDHWM")
        case .receiveHighWaterMark(let value): try setInt(ZMQ_RCVHWM, value, "ZMQ_RCVHWM")
        case .maxMessageSize(let value): try setInt64(ZMQ_MAXMSGSIZE, value, "ZMQ_MAXMSGSIZE")
        case .routerMandatory(let on): try setInt(ZMQ_ROUTER_MANDATORY, on ? 1 : 0, "ZMQ_ROUTER_MANDATORY")
        case .routerHandover(let on): try setInt(ZMQ_ROUTER_HANDOVER, on ? 1 : 0, "ZMQ_ROUTER_HANDOVER")
        case .heartbeat(let interval, let timeout, let ttl):
            try setInt(ZMQ_HEARTBEAT_IVL, interval, "ZMQ_HEARTBEAT_IVL")
            try setInt(ZMQ_HEARTBEAT_TIMEOUT, timeout, "ZMQ_HEARTBEAT_TIMEOUT")
            try setInt(ZMQ_HEARTBEAT_TTL, ttl, "ZMQ_HEARTBEAT_TTL")
        case .reconnect(let interval, let max):
            try setInt(ZMQ_RECONNECT_IVL, interval, "ZMQ_RECONNECT_IVL")
            try setInt(ZMQ_RECONNECT_IVL_MAX, max, "ZMQ_RECONNECT_IVL_MAX")
        case .connectTimeout(let value): try setInt(ZMQ_CONNECT_TIMEOUT, value, "ZMQ_CONNECT_TIMEOUT")
        case .handshakeInterval(let value): try setInt(ZMQ_HANDSHAKE_IVL, value, "ZMQ_HANDSHAKE_IVL")
        case .subscribe(let prefix): try setBytes(ZMQ_SUBSCRIBE, prefix, "ZMQ_SUBSCRIBE")
        case .unsubscribe(let prefix): try setBytes(ZMQ_UNSUBSCRIBE, prefix, "ZMQ_UNSUBSCRIBE")
        case .routingID(let id): try setBytes(ZMQ_ROUTING_ID, id, "ZMQ_ROUTING_ID")
        case .tcpKeepAlive(let value): try setInt(ZMQ_TCP_KEEPALIVE, value, "ZMQ_TCP_KEEPALIVE")
        case .curveServer(let secretKey):
            try setInt(ZMQ_CURVE_SERVER, 1, "ZMQ_CURVE_SERVER")
            try setBytes(ZMQ_CURVE_SECRETKEY, Array(secretKey.utf8), "ZMQ_CURVE_SECRETKEY")
        case .curveClient(let serverKey, let publicKey, let secretKey):
            try setBytes(ZMQ_CURVE_SERVERKEY, Array(serverKey.utf8), "ZMQ_CURVE_SERVERKEY")
            try setBytes(ZMQ_CURVE_PUBLICKEY, Array(publicKey.utf8), "ZMQ_CURVE_PUBLICKEY")
            try setBytes(ZMQ_CURVE_SECRETKEY, Array(secretKey.utf8), "ZMQ_CURVE_SECRETKEY")
        case .zapDomain(let domain): try setBytes(ZMQ_ZAP_DOMAIN, Array(domain.utf8), "ZMQ_ZAP_DOMAIN")
        }
    }

    /// The endpoint last bound or connected, with any wildcard port resolved
    /// (`tcp://127.0.0.1:*` becomes `tcp://127.0.0.1:41234`).
    public var lastEndpoint: String {
        var buffer = [CChar](repeating: 0, count: 1024)
        var size = buffer.count
        guard zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size) == 0 else { return "" }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Reads an integer option such as `ZMQ_EVENTS` or `ZMQ_SNDHWM`.
    public func intOption(_ name: Int32) throws(ZMQError) -> Int32 {
        var value: Int32 = 0
        var size = MemoryLayout<Int32>.size
        if zmq_getsockopt(handle, name, &value, &size) != 0 { throw ZMQError.last("zmq_getsockopt(\(name))") }
        return value
    }

    /// Reads a 64-bit integer option such as `ZMQ_MAXMSGSIZE`.
    public func int64Option(_ name: Int32) throws(ZMQError) -> Int64 {
        var value: Int64 = 0
        var size = MemoryLayout<Int64>.size
        if zmq_getsockopt(handle, name, &value, &size) != 0 { throw ZMQError.last("zmq_getsockopt(\(name))") }
        return value
    }

    private func setInt(_ name: Int32, _ value: Int32, _ label: String) throws(ZMQError) {
        var value = value
        if zmq_setsockopt(handle, name, &value, MemoryLayout<Int32>.size) != 0 { throw ZMQError.last("zmq_setsockopt(\(label))") }
    }

    private func setInt64(_ name: Int32, _ value: Int64, _ label: String) throws(ZMQError) {
        var value = value
        if zmq_setsockopt(handle, name, &value, MemoryLayout<Int64>.size) != 0 { throw ZMQError.last("zmq_setsockopt(\(label))") }
    }

    private func setBytes(_ name: Int32, _ value: [UInt8], _ label: String) throws(ZMQError) {
        let rc = value.withUnsafeBytes { zmq_setsockopt(handle, name, $0.baseAddress, $0.count) }
        if rc != 0 { throw ZMQError.last("zmq_setsockopt(\(label))") }
    }
}
