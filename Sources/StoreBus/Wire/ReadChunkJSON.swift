import StoreSchema

/// Download.ReadChunk's answer in proto3 JSON, written and read directly: its `data` is up to a
/// megabyte of base64, which swift-protobuf encodes and decodes a byte at a time. The bytes are
/// those swift-protobuf would accept (field names, int64 as strings); a body of any other shape is
/// read by swift-protobuf.
public enum ReadChunkJSON {
    /// The answer's JSON, its `data` included.
    public static func encode(_ response: Storebus_Download_V1_ReadChunkResponse) -> [UInt8] {
        response.data.withUnsafeBytes { encode(response, bytes: $0) }
    }

    /// The answer's JSON: `data` and the other fields of `response` (whose own `data` is ignored).
    /// Strings are written as they are: the digests are hex and versions dot-separated digits.
    public static func encode(_ response: Storebus_Download_V1_ReadChunkResponse, data: [UInt8]) -> [UInt8] {
        data.withUnsafeBytes { encode(response, bytes: $0) }
    }

    private static func encode(_ response: Storebus_Download_V1_ReadChunkResponse, bytes data: UnsafeRawBufferPointer) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity((data.count + 2) / 3 * 4 + 256 + response.version.utf8.count)
        out += #"{"data":""#.utf8
        Base64.encode(data, into: &out)
        out += #"","chunkSha256":""#.utf8
        out += response.chunkSha256.utf8
        out += #"","offset":""#.utf8
        out += String(response.offset).utf8
        out += #"","version":""#.utf8
        out += response.version.utf8
        out += #"","contentLength":""#.utf8
        out += String(response.contentLength).utf8
        out += #"","sha256":""#.utf8
        out += response.sha256.utf8
        out += #"","eof":"#.utf8
        out += (response.eof ? "true" : "false").utf8
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The answer in `json` without its `data`, and the data: decoded here, the rest by
    /// swift-protobuf (all of it when `data` is not a plain base64 string).
    public static func decode(_ json: [UInt8]) throws -> (response: Storebus_Download_V1_ReadChunkResponse, data: [UInt8]) {
        func whole() throws -> (response: Storebus_Download_V1_ReadChunkResponse, data: [UInt8]) {
            var response = try JSONCodec.decode(Storebus_Download_V1_ReadChunkResponse.self, from: json)
            let data = [UInt8](response.data)
            response.data = .init()
            return (response, data)
        }
        guard let value = JSONScanner.member("data", of: json, in: 0..<json.count),
            value.count >= 2, json[value.lowerBound] == UInt8(ascii: "\""), json[value.upperBound - 1] == UInt8(ascii: "\"")
        else { return try whole() }
        let inner = (value.lowerBound + 1)..<(value.upperBound - 1)
        guard let data = json.withUnsafeBufferPointer({ Base64.decode(UnsafeBufferPointer(rebasing: $0[inner])) }) else { return try whole() }
        var rest = Array(json[..<value.lowerBound])
        rest += #""""#.utf8
        rest += json[value.upperBound...]
        return (try JSONCodec.decode(Storebus_Download_V1_ReadChunkResponse.self, from: rest), data)
    }
}
