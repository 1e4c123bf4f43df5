/// How an RPC client connects and retries. Every field has a working default.
public struct ClientConfiguration: Sendable {
    /// Endpoints of the service's instances. Calls go to connected instances only, the least busy
    /// first.
    public var endpoints: [String]
    /// Timeout of calls that set none. Default 30 s.
    public var defaultTimeout: Duration = .seconds(30)
    /// Most attempts of a retryable call (idempotent method, or one with an idempotency key) when
    /// its instance disconnects or answers UNAVAILABLE. Default 3.
    public var maxAttempts: Int = 3
    /// Pause before a retry after UNAVAILABLE. Default 50 ms.
    public var retryBackoff: Duration = .milliseconds(50)
    /// Largest inbound message. Default 4 MiB.
    public var maxMessageBytes: Int64 = WireProtocol.defaultMaxMessageBytes
    /// Messages queued per connection in each direction. Default 50,000.
    public var highWaterMark: Int32 = 50_000
    /// ZMTP heartbeat interval and timeout: a silent instance is given up after the timeout and its
    /// calls retried elsewhere or failed. Default 1 s / 3 s.
    public var heartbeatInterval: Duration = .seconds(1)
    /// See ``heartbeatInterval``.
    public var heartbeatTimeout: Duration = .seconds(3)
    /// Reconnect back-off: first retry, and the cap of the doubling. Default 100 ms / 2 s.
    public var reconnectInterval: Duration = .milliseconds(100)
    /// See ``reconnectInterval``.
    public var reconnectIntervalMax: Duration = .seconds(2)
    /// How long a call waits for an instance to connect when none is connected; then it fails with
    /// UNAVAILABLE, reason `NOT_SENT` and retry advice (it did not run). nil, the default: until its
    /// deadline. A forwarder (the gateway) sets it, so that its callers hear of an outage at once
    /// and retry, rather than at their deadlines.
    public var connectionWait: Duration?
    /// The servers' CURVE public key (Z85), for a client that reaches a CURVE endpoint open to any
    /// client (a gateway's): the connection is encrypted and the server authenticated, the client
    /// holding a key pair made for the connection. nil, the default: the context's ``ZeroMQ/TCPSecurity``
    /// decides (a service's own key pair, or plain TCP).
    public var serverPublicKey: String?

    /// A configuration for `endpoints`.
    public init(endpoints: [String]) {
        self.endpoints = endpoints
    }
}

/// Per-call options.
public struct CallOptions: Sendable {
    /// How long the caller waits; the server sees it and drops the work when it passes.
    /// nil: the client's default.
    public var timeout: Duration?
    /// Metadata sent with the call.
    public var metadata: Metadata
    /// Makes a non-idempotent call safe to retry: the server applies a key once.
    public var idempotencyKey: String? {
        get { metadata[WireProtocol.idempotencyKeyMetadata] }
        set { metadata[WireProtocol.idempotencyKeyMetadata] = newValue }
    }

    /// Options with an optional timeout and metadata.
    public init(timeout: Duration? = nil, metadata: Metadata = Metadata(), idempotencyKey: String? = nil) {
        self.timeout = timeout
        self.metadata = metadata
        if let idempotencyKey { self.idempotencyKey = idempotencyKey }
    }
}
