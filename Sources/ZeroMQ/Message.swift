/// A multipart ZeroMQ message: the unit that is sent and received whole.
///
/// libzmq delivers either every frame of a message or none of them; this type keeps the frames
/// together so that no caller ever handles half a message.
public struct Message: Sendable, Equatable, Hashable {
    /// The frames, in order.
    public var frames: [[UInt8]]

    /// A message of the given frames.
    public init(frames: [[UInt8]]) {
        self.frames = frames
    }

    /// A message of UTF-8 frames.
    public init(strings: [String]) {
        self.frames = strings.map { Array($0.utf8) }
    }

    /// Total payload size in bytes, over all frames.
    public var byteCount: Int { frames.reduce(0) { $0 + $1.count } }
}
