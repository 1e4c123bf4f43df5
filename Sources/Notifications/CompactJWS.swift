import Crypto
import Foundation
import ReceiptFormat
import StoreBus
import StoreBusStorage
import Synchronization

/// A signed notification as the notification log keeps it: its header kept once for every
/// notification signed under it, and taken out of its payload wherever it recurs there.
///
/// A signedPayload is about 7.9 KB, and 6.5 KB of it is one header segment (the `x5c` chain),
/// written twice: as the JWS's own header and, base64url once more, as the header of the
/// signedTransactionInfo inside its payload (three times with a signedRenewalInfo). Kept whole,
/// every purchase grew the log by 8.3 KB, written to the WAL, copied again by the checkpoint, and
/// kept for the history's days.
///
/// The compact form of a JWS `H.P.S`, where P is the base64url of the bytes J (its payload's JSON),
/// is `~<digest>~<offsets>~<R>~<S>`: `digest` the SHA-256 (hex) of H, under which
/// ``NotificationStore`` keeps H in `nt_jws_header`; R the base64url of J with each occurrence of H
/// taken out, and `offsets` (decimal, comma-separated, ascending) where in it they were. Every byte
/// of it is ASCII that JSON writes as it is. Expanding puts H back at each offset and encodes J
/// again: base64url without padding is one text for given bytes, so a P this form takes (see
/// ``compact(_:header:)``) comes back byte for byte, and the signature with it.
///
/// A stored signedPayload starting with `~` is in this form, or is `~~` and then a text that began
/// with `~` (no JWS does: base64url has no `~`), so that any text a notification carried reads back.
enum CompactJWS {
    static let mark = UInt8(ascii: "~")

    /// A JWS header segment and the digest it is kept under.
    struct Header: Sendable, Equatable {
        let segment: String
        let bytes: [UInt8]
        let digest: String

        init(segment: UnsafeBufferPointer<UInt8>) {
            bytes = Array(segment)
            self.segment = String(decoding: segment, as: UTF8.self)
            let hex = Array("0123456789abcdef".utf8)
            digest = String(decoding: SHA256.hash(data: segment).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0x0F)]] }, as: UTF8.self)
        }

        init(segment: String) {
            var segment = segment
            self = segment.withUTF8 { Header(segment: $0) }
        }

        /// Whether `segment` is this header's.
        func isSegment(_ segment: UnsafeBufferPointer<UInt8>) -> Bool {
            segment.count == bytes.count && (bytes.isEmpty || bytes.withUnsafeBufferPointer { memcmp($0.baseAddress!, segment.baseAddress!, segment.count) == 0 })
        }
    }

    /// A compact JWS in `bytes`: three segments, the header and the payload not empty.
    struct Segments {
        let header: UnsafeBufferPointer<UInt8>
        let payload: UnsafeBufferPointer<UInt8>
        let signature: UnsafeBufferPointer<UInt8>

        init?(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard let (first, second) = JWS.dots(bytes: bytes), first > 0, second > first + 1 else { return nil }
            header = UnsafeBufferPointer(rebasing: bytes[..<first])
            payload = UnsafeBufferPointer(rebasing: bytes[(first + 1)..<second])
            signature = UnsafeBufferPointer(rebasing: bytes[(second + 1)...])
        }
    }

    /// `jws` in compact form under `header` (its header segment's); nil when it is not a JWS this
    /// form takes: a payload not the one base64url text of its bytes, a `~` in its signature.
    static func compact(_ jws: Segments, header: Header) -> String? {
        guard !header.bytes.isEmpty, header.isSegment(jws.header), !jws.signature.contains(mark), isCanonical(jws.payload),
            let json = Base64URL.decode(bytes: jws.payload)
        else { return nil }
        // The payload with the header taken out, and where.
        var rest: [UInt8] = []
        rest.reserveCapacity(json.count)
        var offsets: [Int] = []
        json.withUnsafeBufferPointer { json in
            header.bytes.withUnsafeBufferPointer { needle in
                // Each place the header's first byte is, by memchr, checked whole by memcmp.
                var (index, from) = (0, 0)
                while json.count - index >= needle.count,
                    let found = memchr(json.baseAddress! + index, Int32(needle[0]), json.count - index - needle.count + 1)
                {
                    let at = json.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self))
                    guard memcmp(found, needle.baseAddress!, needle.count) == 0 else {
                        index = at + 1
                        continue
                    }
                    rest += UnsafeBufferPointer(rebasing: json[from..<at])
                    offsets.append(rest.count)
                    index = at + needle.count
                    from = index
                }
                rest += UnsafeBufferPointer(rebasing: json[from...])
            }
        }
        var out = "~"
        out.reserveCapacity(rest.count * 4 / 3 + jws.signature.count + 96)
        out += header.digest
        out += "~"
        for (index, offset) in offsets.enumerated() {
            if index > 0 { out += "," }
            out += String(offset)
        }
        out += "~"
        out += Base64URL.encode(rest)
        out += "~"
        out += String(decoding: jws.signature, as: UTF8.self)
        return out
    }

    /// `text` as the log keeps it when no compact form is made: unchanged, but `~~` before a text
    /// that begins with `~`.
    static func escaped(_ text: String) -> String {
        text.utf8.first == mark ? "~~" + text : text
    }

    /// What kind of stored signedPayload `stored` is.
    enum Stored: Equatable {
        /// Kept as it was.
        case plain(Substring)
        /// Compact, its header kept under this digest.
        case compact(digest: Substring)
    }

    static func kind(_ stored: String) -> Stored {
        let utf8 = stored.utf8
        guard utf8.first == mark else { return .plain(Substring(stored)) }
        let afterMark = utf8.index(after: utf8.startIndex)
        if afterMark < utf8.endIndex, utf8[afterMark] == mark { return .plain(Substring(utf8[utf8.index(after: afterMark)...])) }
        let end = utf8[afterMark...].firstIndex(of: mark) ?? utf8.endIndex
        return .compact(digest: Substring(utf8[afterMark..<end]))
    }

    /// The signedPayload kept as `stored`, in compact form under `header` (the segment its digest
    /// names); nil when it is not that form.
    static func expand(_ stored: String, header: Header) -> String? {
        var stored = stored
        return stored.withUTF8 { bytes -> String? in
            guard bytes.first == mark, let digestEnd = bytes[1...].firstIndex(of: mark),
                let offsetsEnd = bytes[(digestEnd + 1)...].firstIndex(of: mark),
                let signatureStart = bytes.lastIndex(of: mark), signatureStart > offsetsEnd
            else { return nil }
            var offsets: [Int] = []
            if offsetsEnd > digestEnd + 1 {
                for field in bytes[(digestEnd + 1)..<offsetsEnd].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                    guard !field.isEmpty, field.count <= 9, field.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return nil }
                    offsets.append(field.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) })
                }
            }
            guard let rest = Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: bytes[(offsetsEnd + 1)..<signatureStart])) else { return nil }
            var json: [UInt8] = []
            json.reserveCapacity(rest.count + offsets.count * header.bytes.count)
            var from = 0
            for offset in offsets {
                guard offset >= from, offset <= rest.count else { return nil }
                json += rest[from..<offset]
                json += header.bytes
                from = offset
            }
            json += rest[from...]
            let payload = Base64URL.encode(json)
            var out: [UInt8] = []
            out.reserveCapacity(header.bytes.count + payload.utf8.count + bytes.count - signatureStart + 1)
            out += header.bytes
            out.append(UInt8(ascii: "."))
            out += payload.utf8
            out.append(UInt8(ascii: "."))
            out += UnsafeBufferPointer(rebasing: bytes[(signatureStart + 1)...])
            return String(decoding: out, as: UTF8.self)
        }
    }

    /// Whether `text` is unpadded base64url that the encoder writes again as it is: its length not
    /// one more than a multiple of four, and the bits its last character holds beyond the bytes
    /// zero. (The decoder refuses any other character.)
    static func isCanonical(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let last = text.last, let value = value(ofBase64URL: last) else { return text.isEmpty }
        switch text.count % 4 {
        case 1: return false
        case 2: return value & 0x0F == 0
        case 3: return value & 0x03 == 0
        default: return true
        }
    }

    /// The six bits a base64url character stands for; nil for any other byte.
    static func value(ofBase64URL byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}

