import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// The routing part of a message: every frame before the empty delimiter.
///
/// A ROUTER prepends the sender's routing id to each message it receives; a forwarder keeps those
/// frames and sends them back in front of the answer, so answers find their way home without anyone
/// decoding the body.
public struct Envelope: Sendable, Hashable {
    /// The routing frames, outermost first.
    public var routing: [[UInt8]]
    /// An envelope of routing frames.
    public init(routing: [[UInt8]]) { self.routing = routing }
}

/// A request as it arrives at a server, parsed from its frames but with the body still encoded.
public struct InboundRequest: Sendable {
    /// Where the answer goes.
    public var envelope: Envelope
    /// The caller's request id, echoed in the answer.
    public var requestID: [UInt8]
    /// The gRPC method path, `/package.Service/Method`.
    public var method: String
    /// The caller's timeout in milliseconds, if it set one.
    public var timeoutMilliseconds: UInt64?
    /// The call's metadata.
    public var metadata: Metadata
    /// The proto3 JSON body.
    public var body: [UInt8]
}

/// What a server can receive.
public enum InboundMessage: Sendable {
    /// A call to run.
    case request(InboundRequest)
    /// The caller gave up on a call; drop its work.
    case cancel(envelope: Envelope, requestID: [UInt8])
    /// Frames that are not a StoreBus request. `envelope` is what could be recovered for an answer
    /// (at least the ROUTER's routing id), `requestID` when it could be read. `answerable` is false
    /// for a malformed cancel: cancels are never answered, since an answer carrying the id could be
    /// taken for the result of the call being cancelled.
    case malformed(envelope: Envelope, requestID: [UInt8], reason: String, answerable: Bool = true)
}

/// A response as it arrives at a caller.
public struct InboundResponse: Sendable {
    /// Routing frames in front of the delimiter (empty for a direct DEALER connection).
    public var envelope: Envelope
    /// The request id it answers.
    public var requestID: [UInt8]
    /// The status code.
    public var code: StatusCode
    /// On OK the response message; otherwise a `storebus.common.v1.ErrorStatus`, both proto3 JSON.
    public var body: [UInt8]
    /// The frame after the body, when the answer has one: bytes a method's contract says its
    /// response carries beside the JSON when the request asked (Download.ReadChunk's `data_frame`),
    /// held as libzmq received them (a gateway sends them on without a copy).
    public var attachment: HeldFrame?
}

