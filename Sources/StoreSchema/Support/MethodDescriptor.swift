import SwiftProtobuf

// Hand-written support for the generated `*.storebus.swift` files (everything under Generated/ is
// written by protoc-gen-swift and protoc-gen-storebus and never edited by hand).

/// How many messages each side of a method sends.
public enum StreamingKind: Sendable {
    /// One request, one response.
    case unary
    /// One request, a stream of responses.
    case serverStreaming
    /// A stream of requests, one response.
    case clientStreaming
    /// Streams both ways.
    case bidirectionalStreaming
}

/// A method of a StoreBus service with its request and response types, as declared in proto-schemas/.
public struct MethodDescriptor<Request: SwiftProtobuf.Message, Response: SwiftProtobuf.Message>: Sendable {
    /// The gRPC method path, `/package.Service/Method`.
    public let path: String
    /// The method's bare name, `Method`.
    public let name: String
    /// Whether calling twice has the effect of calling once (`option idempotency_level`), so the RPC
    /// layer may retry it on its own.
    public let idempotent: Bool
    /// Streaming shape.
    public let streaming: StreamingKind

    /// Describes `method` of `service` (fully qualified, `package.Service`).
    public init(service: String, method: String, idempotent: Bool, streaming: StreamingKind) {
        self.path = "/\(service)/\(method)"
        self.name = method
        self.idempotent = idempotent
        self.streaming = streaming
    }

    /// The descriptor without its types.
    public var erased: AnyMethodDescriptor {
        AnyMethodDescriptor(path: path, idempotent: idempotent, streaming: streaming)
    }
}

/// A method descriptor without its message types, for tables and routing.
public struct AnyMethodDescriptor: Sendable, Hashable {
    /// The gRPC method path.
    public let path: String
    /// See ``MethodDescriptor/idempotent``.
    public let idempotent: Bool
    /// See ``MethodDescriptor/streaming``.
    public let streaming: StreamingKind
}

/// A generated namespace describing one service.
public protocol ServiceDescription {
    /// The service's fully qualified proto name, `package.Service`.
    static var serviceName: String { get }
    /// Its methods in declaration order.
    static var methods: [AnyMethodDescriptor] { get }
}