/// The header segments the notification log keeps once (``CompactJWS``), by digest, in
/// `nt_jws_header`: written with the notifications signed under them, in the same transaction.
final class JWSHeaders: Sendable {
    /// Segments read back, by digest (a digest names one segment, and a row is never changed).
    private let known = Mutex<[String: CompactJWS.Header]>([:])
    /// The header of the last notification kept: a deployment signs under one key for months, so
    /// its digest is computed once, not for every notification.
    private let last = Mutex<CompactJWS.Header?>(nil)

    static let insertSQL: CachedSQL = "INSERT INTO nt_jws_header (digest, segment) VALUES (?, ?) ON CONFLICT (digest) DO NOTHING"
    static let segmentSQL: CachedSQL = "SELECT segment FROM nt_jws_header WHERE digest = ?"

    /// `signedPayload` as the log keeps it, in the caller's write transaction: in compact form with
    /// its header kept once when `compact` (the fast path) and it is a JWS that form takes; as it is
    /// (``CompactJWS/escaped(_:)``) otherwise.
    func stored(_ db: any SQLConnection, _ signedPayload: String, compact: Bool) throws -> String {
        guard compact else { return CompactJWS.escaped(signedPayload) }
        var jws = signedPayload
        let made = jws.withUTF8 { bytes -> (String, CompactJWS.Header)? in
            guard let segments = CompactJWS.Segments(bytes) else { return nil }
            let header = last.withLock { cached in
                if let cached, cached.isSegment(segments.header) { return cached }
                let header = CompactJWS.Header(segment: segments.header)
                cached = header
                return header
            }
            return CompactJWS.compact(segments, header: header).map { ($0, header) }
        }
        guard let (compacted, header) = made else { return CompactJWS.escaped(signedPayload) }
        try db.execute(cached: Self.insertSQL, arguments: [header.digest, header.segment])
        return compacted
    }

    /// The signedPayload the log keeps as `stored`, whole again. DATA_LOSS when it is compact and
    /// its header is not kept, or it does not expand.
    func signedPayload(_ db: any SQLConnection, _ stored: String) throws -> String {
        switch CompactJWS.kind(stored) {
        case .plain(let text): return String(text)
        case .compact(let digest):
            let digest = String(digest)
            var header = known.withLock { $0[digest] }
            if header == nil, let segment = try db.value(String.self, cached: Self.segmentSQL, arguments: [digest]) {
                let read = CompactJWS.Header(segment: segment)
                guard read.digest == digest else { throw RPCError(.dataLoss, "the JWS header kept under \(digest) has another digest") }
                known.withLock { $0[digest] = read }
                header = read
            }
            guard let header else { throw RPCError(.dataLoss, "a stored notification names the JWS header \(digest), which the notification log does not keep") }
            guard let jws = CompactJWS.expand(stored, header: header) else {
                throw RPCError(.dataLoss, "a stored notification's signed payload, kept under the JWS header \(digest), does not expand")
            }
            return jws
        }
    }
}
