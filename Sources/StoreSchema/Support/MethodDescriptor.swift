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

/// Who may call a method through the gateway: the contract's `storebus.options.v1.access` option
/// (proto-schemas/storebus/options/v1/options.proto), or its service's `default_access`.
public enum MethodAccess: Sendable, Hashable {
    /// Any session; the gateway forwards the call with the session's principal.
    case client
    /// Admin sessions only; forwarded without a principal.
    case admin
    /// Never through the gateway: for the services of a deployment.
    case `internal`
    /// Server sessions (an app's backend, with its server key) and admin sessions; a server session
    /// is forwarded with a principal naming its app alone.
    case server
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
    /// Who may call it through the gateway.
    public let access: MethodAccess
    /// Whether a gateway may answer a repeated request of the same app from an answer it kept
    /// (`option (storebus.options.v1.cacheable)`).
    public let cacheable: Bool

    /// Describes `method` of `service` (fully qualified, `package.Service`).
    public init(
        service: String, method: String, idempotent: Bool, streaming: StreamingKind,
        access: MethodAccess = .internal, cacheable: Bool = false
    ) {
        self.path = "/\(service)/\(method)"
        self.name = method
        self.idempotent = idempotent
        self.streaming = streaming
        self.access = access
        self.cacheable = cacheable
    }

    /// The descriptor without its types.
    public var erased: AnyMethodDescriptor {
        AnyMethodDescriptor(path: path, idempotent: idempotent, streaming: streaming, access: access, cacheable: cacheable)
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
    /// See ``MethodDescriptor/access``.
    public let access: MethodAccess
    /// See ``MethodDescriptor/cacheable``.
    public let cacheable: Bool

    /// The fully qualified name of the method's service, `package.Service`.
    public var service: Substring { path.dropFirst().prefix { $0 != "/" } }
}

/// A generated namespace describing one service.
public protocol ServiceDescription {
    /// The service's fully qualified proto name, `package.Service`.
    static var serviceName: String { get }
    /// Its methods in declaration order.
    static var methods: [AnyMethodDescriptor] { get }
}

/// A service of the contract as a value: its name and methods (``StoreBusContract/services``).
public struct ContractService: Sendable {
    /// The fully qualified name, `package.Service`.
    public let name: String
    /// Its methods in declaration order.
    public let methods: [AnyMethodDescriptor]

    /// The service a generated description describes.
    public init<Service: ServiceDescription>(_ service: Service.Type) {
        name = Service.serviceName
        methods = Service.methods
    }
}

extension StoreBusContract {
    /// Every method of every service of the contract, in the order of ``services``.
    public static let methods: [AnyMethodDescriptor] = services.flatMap(\.methods)
}
