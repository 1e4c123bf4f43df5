import Logging
import StoreBus

/// What a handler knows about the call it serves.
public struct ServerContext: Sendable {
    /// The method path.
    public let method: String
    /// The caller's request id, as text.
    public let requestID: String
    /// When the caller stops waiting, if it set a deadline. The handler's task is cancelled then.
    public let deadline: ContinuousClock.Instant?
    /// The call's metadata (for calls through the gateway: the authenticated principal).
    public let metadata: Metadata
    private let baseLogger: Logger

    /// Creates a context; servers do this, tests may too.
    public init(method: String, requestID: String, deadline: ContinuousClock.Instant?, metadata: Metadata, logger: Logger) {
        self.method = method
        self.requestID = requestID
        self.deadline = deadline
        self.metadata = metadata
        self.baseLogger = logger
    }

    /// A logger with `request.id` and `rpc.method` in its metadata (built on use: most requests
    /// never log).
    public var logger: Logger {
        var logger = baseLogger
        logger[metadataKey: "request.id"] = "\(requestID)"
        logger[metadataKey: "rpc.method"] = "\(method)"
        return logger
    }

    /// Time left before the deadline (nil without one).
    public var timeRemaining: Duration? {
        deadline.map { ContinuousClock.now.duration(to: $0) }
    }
}
