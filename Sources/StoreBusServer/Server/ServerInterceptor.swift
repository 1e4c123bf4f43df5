import StoreBus
import StoreSchema

/// Per-call policy run on every typed request before its handler, in the router's order: what
/// grpc-swift-2 calls a server interceptor, here synchronous. `admit` sees the call before its body
/// is read (a caller refused there never hears a description of its body), `intercept` the decoded
/// request. An error ends the call with its status; the handler never runs.
public protocol ServerInterceptor: Sendable {
    /// Checks a call of `method` before its body is read. Admits every call unless implemented.
    func admit(method: AnyMethodDescriptor, context: ServerContext) throws(RPCError)
    /// Checks or amends `request`, a call of `method`.
    func intercept<Request: ContractChecked>(_ request: inout Request, method: AnyMethodDescriptor, context: ServerContext) throws(RPCError)
}

extension ServerInterceptor {
    public func admit(method: AnyMethodDescriptor, context: ServerContext) throws(RPCError) {}
    public func intercept<Request: ContractChecked>(_ request: inout Request, method: AnyMethodDescriptor, context: ServerContext) throws(RPCError) {}
}

/// The chain every router starts with: the principal's fields, then the contract's field rules, then
/// the idempotency key.
public enum StandardInterceptors {
    /// ``PrincipalInterceptor``, ``FieldRulesInterceptor``, ``IdempotencyKeyInterceptor``.
    public static let all: [any ServerInterceptor] = [PrincipalInterceptor(), FieldRulesInterceptor(), IdempotencyKeyInterceptor()]
}

/// A call with a principal (through the gateway) acts for its session: the request's app, account and
/// device fields (`rules.principal` in the contract) are filled with the session's when left out, and
/// any other is refused with PERMISSION_DENIED. Calls without one come from inside the deployment.
public struct PrincipalInterceptor: ServerInterceptor {
    public init() {}

    public func intercept<Request: ContractChecked>(_ request: inout Request, method: AnyMethodDescriptor, context: ServerContext) throws(RPCError) {
        guard let principal = context.principal else { return }
        try request.applyPrincipal(principal)
    }
}

/// The contract's field rules (lengths, counts, ranges, enum values, queue names): INVALID_ARGUMENT
/// naming the first field that breaks one.
public struct FieldRulesInterceptor: ServerInterceptor {
    public init() {}

    public func intercept<Request: ContractChecked>(_ request: inout Request, method: AnyMethodDescriptor, context: ServerContext) throws(RPCError) {
        try request.checkFields(prefix: "")
    }
}

/// The idempotency key of a request that has one (`rules.idempotency_key`): its own field, else the
/// call's `idempotency-key` metadata, written into the field for the handler. Both given and
/// different is INVALID_ARGUMENT: the caller meant one of them, and taking either silently could make
/// a retry look new, or a new call look like a retry. Longer than ``maxBytes`` is INVALID_ARGUMENT.
public struct IdempotencyKeyInterceptor: ServerInterceptor {
    /// Longest idempotency key, in bytes (as the contract says).
    public static let maxBytes = 128

    public init() {}

    public func intercept<Request: ContractChecked>(_ request: inout Request, method: AnyMethodDescriptor, context: ServerContext) throws(RPCError) {
        guard let field = Request.idempotencyKeyField else { return }
        let own = request[keyPath: field]
        let metadata = context.metadata[WireProtocol.idempotencyKeyMetadata]
        if let metadata, !metadata.isEmpty, !own.isEmpty, metadata != own {
            throw RPCError.invalidArgument(field: Request.idempotencyKeyName, "differs from the call's idempotency-key metadata; send one key, or the same in both")
        }
        let key = own.isEmpty ? (metadata ?? "") : own
        guard key.utf8.count <= Self.maxBytes else {
            throw RPCError.invalidArgument(field: own.isEmpty ? WireProtocol.idempotencyKeyMetadata : Request.idempotencyKeyName, "must be at most \(Self.maxBytes) bytes")
        }
        request[keyPath: field] = key
    }
}
