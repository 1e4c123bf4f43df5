import Foundation
import SwiftProtobuf

/// Encodes and decodes message bodies as proto3 canonical JSON, the only body format of StoreBus.
///
/// Decoding ignores unknown fields, so an older server accepts a newer client's request. When a
/// body does not decode, the error names the offending field: swift-protobuf reports only what went
/// wrong, so the codec then decodes the body's members one at a time to find where.
public enum JSONCodec {
    /// Decoding options: unknown fields ignored, nesting limited.
    public static let decodingOptions: JSONDecodingOptions = {
        var options = JSONDecodingOptions()
        options.ignoreUnknownFields = true
        options.messageDepthLimit = 64
        return options
    }()

    /// Encodes a message.
    public static func encode<M: SwiftProtobuf.Message>(_ message: M) throws(RPCError) -> [UInt8] {
        do {
            return try message.jsonUTF8Bytes()
        } catch {
            throw RPCError(.internalError, "could not encode \(M.protoMessageName) as JSON: \(error)")
        }
    }

    /// Decodes a message, or throws INVALID_ARGUMENT naming the offending field.
    ///
    /// A message type that reads its JSON faster itself (``DirectJSONDecodable``: ReadChunk's
    /// answer, the payment queue's log pages) is read that way, a fast path, to the same message.
    public static func decode<M: SwiftProtobuf.Message>(_ type: M.Type, from bytes: [UInt8]) throws(RPCError) -> M {
        if FastPaths.enabled, !bytes.isEmpty, let direct = M.self as? any DirectJSONDecodable.Type,
            let message = try direct.decodeDirectly(bytes) as? M
        {
            return message
        }
        return try decodePlain(type, from: bytes)
    }

    /// ``decode(_:from:)`` by swift-protobuf alone.
    public static func decodePlain<M: SwiftProtobuf.Message>(_ type: M.Type, from bytes: [UInt8]) throws(RPCError) -> M {
        if bytes.isEmpty { return M() }
        do {
            return try M(jsonUTF8Bytes: bytes, options: decodingOptions)
        } catch {
            throw diagnose(type, bytes: bytes, error: error)
        }
    }

    /// Largest body whose failure is traced to a field. The search decodes members one by one on the
    /// thread that received the request (a server's loop): for a large body of many members it would
    /// hold that loop for seconds, so larger bodies get swift-protobuf's reason alone.
    static let maxDiagnosedBytes = 64 * 1024

    /// Builds the INVALID_ARGUMENT error for a body that failed to decode.
    static func diagnose<M: SwiftProtobuf.Message>(_ type: M.Type, bytes: [UInt8], error: any Error) -> RPCError {
        let reason = describe(error)
        guard bytes.count <= maxDiagnosedBytes else {
            return RPCError.invalidArgument(field: "", "\(reason) in \(M.protoMessageName)")
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])) else {
            return RPCError.invalidArgument(field: "", "the body is not valid JSON")
        }
        guard let dictionary = object as? [String: Any] else {
            return RPCError.invalidArgument(field: "", "the body must be a JSON object (\(M.protoMessageName))")
        }
        let path = locate(M.self, members: dictionary, prefix: "") ?? ""
        let field = path.isEmpty ? "" : path
        return RPCError.invalidArgument(field: field, field.isEmpty ? "\(reason) in \(M.protoMessageName)" : reason)
    }

    /// Finds the path of the first member that does not decode on its own, descending into objects and
    /// arrays; nil when every member decodes alone (the fault is in their combination, such as two
    /// members of one oneof).
    private static func locate<M: SwiftProtobuf.Message>(_ type: M.Type, members: [String: Any], prefix: String) -> String? {
        for key in members.keys.sorted() {
            let value = members[key]!
            guard !decodes(M.self, [key: value]) else { continue }
            let path = prefix.isEmpty ? key : "\(prefix).\(key)"
            // Descend only into fields that hold a message (or a list): a scalar field given an object
            // is itself the offending field.
            if let nested = value as? [String: Any], decodes(M.self, [key: [String: Any]()]) {
                for inner in nested.keys.sorted() where !decodes(M.self, [key: [inner: nested[inner]!]]) {
                    let innerPath = "\(path).\(inner)"
                    if let deeper = nested[inner] as? [String: Any], decodes(M.self, [key: [inner: [String: Any]()]]) {
                        for leaf in deeper.keys.sorted() where !decodes(M.self, [key: [inner: [leaf: deeper[leaf]!]]]) {
                            return "\(innerPath).\(leaf)"
                        }
                    }
                    return innerPath
                }
            } else if let array = value as? [Any], decodes(M.self, [key: [Any]()]) {
                for (index, element) in array.enumerated() where !decodes(M.self, [key: [element]]) {
                    return "\(path)[\(index)]"
                }
            }
            return path
        }
        return nil
    }

    private static func decodes<M: SwiftProtobuf.Message>(_ type: M.Type, _ object: [String: Any]) -> Bool {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.fragmentsAllowed]) else { return false }
        return (try? M(jsonUTF8Data: data, options: decodingOptions)) != nil
    }

    /// A sentence for a swift-protobuf decoding error.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? JSONDecodingError else { return "the value could not be decoded" }
        switch error {
        case .malformedNumber: return "expected a number"
        case .numberRange: return "the number is out of range for the field's type"
        case .malformedBool: return "expected true or false"
        case .malformedString: return "expected a string"
        case .invalidUTF8: return "the text is not valid UTF-8"
        case .unrecognizedEnumValue: return "not one of the enum's values"
        case .illegalNull: return "null is not allowed here"
        case .malformedMap: return "expected an object"
        case .unquotedMapKey: return "map keys must be quoted"
        case .leadingZero: return "numbers may not have leading zeros"
        case .truncated: return "the JSON ends too early"
        case .malformedTimestamp: return "expected an RFC 3339 timestamp such as \"2026-01-31T12:00:00Z\""
        case .malformedDuration: return "expected a duration such as \"1.5s\""
        case .trailingGarbage: return "unexpected text after the JSON value"
        case .conflictingOneOf: return "more than one member of a oneof is set"
        case .messageDepthLimit: return "the JSON is nested too deeply"
        case .schemaMismatch: return "the value does not have the type the field expects"
        case .unknownField(let name): return "unknown field \"\(name)\""
        default: return "the value does not have the type the field expects"
        }
    }
}

/// A message whose JSON a hand-written reader takes faster than swift-protobuf, to the same message
/// (``JSONCodec/decode(_:from:)`` reads it so while ``FastPaths`` are on).
public protocol DirectJSONDecodable: SwiftProtobuf.Message {
    /// The message `json` holds; nil to leave it to swift-protobuf. Throws only what swift-protobuf
    /// throws for the same bytes.
    static func decodeDirectly(_ json: [UInt8]) throws(RPCError) -> Self?
}
