import StoreSchema
import SwiftProtobuf

/// The table of methods a server answers, from method path to handler.
///
/// Typed handlers receive a decoded request and return a response message; raw handlers receive
/// the JSON body and return JSON bytes, for forwarders and for handlers that assemble JSON from
/// stored fragments without decoding them.
public struct RPCRouter: Sendable {
    /// A handler on encoded bodies.
    public typealias RawHandler = @Sendable (_ body: [UInt8], _ context: ServerContext) async throws -> [UInt8]

    private(set) var handlers: [String: RawHandler] = [:]

    /// An empty router.
    public init() {}

    /// Answers `method` with `handler`. A later registration of the same method replaces the earlier.
    public mutating func register<Request, Response>(
        _ method: MethodDescriptor<Request, Response>,
        _ handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        handlers[method.path] = { body, context in
            let request = try JSONCodec.decode(Request.self, from: body)
            let response = try await handler(request, context)
            return try JSONCodec.encode(response)
        }
    }

    /// Answers `path` with a handler working on JSON bytes.
    public mutating func registerRaw(path: String, _ handler: @escaping RawHandler) {
        handlers[path] = handler
    }

    /// Adds every method of another router.
    public mutating func merge(_ other: RPCRouter) {
        handlers.merge(other.handlers) { _, new in new }
    }

    /// The handler for a path.
    public func handler(for path: String) -> RawHandler? { handlers[path] }

    /// Every registered method path, sorted.
    public var methods: [String] { handlers.keys.sorted() }
}