/// Builds and parses StoreBus frames.
public enum Frames {
    /// The lines of `bytes`, split at each line feed, empty ones included (what
    /// `split(separator: 0x0A, omittingEmptySubsequences: false)` gives), in an array allocated at
    /// its size once, the line feeds found with memchr: grown line by line, the array was
    /// reallocated three or four times for each header (about 2% of the gateway's instructions per
    /// purchase flow).
    package static func lines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return [bytes[...]] }
            // The next line feed at or after `index`.
            func lineFeed(from index: Int) -> Int? {
                guard index < buffer.count, let found = memchr(base + index, 0x0A, buffer.count - index) else { return nil }
                return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            }
            var count = 1
            var index = 0
            while let end = lineFeed(from: index) {
                count += 1
                index = end + 1
            }
            var lines: [ArraySlice<UInt8>] = []
            lines.reserveCapacity(count)
            var start = 0
            while let end = lineFeed(from: start) {
                lines.append(bytes[start..<end])
                start = end + 1
            }
            lines.append(bytes[start...])
            return lines
        }
    }

    /// Parses a message received on a ROUTER (frame 0 is the peer's routing id).
    public static func parseAtServer(_ frames: [[UInt8]]) -> InboundMessage {
        // The routing id that the ROUTER added is always there; whatever else is wrong, it lets us answer.
        guard let delimiter = frames.firstIndex(where: { $0.isEmpty }) else {
            return .malformed(envelope: Envelope(routing: Array(frames.prefix(1))), requestID: [], reason: "no empty delimiter frame between the routing frames and the header")
        }
        let envelope = Envelope(routing: Array(frames[..<delimiter]))
        guard !envelope.routing.isEmpty, envelope.routing.count <= WireProtocol.maxRoutingFrames else {
            return .malformed(envelope: Envelope(routing: Array(frames.prefix(1))), requestID: [], reason: "too many routing frames")
        }
        guard delimiter + 1 < frames.count else {
            return .malformed(envelope: envelope, requestID: [], reason: "missing header frame after the delimiter")
        }
        let header = frames[delimiter + 1]
        guard header.count <= WireProtocol.maxHeaderBytes else {
            return .malformed(envelope: envelope, requestID: [], reason: "the header frame is larger than \(WireProtocol.maxHeaderBytes) bytes")
        }
        let lines = lines(header)
        let tag = lines[0]
        let requestID = lines.count > 1 && isValidRequestID(lines[1]) ? Array(lines[1]) : []
        let trailing = frames.count - delimiter - 2
        if tag.elementsEqual(WireProtocol.cancelTag) {
            guard lines.count == 2, !requestID.isEmpty, trailing == 0 else {
                return .malformed(envelope: envelope, requestID: requestID, reason: "a cancel is one header frame: SB1C and the request id", answerable: false)
            }
            return .cancel(envelope: envelope, requestID: requestID)
        }
        guard tag.elementsEqual(WireProtocol.requestTag) else {
            return .malformed(envelope: envelope, requestID: [], reason: "unknown header tag (expected SB1Q or SB1C)")
        }
        guard lines.count >= 4 else {
            return .malformed(envelope: envelope, requestID: requestID, reason: "a request header has at least 4 lines: SB1Q, request id, timeout, method")
        }
        guard !requestID.isEmpty else {
            return .malformed(envelope: envelope, requestID: [], reason: "the request id must be 1 to \(WireProtocol.maxRequestIDBytes) printable ASCII characters")
        }
        guard trailing == 1 else {
            return .malformed(envelope: envelope, requestID: requestID, reason: "a request is a header frame and one body frame; got \(trailing) frames after the header")
        }
        var timeout: UInt64?
        if !lines[2].isEmpty {
            guard let value = parseDecimal(lines[2]) else {
                return .malformed(envelope: envelope, requestID: requestID, reason: "the timeout line must be empty or decimal milliseconds")
            }
            timeout = min(value, WireProtocol.maxTimeoutMilliseconds)
        }
        let methodBytes = lines[3]
        guard !methodBytes.isEmpty, methodBytes.count <= WireProtocol.maxMethodBytes, methodBytes.first == 0x2F,
            let method = String(validating: methodBytes, as: UTF8.self)
        else {
            return .malformed(envelope: envelope, requestID: requestID, reason: "the method must be a path like /package.Service/Method")
        }
        guard let metadata = Metadata(lines: lines.dropFirst(4)) else {
            return .malformed(envelope: envelope, requestID: requestID, reason: "metadata lines must be \"key: value\" with lower-case keys")
        }
        return .request(
            InboundRequest(
                envelope: envelope, requestID: requestID, method: method,
                timeoutMilliseconds: timeout, metadata: metadata, body: frames[delimiter + 2]
            ))
    }

    /// Builds the frames of a response; `attachment`, when given, is a frame after the body.
    public static func response(envelope: Envelope, requestID: [UInt8], code: StatusCode, body: [UInt8], attachment: [UInt8]? = nil) -> [[UInt8]] {
        var header = WireProtocol.responseTag
        header.reserveCapacity(8 + requestID.count)
        header.append(0x0A)
        header.append(contentsOf: requestID)
        header.append(0x0A)
        header.append(contentsOf: decimal(UInt64(bitPattern: Int64(code.rawValue))))
        var frames = envelope.routing
        frames.reserveCapacity(frames.count + 4)
        frames.append([])
        frames.append(header)
        frames.append(body)
        if let attachment { frames.append(attachment) }
        return frames
    }

    /// Builds the frames of a request as a DEALER sends it (no routing frames).
    public static func request(requestID: [UInt8], method: String, timeoutMilliseconds: UInt64?, metadata: Metadata, body: [UInt8]) -> [[UInt8]] {
        var header = WireProtocol.requestTag
        header.reserveCapacity(16 + requestID.count + method.utf8.count)
        header.append(0x0A)
        header.append(contentsOf: requestID)
        header.append(0x0A)
        if let timeoutMilliseconds { header.append(contentsOf: decimal(timeoutMilliseconds)) }
        header.append(0x0A)
        header.append(contentsOf: method.utf8)
        if !metadata.isEmpty {
            header.append(0x0A)
            header.append(contentsOf: metadata.encoded)
        }
        return [[], header, body]
    }

    /// Builds the frames of a cancellation as a DEALER sends it.
    public static func cancel(requestID: [UInt8]) -> [[UInt8]] {
        [[], WireProtocol.cancelTag + [0x0A] + requestID]
    }

    /// Parses a message received on a DEALER: `frames`, then `attachment` when it was received held
    /// (``Socket/receiveResponse(dontWait:)``); else a frame after the body is the attachment.
    public static func parseAtClient(_ frames: [[UInt8]], attachment held: HeldFrame? = nil) -> InboundResponse? {
        guard let delimiter = frames.firstIndex(where: { $0.isEmpty }),
            frames.count == delimiter + 3 || (held == nil && frames.count == delimiter + 4)
        else { return nil }
        // Three lines: tag, request id, status code (found without splitting: this runs per answer).
        let header = frames[delimiter + 1]
        guard let firstBreak = header.firstIndex(of: 0x0A),
            let secondBreak = header[(firstBreak + 1)...].firstIndex(of: 0x0A),
            header[..<firstBreak].elementsEqual(WireProtocol.responseTag)
        else { return nil }
        let codeBytes = header[(secondBreak + 1)...]
        guard !codeBytes.contains(0x0A), let code = parseDecimal(codeBytes), code <= UInt64(Int32.max) else { return nil }
        return InboundResponse(
            envelope: Envelope(routing: Array(frames[..<delimiter])), requestID: Array(header[(firstBreak + 1)..<secondBreak]),
            code: StatusCode(rawValue: Int32(code)), body: frames[delimiter + 2],
            attachment: held ?? (frames.count == delimiter + 4 ? HeldFrame(frames[delimiter + 3]) : nil)
        )
    }

    /// Request ids are 1 to 64 printable ASCII characters without spaces.
    static func isValidRequestID(_ id: some Collection<UInt8>) -> Bool {
        !id.isEmpty && id.count <= WireProtocol.maxRequestIDBytes && id.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// ASCII decimal digits of a number.
    public static func decimal(_ value: UInt64) -> [UInt8] {
        if value == 0 { return [0x30] }
        var digits: [UInt8] = []
        digits.reserveCapacity(20)
        var rest = value
        while rest > 0 {
            digits.append(0x30 + UInt8(rest % 10))
            rest /= 10
        }
        digits.reverse()
        return digits
    }

    /// Parses 1 to 19 ASCII decimal digits. Inlinable: the doorbells and answers of every process
    /// read their numbers with it, and a generic call across modules is not specialized.
    @inlinable
    public static func parseDecimal(_ bytes: some Collection<UInt8>) -> UInt64? {
        guard !bytes.isEmpty, bytes.count <= 19 else { return nil }
        var value: UInt64 = 0
        for byte in bytes {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + UInt64(byte - 0x30)
        }
        return value
    }
}
