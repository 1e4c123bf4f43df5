import StoreBus

/// `host:port` of an HTTP endpoint (the receipt service's verifyReceipt, a process's metrics).
public struct HTTPAddress: Sendable, Equatable {
    public var host: String
    public var port: Int

    /// Parses `text`; a ``StartupError`` naming `setting` when it is not `host:port`.
    public init(_ text: String, setting: String) throws {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port),
            colon > text.startIndex
        else {
            throw StartupError("\(setting) must be host:port, such as 127.0.0.1:7383, not \(RPCError.echo(text))")
        }
        host = String(text[..<colon])
        self.port = port
    }
}
