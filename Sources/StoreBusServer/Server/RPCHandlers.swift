import StoreBus
import StoreSchema
import SwiftProtobuf

/// What every generated handler protocol (`<Service>.Handlers`, in `Generated/*.handlers.swift`)
/// refines: a set of handlers that may read and write some of its messages with a faster codec, and
/// may run some of its methods on the server's reactor.
public protocol RPCHandlers: Sendable {
    /// Codecs for some of the service's methods (fast paths, docs/performance.md); every other method
    /// reads and writes swift-protobuf's JSON.
    var codecs: MessageCodecs { get }
    /// The methods that may run on the server's reactor (``RPCRouter/Placement/loop``): they answer
    /// from memory or await other threads, and never block. Every other method runs off it.
    var loopSafe: LoopSafeMethods { get }
}

extension RPCHandlers {
    public var codecs: MessageCodecs { MessageCodecs() }
    public var loopSafe: LoopSafeMethods { LoopSafeMethods() }
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

/// The methods of a set of handlers that run on the server's reactor.
public struct LoopSafeMethods: Sendable {
    private var paths: Set<String> = []

    /// None: every method runs off the reactor.
    public init() {}

    /// Every method of `service`.
    public static func all(of service: any ServiceDescription.Type) -> LoopSafeMethods {
        var methods = LoopSafeMethods()
        for method in service.methods { methods.paths.insert(method.path) }
        return methods
    }

    /// Every method of `service` but `excluded`.
    public static func all(of service: any ServiceDescription.Type, except excluded: [AnyMethodDescriptor]) -> LoopSafeMethods {
        var methods = all(of: service)
        for method in excluded { methods.paths.remove(method.path) }
        return methods
    }

    /// Where `method` runs.
    public func placement<Request, Response>(of method: MethodDescriptor<Request, Response>) -> RPCRouter.Placement {
        paths.contains(method.path) ? .loop : .pool
    }
}
