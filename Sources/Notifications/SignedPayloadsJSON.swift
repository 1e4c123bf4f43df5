import StoreBus
import StoreSchema

/// SignNotifications' answer as the notification service reads it. Each signed payload is a JWS of
/// kilobytes (its header carries the certificate chain), and swift-protobuf reads a string a
/// character at a time and then copies it (about a seventh of the notification service's CPU per
/// purchase). The answers the receipt service writes (`SignNotificationsJSON`) hold only
/// `signedPayloads` and `environment`, strings without escapes (a JWS is base64url and dots): read
/// here with one scan each and one copy. Anything else (an escape, another member, a number, bytes
/// that are not UTF-8) is left to swift-protobuf, which the fast paths off use always;
/// `SignedPayloadsJSONTests` holds the two to the same messages.
enum SignedPayloadsJSON {
    static func decode(_ body: [UInt8], fast: Bool = FastPaths.enabled) throws(RPCError) -> Storebus_Receipt_V1_SignNotificationsResponse {
        if fast, let read = read(body) { return read }
        return try JSONCodec.decode(Storebus_Receipt_V1_SignNotificationsResponse.self, from: body)
    }

    /// The answer read directly, or nil when it is not of the simple shape.
    static func read(_ body: [UInt8]) -> Storebus_Receipt_V1_SignNotificationsResponse? {
        body.withUnsafeBufferPointer { bytes -> Storebus_Receipt_V1_SignNotificationsResponse? in
            var reader = Reader(bytes: bytes)
            var response = Storebus_Receipt_V1_SignNotificationsResponse()
            var seen = Set<String>()
            guard reader.take(UInt8(ascii: "{")) else { return nil }
            if reader.take(UInt8(ascii: "}")) { return reader.atEnd ? response : nil }
            repeat {
                guard let key = reader.string(), seen.insert(key).inserted, reader.take(UInt8(ascii: ":")) else { return nil }
                switch key {
                case "signedPayloads":
                    guard reader.take(UInt8(ascii: "[")) else { return nil }
                    if !reader.take(UInt8(ascii: "]")) {
                        repeat {
                            guard let payload = reader.string() else { return nil }
                            response.signedPayloads.append(payload)
                        } while reader.take(UInt8(ascii: ","))
                        guard reader.take(UInt8(ascii: "]")) else { return nil }
                    }
                case "environment":
                    guard let environment = reader.string() else { return nil }
                    response.environment = environment
                default:
                    return nil
                }
            } while reader.take(UInt8(ascii: ","))
            guard reader.take(UInt8(ascii: "}")), reader.atEnd else { return nil }
            return response
        }
    }

    /// A cursor over the body's bytes.
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        var atEnd: Bool {
            mutating get {
                skipSpace()
                return index == bytes.count
            }
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        /// Takes `byte` (after any white space) when it comes next.
        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// A string without escapes or control characters, valid UTF-8; nil for anything else.
        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = String(validating: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
                index += 1
            }
            return nil
        }
    }
}
