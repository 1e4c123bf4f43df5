import ExtrasBase64
import Foundation
import StoreSchema
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// Download.ReadChunk's answer in proto3 JSON, written and read directly: its `data` is up to a
/// megabyte of base64, which swift-protobuf encodes and decodes a byte at a time. The base64 is
/// swift-extras-base64's; the bytes are those swift-protobuf writes (field names, int64 as
/// strings), and a body of any other shape is read by swift-protobuf. With ``FastPaths`` off both
/// ways are swift-protobuf's alone (`ReadChunkJSONTests` holds the two to the same bytes).
public enum ReadChunkJSON {
    /// The answer's JSON, its `data` included: written here with `direct`, else by swift-protobuf.
    public static func encode(_ response: Storebus_Download_V1_ReadChunkResponse, direct: Bool = FastPaths.enabled) -> [UInt8] {
        guard direct else { return (try? JSONCodec.encode(response)) ?? [] }
        return response.data.withUnsafeBytes { encode(response, bytes: $0) }
    }

    /// The answer's JSON: `data` and the other fields of `response` (whose own `data` is ignored).
    public static func encode(_ response: Storebus_Download_V1_ReadChunkResponse, data: [UInt8], direct: Bool = FastPaths.enabled) -> [UInt8] {
        guard direct else {
            var whole = response
            whole.data = .init(data)
            return (try? JSONCodec.encode(whole)) ?? []
        }
        return data.withUnsafeBytes { encode(response, bytes: $0) }
    }

