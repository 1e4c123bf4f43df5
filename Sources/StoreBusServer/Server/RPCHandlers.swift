import StoreBus
import StoreSchema
import SwiftProtobuf

/// What every generated handler protocol (`<Service>.Handlers`, in `Generated/*.handlers.swift`)
/// refines: a set of handlers that may read and write some of its messages with a faster codec.
public protocol RPCHandlers: Sendable {
    /// Codecs for some of the service's methods (fast paths, docs/performance.md); every other method
    /// reads and writes swift-protobuf's JSON.
    var codecs: MessageCodecs { get }
}

extension RPCHandlers {
    public var codecs: MessageCodecs { MessageCodecs() }
}

/// A codec per method path, for the methods that have one of their own.
public struct MessageCodecs: Sendable {
    private var table: [String: any Sendable] = [:]

    /// No codec of its own for any method.
    public init() {}

    /// Reads and writes `method`'s messages with `codec`.
    public mutating func use<Request, Response>(_ codec: MessageCodec<Request, Response>, for method: MethodDescriptor<Request, Response>) {
        table[method.path] = codec
    }

    /// `method`'s codec: its own, or swift-protobuf's JSON.
    public subscript<Request, Response>(method: MethodDescriptor<Request, Response>) -> MessageCodec<Request, Response> {
        table[method.path] as? MessageCodec<Request, Response> ?? .plain
    }
}
