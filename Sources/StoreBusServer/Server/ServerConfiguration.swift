import StoreBus

/// How an RPC server listens and protects itself. Every field has a working default.
public struct ServerConfiguration: Sendable {
    /// Endpoints to bind, such as `tcp://127.0.0.1:7301` or `ipc:///run/storebus/catalog.sock`.
    /// A port of `*` picks a free one; ``RPCServer/boundEndpoints`` tells which.
    public var endpoints: [String]
    /// Most requests handled at once; further requests get RESOURCE_EXHAUSTED. Default 10,000.
    public var maxInFlight: Int = 10_000
    /// Largest inbound message (MAXMSGSIZE); a peer that sends a larger one is disconnected.
    /// Default 4 MiB.
    public var maxMessageBytes: Int64 = WireProtocol.defaultMaxMessageBytes
    /// Messages queued per peer in each direction (SNDHWM/RCVHWM). Default 50,000.
    public var highWaterMark: Int32 = 50_000
    /// ZMTP heartbeat interval; a peer silent for ``heartbeatTimeout`` is dropped. Default 2 s / 6 s.
    public var heartbeatInterval: Duration = .seconds(2)
    /// See ``heartbeatInterval``.
    public var heartbeatTimeout: Duration = .seconds(6)
    /// How long a graceful shutdown waits for running requests before cancelling them. Default 10 s.
    public var shutdownGracePeriod: Duration = .seconds(10)

    /// A configuration binding `endpoints`.
    public init(endpoints: [String]) {
        self.endpoints = endpoints
    }
}
