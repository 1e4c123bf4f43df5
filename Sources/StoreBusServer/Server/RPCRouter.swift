import StoreBus
import StoreSchema
import SwiftProtobuf
import ZeroMQ

/// The table of methods a server answers, from method path to handler.
///
/// Services register the generated handler protocols (`register(_:)`, written by
/// protoc-gen-storebus for each service of the contract). Typed handlers receive a decoded request
/// that has passed the router's ``interceptors`` and return a response message; forwarders
/// (``registerRaw(path:placement:_:)``) receive the JSON body and return JSON bytes undecoded.
///
/// Each method runs where its registration says (``Placement``): off the server's reactor unless
/// the handlers call it loop-safe.
public struct RPCRouter: Sendable {
    /// A handler on encoded bodies.
    public typealias RawHandler = @Sendable (_ body: [UInt8], _ context: ServerContext) async throws -> RawReply

    /// Where a method's handler runs.
    public enum Placement: Sendable, Equatable {
        /// Started inline on the server's reactor, and back there after each suspension: no thread
        /// hop for a handler that answers from memory or awaits other threads (a database's, another
        /// service's). Such a handler must never block nor compute for long: every other call of the
        /// process waits while it runs.
        case loop
        /// On Swift's global concurrent executor: for handlers that read files, hash, encode or
        /// sign megabytes, so the reactor keeps answering other calls meanwhile.
        case pool
    }

    /// How a method is served.
    struct Entry: Sendable {
        let handler: RawHandler
        let placement: Placement
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
    /// JSON unless a service gives a faster one), run as `placement` says. A later registration of
    /// the same method replaces the earlier.
    public mutating func register<Request: ContractChecked, Response>(
        _ method: MethodDescriptor<Request, Response>,
        codec: MessageCodec<Request, Response> = .plain,
        placement: Placement = .pool,
        _ handler: @escaping @Sendable (Request, ServerContext) async throws -> Response
    ) {
        let decode = decoder(for: method, codec.decode)
        let reply = codec.reply
        handlers[method.path] = Entry(
            handler: { body, context in
                try reply(try await handler(try decode(body, context), context))
            }, placement: placement)
    }

    /// Answers `method` with a handler that writes its response's JSON itself (the contract's
    /// `prewritten_response`: assembled from stored JSON without decoding it).
    public mutating func register<Request: ContractChecked, Response>(
        _ method: MethodDescriptor<Request, Response>,
        codec: MessageCodec<Request, Response> = .plain,
        placement: Placement = .pool,
        _ handler: @escaping @Sendable (Request, ServerContext) async throws -> PrewrittenResponse<Response>
    ) {
        let decode = decoder(for: method, codec.decode)
        handlers[method.path] = Entry(
            handler: { body, context in
                RawReply(body: try await handler(try decode(body, context), context).json)
            }, placement: placement)
    }

    /// Reads a request with `decode` after the interceptors' admission checks, then runs their
    /// checks on the request.
    private func decoder<Request: ContractChecked, Response>(
        for method: MethodDescriptor<Request, Response>, _ decode: @escaping @Sendable ([UInt8]) throws -> Request
    ) -> @Sendable ([UInt8], ServerContext) throws -> Request {
        let interceptors = interceptors
        let erased = method.erased
        return { body, context in
            for interceptor in interceptors { try interceptor.admit(method: erased, context: context) }
            var request = try decode(body)
            for interceptor in interceptors { try interceptor.intercept(&request, method: erased, context: context) }
            return request
        }
    }

    /// Answers `path` with a handler on undecoded bodies: for forwarders (the gateway passing the
    /// contract's methods through to the services serving them) and tests of the transport itself.
    /// A service's own methods are typed, through its generated handler protocol.
    public mutating func registerRaw(path: String, placement: Placement = .loop, _ handler: @escaping RawHandler) {
        handlers[path] = Entry(handler: handler, placement: placement)
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

/// A response already written as its proto3 JSON, by a handler that assembles it from stored JSON
/// (methods the contract marks `prewritten_response`). The bytes must be what swift-protobuf would
/// accept as `Message`.
public struct PrewrittenResponse<Message: SwiftProtobuf.Message>: Sendable {
    /// The response's JSON.
    public let json: [UInt8]

    /// A response of JSON the handler wrote.
    public init(json: [UInt8]) {
        self.json = json
    }

    /// A response written by swift-protobuf from `message`.
    public init(_ message: Message) throws {
        json = try JSONCodec.encode(message)
    }
}

/// How a method's request is read from its body and its response written: swift-protobuf's proto3
/// JSON (``plain``), or a service's own hand-written reader and writer for its hottest methods (a
/// fast path, docs/performance.md), which must read and write exactly what swift-protobuf does and
/// fall back on it for anything else. Handlers see messages either way.
public struct MessageCodec<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>: Sendable {
    /// Reads a request body; throws INVALID_ARGUMENT naming what it refuses.
    public var decode: @Sendable (_ body: [UInt8]) throws -> Request
    /// Writes a response: its body and, for a method whose contract gives its answers a frame after
    /// the body, that frame.
    public var reply: @Sendable (_ response: Response) throws -> RawReply

    /// A codec of the given reader and writer.
    public init(decode: @escaping @Sendable ([UInt8]) throws -> Request, encode: @escaping @Sendable (Response) throws -> [UInt8]) {
        self.decode = decode
        reply = { RawReply(body: try encode($0)) }
    }

    /// A codec whose writer may put part of a response in a frame after its body.
    public init(decode: @escaping @Sendable ([UInt8]) throws -> Request, reply: @escaping @Sendable (Response) throws -> RawReply) {
        self.decode = decode
        self.reply = reply
    }

    /// swift-protobuf's JSON.
    public static var plain: MessageCodec {
        MessageCodec(decode: { try JSONCodec.decode(Request.self, from: $0) }, encode: { try JSONCodec.encode($0) })
    }
}

/// What a handler answers: the body (proto3 JSON) and, when the method's contract says so and the
/// request asked for it, one more frame after it (proto-schemas/README.md, "Attachments").
public struct RawReply: Sendable {
    /// The response's JSON.
    public var body: [UInt8]
    /// The frame after the body (sent as it is held: a frame received, as a gateway's, goes on
    /// without a copy).
    public var attachment: HeldFrame?

    /// A reply of `body` and perhaps an attachment.
    public init(body: [UInt8], attachment: HeldFrame? = nil) {
        self.body = body
        self.attachment = attachment
    }
}
