/// A gRPC status code. StoreBus uses gRPC's codes and numbers unchanged.
///
/// A struct rather than an enum so that a code this version does not know (sent by a newer peer)
/// is still carried faithfully.
public struct StatusCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric code as it travels on the wire.
    public let rawValue: Int32
    /// Wraps a numeric code.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Success.
    public static let ok = StatusCode(rawValue: 0)
    /// The caller cancelled the call.
    public static let cancelled = StatusCode(rawValue: 1)
    /// An error with no better code.
    public static let unknown = StatusCode(rawValue: 2)
    /// The request is malformed or a field is out of range; retrying it unchanged will fail again.
    public static let invalidArgument = StatusCode(rawValue: 3)
    /// The deadline passed before the call completed.
    public static let deadlineExceeded = StatusCode(rawValue: 4)
    /// The thing asked for does not exist.
    public static let notFound = StatusCode(rawValue: 5)
    /// The thing to create exists already.
    public static let alreadyExists = StatusCode(rawValue: 6)
    /// The caller is known but may not do this.
    public static let permissionDenied = StatusCode(rawValue: 7)
    /// A limit was reached (size, rate, queue).
    public static let resourceExhausted = StatusCode(rawValue: 8)
    /// The system is not in a state where this can be done.
    public static let failedPrecondition = StatusCode(rawValue: 9)
    /// The operation was aborted, typically by a concurrency conflict.
    public static let aborted = StatusCode(rawValue: 10)
    /// A value is past the valid range.
    public static let outOfRange = StatusCode(rawValue: 11)
    /// The method is not implemented by this server.
    public static let unimplemented = StatusCode(rawValue: 12)
    /// A bug or broken invariant on the server.
    public static let internalError = StatusCode(rawValue: 13)
    /// The service cannot be reached now; a retry may succeed.
    public static let unavailable = StatusCode(rawValue: 14)
    /// Unrecoverable data loss.
    public static let dataLoss = StatusCode(rawValue: 15)
    /// The caller did not prove who it is.
    public static let unauthenticated = StatusCode(rawValue: 16)

    /// gRPC's name for the code, such as `INVALID_ARGUMENT`.
    public var name: String {
        switch rawValue {
        case 0: "OK"
        case 1: "CANCELLED"
        case 2: "UNKNOWN"
        case 3: "INVALID_ARGUMENT"
        case 4: "DEADLINE_EXCEEDED"
        case 5: "NOT_FOUND"
        case 6: "ALREADY_EXISTS"
        case 7: "PERMISSION_DENIED"
        case 8: "RESOURCE_EXHAUSTED"
        case 9: "FAILED_PRECONDITION"
        case 10: "ABORTED"
        case 11: "OUT_OF_RANGE"
        case 12: "UNIMPLEMENTED"
        case 13: "INTERNAL"
        case 14: "UNAVAILABLE"
        case 15: "DATA_LOSS"
        case 16: "UNAUTHENTICATED"
        default: "CODE_\(rawValue)"
        }
    }

    public var description: String { name }
}
