import StoreSchema

/// The error of a failed StoreBus call: a status code, a message, structured details and, on the
/// side that raised it, the underlying cause.
///
/// Handlers throw it to answer with a status; callers catch it to learn why a call failed. Any other
/// error thrown by a handler is answered as INTERNAL without exposing its text.
public struct RPCError: Error, Sendable, CustomStringConvertible {
    /// The status code.
    public var code: StatusCode
    /// A sentence for developers.
    public var message: String
    /// Structured details (field violations, the resource concerned, retry advice, a reason).
    public var details: Storebus_Common_V1_ErrorStatus
    /// The local error that caused this one, if any. Never sent over the wire.
    public var cause: (any Error & Sendable)?

    /// Creates an error. `details` need not repeat the code and message.
    public init(
        _ code: StatusCode,
        _ message: String,
        details: Storebus_Common_V1_ErrorStatus = .init(),
        cause: (any Error & Sendable)? = nil
    ) {
        self.code = code
        self.message = message
        self.details = details
        self.cause = cause
    }

    /// INVALID_ARGUMENT naming the offending field (its proto3 JSON path).
    public static func invalidArgument(field: String, _ description: String) -> RPCError {
        var details = Storebus_Common_V1_ErrorStatus()
        details.fieldViolations = [.with { $0.field = field; $0.description_p = description }]
        let message = field.isEmpty ? description : "invalid field \"\(field)\": \(description)"
        return RPCError(.invalidArgument, message, details: details)
    }

    /// An error about a resource (NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, ...).
    public static func resource(_ code: StatusCode, type: String, name: String, _ message: String) -> RPCError {
        var details = Storebus_Common_V1_ErrorStatus()
        details.resource = .with { $0.resourceType = type; $0.resourceName = name; $0.description_p = message }
        return RPCError(code, message, details: details)
    }

    /// The error with a machine-readable reason attached.
    public func withReason(_ reason: String, domain: String) -> RPCError {
        var copy = self
        copy.details.info.reason = reason
        copy.details.info.domain = domain
        return copy
    }

    /// The wire form: the details with code and message filled in.
    public var status: Storebus_Common_V1_ErrorStatus {
        var status = details
        status.code = code.rawValue
        status.message = message
        return status
    }

    /// Rebuilds an error from its wire form.
    public init(status: Storebus_Common_V1_ErrorStatus) {
        var details = status
        details.code = 0
        details.message = ""
        self.init(StatusCode(rawValue: status.code), status.message, details: details)
    }

    public var description: String { "\(code.name): \(message)" }
}
