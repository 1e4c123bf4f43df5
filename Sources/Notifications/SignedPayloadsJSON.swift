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

    /// The answer read directly (the project's `JSONScanner` checks the JSON and finds the members),
    /// or nil when it is not of the simple shape.
    static func read(_ body: [UInt8]) -> Storebus_Receipt_V1_SignNotificationsResponse? {
        guard let members = JSONScanner.members(of: body, in: 0..<body.count), JSONScanner.distinctNames(members) else { return nil }
        var response = Storebus_Receipt_V1_SignNotificationsResponse()
        for member in members {
            switch member.name {
            case "signedPayloads":
                guard let elements = JSONScanner.elements(of: body, in: member.value) else { return nil }
                for element in elements {
                    guard let payload = JSONScanner.plainText(body, element) else { return nil }
                    response.signedPayloads.append(payload)
                }
            case "environment":
                guard let environment = JSONScanner.plainText(body, member.value) else { return nil }
                response.environment = environment
            default:
                return nil
            }
        }
        return response
    }
}
