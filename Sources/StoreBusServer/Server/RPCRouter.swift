import StoreBus
import StoreSchema
import SwiftProtobuf

/// The table of methods a server answers, from method path to handler.
///
/// Services register the generated handler protocols (`register(_:)`, written by
/// protoc-gen-storebus for each service of the contract). Typed handlers receive a decoded request
/// that has passed the router's ``interceptors`` and return a response message; raw handlers receive
/// the JSON body and return JSON bytes, for forwarders and for handlers that assemble JSON from
/// stored fragments without decoding them.
public struct RPCRouter: Sendable {
    /// A handler on encoded bodies.
    public typealias RawHandler = @Sendable (_ body: [UInt8], _ context: ServerContext) async throws -> [UInt8]
    /// A handler that answers at once when it can, or hands back the asynchronous rest of its work.
    public typealias StagedRawHandler = @Sendable (_ body: [UInt8], _ context: ServerContext) throws -> Staged<[UInt8]>

    /// How a method is served.
    enum Entry: Sendable {
        /// In a task of its own.
        case async(RawHandler)
        /// Inline on the server's reactor; a task only for the part that has to wait.
        case staged(StagedRawHandler)
    }

    private(set) var handlers: [String: Entry] = [:]
    /// What runs on every typed request before its handler, in order (``StandardInterceptors/all``
    /// unless said otherwise). Methods registered later see a change; earlier ones keep the chain
    /// they were registered with.
    public var interceptors: [any ServerInterceptor]

    /// An empty router whose typed methods run `interceptors`.
    public init(interceptors: [any ServerInterceptor] = StandardInterceptors.all) {
        self.interceptors = interceptors
    }

    /// Answers `method` with `handler`, its messages read and written by `codec` (swift-protobuf's
    /// JSON unless a service gives a faster one). A later registration of the same method replaces
    /// the earlier.
    public mutating func register<Request: ContractChecked, Response>(
        _ method: MethodDescriptor<Request, Response>,
        codec: MessageCodec<Request, Response> = .plain,
        _ handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        let interceptors = interceptors
        let erased = method.erased
        handlers[method.path] = .async { body, context in
            var request = try codec.decode(body)
            for interceptor in interceptors { try interceptor.intercept(&request, method: erased, context: context) }
            let response = try await handler(request, context)
            return try codec.encode(response)
        }
    }

    /// Answers `method` with a handler that runs inline on the server's reactor and either answers
    /// at once (`.now`), with no task and no timer, or returns the part that has to wait (`.later`),
    /// which then runs in a task with the request's deadline, like any handler. For work that is
    /// usually in memory (health, counters, catalog queries); the immediate part must not block.
    public mutating func registerStaged<Request: ContractChecked, Response>(
        _ method: MethodDescriptor<Request, Response>,
        _ handler: @escaping @Sendable (Request, ServerContext) throws -> Staged<Response>
    ) {
        let interceptors = interceptors
        let erased = method.erased
        handlers[method.path] = .staged { body, context in
            var request = try JSONCodec.decode(Request.self, from: body)
            for interceptor in interceptors { try interceptor.intercept(&request, method: erased, context: context) }
            switch try handler(request, context) {
            case .now(let response):
                return .now(try JSONCodec.encode(response))
            case .later(let work):
                return .later { try JSONCodec.encode(try await work()) }
            }
        }
    }

    /// Answers `path` with a staged handler working on JSON bytes (see ``registerStaged(_:_:)``).
    public mutating func registerStagedRaw(path: String, _ handler: @escaping StagedRawHandler) {
        handlers[path] = .staged(handler)
    }

    /// Answers `path` with a handler working on JSON bytes.
    public mutating func registerRaw(path: String, _ handler: @escaping RawHandler) {
        handlers[path] = .async(handler)
    }

    /// Adds every method of another router.
    public mutating func merge(_ other: RPCRouter) {
        handlers.merge(other.handlers) { _, new in new }
    }

    /// How a path is served.
    func entry(for path: String) -> Entry? { handlers[path] }

    /// Every registered method path, sorted.
    public var methods: [String] { handlers.keys.sorted() }
}

/// The outcome of a staged handler: the answer now, or the work that produces it later.
public enum Staged<Response: Sendable>: Sendable {
    /// Answered at once, inline.
    case now(Response)
    /// The rest of the work, run in a task with the request's deadline.
    case later(@Sendable () async throws -> Response)
}

/// How a method's request is read from its body and its response written: swift-protobuf's proto3
/// JSON (``plain``), or a service's own hand-written reader and writer for its hottest methods (a
/// fast path, docs/performance.md), which must read and write exactly what swift-protobuf does and
/// fall back on it for anything else. Handlers see messages either way.
public struct MessageCodec<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>: Sendable {
    /// Reads a request body; throws INVALID_ARGUMENT naming what it refuses.
    public var decode: @Sendable (_ body: [UInt8]) throws -> Request
    /// Writes a response.
    public var encode: @Sendable (_ response: Response) throws -> [UInt8]

    /// A codec of the given reader and writer.
    public init(decode: @escaping @Sendable ([UInt8]) throws -> Request, encode: @escaping @Sendable (Response) throws -> [UInt8]) {
        self.decode = decode
        self.encode = encode
    }

    /// swift-protobuf's JSON.
    public static var plain: MessageCodec {
        MessageCodec(decode: { try JSONCodec.decode(Request.self, from: $0) }, encode: { try JSONCodec.encode($0) })
    }
}
