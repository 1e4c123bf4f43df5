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

extension Socket {
    /// Receives an answer as a DEALER does: each frame copied out, except a frame after the body
    /// (the third after the empty delimiter, an attachment: a chunk of hosted content), which is
    /// received held, so that a gateway sends it on, and a device reads it, where libzmq put it.
    /// Frames beyond it (an answer no StoreBus server sends) come copied, as the rest, and the held
    /// one with them: ``Frames/parseAtClient(_:attachment:)`` refuses such an answer.
    package func receiveResponse(dontWait: Bool) throws(ZMQError) -> (frames: [[UInt8]], attachment: HeldFrame?) {
        var frames: [[UInt8]] = []
        frames.reserveCapacity(3)
        var delimiter: Int?
        var more = true
        // Once the first frame has come, the rest of the message is there already.
        var first = true
        while more {
            if let delimiter, frames.count == delimiter + 3 {
                let (held, heldMore) = try receiveHeldFrame(dontWait: dontWait && first)
                guard heldMore else { return (frames, held) }
                frames.append(held.bytes)
            } else {
                let (frame, frameMore) = try receiveFrame(dontWait: dontWait && first)
                if delimiter == nil && frame.isEmpty { delimiter = frames.count }
                frames.append(frame)
                more = frameMore
            }
            first = false
        }
        return (frames, nil)
    }
}
