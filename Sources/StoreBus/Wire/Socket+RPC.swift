import ZeroMQ

extension Socket {
    /// The options every RPC socket sets, server or client: the largest inbound message, queue
    /// bounds in both directions, and ZMTP heartbeats (a peer silent for `heartbeatTimeout` is
    /// dropped, and asked to drop us after the same time).
    package func applyRPCLimits(maxMessageBytes: Int64, highWaterMark: Int32, heartbeatInterval: Duration, heartbeatTimeout: Duration) throws(ZMQError) {
        try set(.maxMessageSize(maxMessageBytes))
        try set(.sendHighWaterMark(highWaterMark))
        try set(.receiveHighWaterMark(highWaterMark))
        try set(
            .heartbeat(
                interval: heartbeatInterval.socketMilliseconds,
                timeout: heartbeatTimeout.socketMilliseconds,
                ttl: heartbeatTimeout.socketMilliseconds
            ))
    }
}
