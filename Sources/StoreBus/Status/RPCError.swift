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
        details.fieldViolations = [
            .with {
                $0.field = field; $0.description_p = description
            }
        ]
        let message = field.isEmpty ? description : "invalid field \"\(field)\": \(description)"
        return RPCError(.invalidArgument, message, details: details)
    }

    /// An error about a resource (NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, ...). The resource's
    /// name is the caller's input: it is kept only as ``echo(_:)`` gives it.
    public static func resource(_ code: StatusCode, type: String, name: String, _ message: String) -> RPCError {
        var details = Storebus_Common_V1_ErrorStatus()
        details.resource = .with {
            $0.resourceType = type; $0.resourceName = echo(name); $0.description_p = message
        }
        return RPCError(code, message, details: details)
    }

    /// Longest piece of a caller's input that an error repeats whole (``echo(_:)``), in UTF-8 bytes.
    public static let maxEchoBytes = 128

    /// A caller's input as an error may repeat it: whole up to ``maxEchoBytes``, else its first
    /// characters with its length, `abcd… (300168 bytes)`. Every message or detail that names what a
    /// caller sent goes through it, so that an error answer stays small whatever the request was.
    public static func echo(_ input: String) -> String {
        ErrorStatusBounds.shortened(input, whole: maxEchoBytes, start: maxEchoBytes / 2)
    }

    /// The error with a machine-readable reason attached.
    public func withReason(_ reason: String, domain: String) -> RPCError {
        var copy = self
        copy.details.info.reason = reason
        copy.details.info.domain = domain
        return copy
    }

    /// The wire form: the details with code and message filled in, every text in it held to
    /// ``ErrorStatusBounds`` (an error answer stays under 8 KiB of JSON, whatever it quotes).
    public var status: Storebus_Common_V1_ErrorStatus {
        var status = details
        status.code = code.rawValue
        status.message = message
        return ErrorStatusBounds.bounded(status)
    }

    /// Rebuilds an error from its wire form.
    public init(status: Storebus_Common_V1_ErrorStatus) {
        var details = status
        details.code = 0
        details.message = ""
        self.init(StatusCode(rawValue: status.code), status.message, details: details)
    }

    public var description: String { "\(code.name): \(message)" }

    /// UNAVAILABLE from an instance that does not own `shard`, which a call or a write belongs to (its
    /// lease lapsed or went to another instance; nothing was written): the caller asks the shard map
    /// again and retries at the owner. The shard is in the details (`info.metadata["shard"]`).
    public static func notOwner(shard: UInt32, _ message: String) -> RPCError {
        var error = RPCError(.unavailable, message).withReason(notOwnerReason, domain: "storebus.storage")
        error.details.info.metadata["shard"] = String(shard)
        return error
    }

    /// The reason of ``notOwner(shard:_:)``.
    public static let notOwnerReason = "NOT_OWNER"

    /// Whether this is ``notOwner(shard:_:)``'s error.
    public var isNotOwner: Bool { code == .unavailable && details.info.reason == Self.notOwnerReason }

    /// The shard a NOT_OWNER error names.
    public var notOwnerShard: UInt32? { isNotOwner ? details.info.metadata["shard"].flatMap { UInt32($0) } : nil }

    /// Whether this is a client's UNAVAILABLE for a call it never sent (no instance was connected):
    /// the call certainly did not run.
    public var isNotSent: Bool { code == .unavailable && details.info.reason == Self.notSentReason }

    /// The reason of a client's UNAVAILABLE for a call it never sent.
    public static let notSentReason = "NOT_SENT"
}

/// The limits of an error answer's texts, a net under ``RPCError/echo(_:)``: a handler's message may
/// quote a caller's input, and an upstream's error passes through a gateway, so every text is held
/// to a length at the last step, when the error becomes its wire form (``RPCError/status``). The
/// limits leave room for the long reports some errors are made to give (a catalog reload lists its
/// file's first problems in up to 64 KiB), yet keep any error body far below the 4 MiB message limit,
/// so that its code is never replaced by RESOURCE_EXHAUSTED. Errors that repeat a request's input do so
/// through ``RPCError/echo(_:)`` and stay under 8 KiB.
public enum ErrorStatusBounds {
    /// Largest JSON of an error body; a larger one (its texts full of characters that JSON escapes in
    /// six bytes) is sent as ``compact(_:)``.
    public static let maxBodyBytes = 1024 * 1024
    /// Bytes of `message`.
    public static let message = 64 * 1024
    /// Bytes of each other text (a field path, a description, a resource name, a reason).
    public static let text = 1024
    /// Field violations kept, the first ones; an error that may have more says how many in its message.
    public static let fieldViolations = 1000
    /// Entries of `info.metadata` kept.
    public static let metadataEntries = 16

    /// The first characters of `text` that fit in `maxBytes` of UTF-8.
    static func prefix(_ text: String, maxBytes: Int) -> String {
        var bytes = 0
        var end = text.startIndex
        for character in text {
            bytes += character.utf8.count
            guard bytes <= maxBytes else { break }
            end = text.index(after: end)
        }
        return String(text[..<end])
    }

    /// `text` whole when it has at most `whole` bytes, else its first characters (at most `start`
    /// bytes) and its length: `abcd… (300168 bytes)`.
    static func shortened(_ text: String, whole: Int, start: Int) -> String {
        guard text.utf8.count > whole else { return text }
        return prefix(text, maxBytes: start) + "… (\(text.utf8.count) bytes)"
    }

    /// `text` if it fits in `maxBytes`, else its start and its length, in `maxBytes` at most.
    static func clip(_ text: String, _ maxBytes: Int) -> String {
        let note = "… (\(text.utf8.count) bytes)".utf8.count
        return shortened(text, whole: maxBytes, start: max(0, maxBytes - note))
    }

    /// The code, the start of the message and the reason only: at most about 2 KiB of JSON.
    public static func compact(_ status: Storebus_Common_V1_ErrorStatus) -> Storebus_Common_V1_ErrorStatus {
        .with {
            $0.code = status.code
            $0.message = clip(status.message, 256)
            if status.hasInfo {
                $0.info.reason = clip(status.info.reason, 32)
                $0.info.domain = clip(status.info.domain, 32)
            }
        }
    }

    /// `status` with every text and list held to the limits above.
    public static func bounded(_ status: Storebus_Common_V1_ErrorStatus) -> Storebus_Common_V1_ErrorStatus {
        var status = status
        status.message = clip(status.message, message)
        if status.fieldViolations.count > fieldViolations {
            status.fieldViolations.removeLast(status.fieldViolations.count - fieldViolations)
        }
        for index in status.fieldViolations.indices {
            status.fieldViolations[index].field = clip(status.fieldViolations[index].field, text)
            status.fieldViolations[index].description_p = clip(status.fieldViolations[index].description_p, text)
        }
        if status.hasResource {
            status.resource.resourceType = clip(status.resource.resourceType, text)
            status.resource.resourceName = clip(status.resource.resourceName, text)
            status.resource.description_p = clip(status.resource.description_p, text)
        }
        if status.hasInfo {
            status.info.reason = clip(status.info.reason, text)
            status.info.domain = clip(status.info.domain, text)
            if !status.info.metadata.isEmpty {
                var kept: [String: String] = [:]
                for key in status.info.metadata.keys.sorted().prefix(metadataEntries) {
                    kept[clip(key, text)] = clip(status.info.metadata[key] ?? "", text)
                }
                status.info.metadata = kept
            }
        }
        return status
    }
}