    /// Writes the members in swift-protobuf's order, omitting those at their default as it does.
    /// Strings are written as they are: the digests are hex and versions dot-separated digits
    /// (anything else goes through swift-protobuf, which escapes).
    private static func encode(_ response: Storebus_Download_V1_ReadChunkResponse, bytes data: UnsafeRawBufferPointer) -> [UInt8] {
        guard [response.chunkSha256, response.version, response.sha256, response.piecesSha256].allSatisfy(isPlain) else {
            var whole = response
            whole.data = .init(data)
            return (try? JSONCodec.encode(whole)) ?? []
        }
        let encodedLength = Base64.encodedLength(bytesCount: data.count)
        let capacity = encodedLength + 240 + response.chunkSha256.utf8.count + response.version.utf8.count + response.sha256.utf8.count + response.piecesSha256.utf8.count
        return [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            var at = 0
            func put(_ text: StaticString) {
                text.withUTF8Buffer { for byte in $0 { buffer[at] = byte; at += 1 } }
            }
            func put(_ text: String) {
                for byte in text.utf8 { buffer[at] = byte; at += 1 }
            }
            var first = true
            func member(_ name: StaticString) {
                if !first { buffer[at] = UInt8(ascii: ","); at += 1 }
                first = false
                put(name)
            }
            buffer[at] = UInt8(ascii: "{"); at += 1
            if data.count > 0 {
                member(#""data":""#)
                var output = UnsafeMutableBufferPointer(rebasing: buffer[at..<(at + encodedLength)]).mutableSpan
                at += Base64.encode(bytes: data.assumingMemoryBound(to: UInt8.self).span, into: &output)
                buffer[at] = UInt8(ascii: "\""); at += 1
            }
            if !response.chunkSha256.isEmpty { member(#""chunkSha256":""#); put(response.chunkSha256); put("\"") }
            if response.offset != 0 { member(#""offset":""#); put(String(response.offset)); put("\"") }
            if !response.version.isEmpty { member(#""version":""#); put(response.version); put("\"") }
            if response.contentLength != 0 { member(#""contentLength":""#); put(String(response.contentLength)); put("\"") }
            if !response.sha256.isEmpty { member(#""sha256":""#); put(response.sha256); put("\"") }
            if response.eof { member(#""eof":true"#) }
            if response.dataFrame { member(#""dataFrame":true"#) }
            if !response.piecesSha256.isEmpty { member(#""piecesSha256":""#); put(response.piecesSha256); put("\"") }
            if response.pieceBytes != 0 { member(#""pieceBytes":"#); put(String(response.pieceBytes)) }
            buffer[at] = UInt8(ascii: "}"); at += 1
            count = at
        }
    }

    /// Whether a string is written in JSON as it is: printable ASCII without `"` or `\`.
    private static func isPlain(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }

    /// The answer in `json` and its bytes: the attachment, as it was received, when the answer
    /// says `dataFrame` (an answer that says so without one is refused), else its `data`, taken
    /// out of the answer.
    public static func decode(_ json: [UInt8], attachment: HeldFrame?, direct: Bool = FastPaths.enabled) throws -> (response: Storebus_Download_V1_ReadChunkResponse, data: ChunkData) {
        let (response, data) = try decode(json, direct: direct)
        guard response.dataFrame else { return (response, .decoded(data)) }
        guard let attachment, data.isEmpty else {
            throw RPCError(.dataLoss, "a ReadChunk answer says its bytes follow as a frame, and \(attachment == nil ? "none does" : "it has data too")")
        }
        return (response, .frame(attachment))
    }

    /// A chunk's bytes: the frame beside the answer, read where libzmq received it, or the
    /// answer's base64 decoded.
    public enum ChunkData: Sendable {
        case frame(HeldFrame)
        case decoded([UInt8])

        /// The number of bytes.
        public var count: Int {
            switch self {
            case .frame(let frame): frame.count
            case .decoded(let bytes): bytes.count
            }
        }

        /// Calls `body` with the bytes, valid during the call.
        public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
            switch self {
            case .frame(let frame): try frame.withUnsafeBytes(body)
            case .decoded(let bytes): try bytes.withUnsafeBytes(body)
            }
        }

        /// A copy of the bytes.
        public var bytes: [UInt8] {
            switch self {
            case .frame(let frame): frame.bytes
            case .decoded(let bytes): bytes
            }
        }
    }

    /// The answer in `json` without its `data`, and the data: decoded here, the rest by
    /// swift-protobuf (all of it when `data` is not a plain, padded base64 string of the standard
    /// alphabet, or without `direct`).
    public static func decode(_ json: [UInt8], direct: Bool = FastPaths.enabled) throws -> (response: Storebus_Download_V1_ReadChunkResponse, data: [UInt8]) {
        func whole() throws -> (response: Storebus_Download_V1_ReadChunkResponse, data: [UInt8]) {
            var response = try JSONCodec.decodePlain(Storebus_Download_V1_ReadChunkResponse.self, from: json)
            let data = [UInt8](response.data)
            response.data = .init()
            return (response, data)
        }
        guard direct, let value = JSONScanner.member("data", of: json, in: 0..<json.count),
            value.count >= 2, json[value.lowerBound] == UInt8(ascii: "\""), json[value.upperBound - 1] == UInt8(ascii: "\"")
        else { return try whole() }
        let inner = (value.lowerBound + 1)..<(value.upperBound - 1)
        // Padding only at the end, as swift-protobuf takes it (swift-extras-base64 takes it inside
        // too): the first `=` (found with memchr) is one of the last two characters.
        let decoded = json[inner].withUnsafeBufferPointer { text -> [UInt8]? in
            guard text.count % 4 == 0, let base = text.baseAddress else { return text.isEmpty ? [] : nil }
            if let found = memchr(base, Int32(UInt8(ascii: "=")), text.count) {
                let at = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                guard at >= text.count - 2, text[(text.count - 1)] == UInt8(ascii: "=") else { return nil }
            }
            return try? Base64.decode(bytes: text.span)
        }
        guard let data = decoded else { return try whole() }
        var rest = Array(json[..<value.lowerBound])
        rest += #""""#.utf8
        rest += json[value.upperBound...]
        let response = try JSONCodec.decodePlain(Storebus_Download_V1_ReadChunkResponse.self, from: rest)
        // A second `data` member: swift-protobuf's reading of the whole decides.
        guard response.data.isEmpty else { return try whole() }
        return (response, data)
    }
}

extension Storebus_Download_V1_ReadChunkResponse: DirectJSONDecodable {
    /// The answer, its `data` decoded by ``ReadChunkJSON`` (swift-protobuf decodes base64 a byte at
    /// a time: a fifth of a 1 MiB reader's CPU through the generated client).
    public static func decodeDirectly(_ json: [UInt8]) throws(RPCError) -> Self? {
        do {
            var (response, data) = try ReadChunkJSON.decode(json, direct: true)
            response.data = Data(data)
            return response
        } catch let error as RPCError {
            throw error
        } catch {
            return nil
        }
    }
}
