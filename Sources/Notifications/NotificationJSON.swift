import StoreBus
import StoreBusStorage
import StoreSchema
import SwiftProtobuf

/// A notification's proto3 JSON in the notification log, written and read by hand (fast paths,
/// behind `STOREBUS_FAST_PATHS`; docs/performance.md).
///
/// A notification is mostly its signedPayload, kilobytes of a JWS, and swift-protobuf escapes a
/// string scalar by scalar: encoding each notification when it was appended, and, when it was read,
/// decoding the stored record as an event (its payload a google.protobuf.Struct), writing that
/// payload back out and decoding it again as a notification, made up half of the notification
/// service's CPU per purchase. Written here, a string that needs no escape is copied whole; a page
/// read for a backend is spliced from the stored records, nothing decoded.
enum NotificationJSON {
    /// `notification` as swift-protobuf writes it (fields in number order, defaults left out),
    /// or nil when a field is one this writer leaves to swift-protobuf (a signed date proto3 JSON
    /// cannot write: swift-protobuf throws for it).
    static func write(_ notification: Storebus_Notifications_V1_Notification) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(notification.signedPayload.utf8.count + 512)
        return append(notification, to: &out) ? out : nil
    }

    /// Appends `notification`'s JSON to `out`; false when it is left to swift-protobuf (`out` then
    /// holds part of it).
    static func append(_ notification: Storebus_Notifications_V1_Notification, to out: inout [UInt8]) -> Bool {
        out.append(UInt8(ascii: "{"))
        var first = true
        func name(_ name: String) {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "\""))
            out += name.utf8
            out += "\":".utf8
        }
        func string(_ key: String, _ value: String) {
            guard !value.isEmpty else { return }
            name(key)
            JSONText.appendQuoted(value, to: &out)
        }
        if notification.position != 0 {
            name("position")
            JSONText.appendQuoted(notification.position, to: &out)
        }
        string("notificationUuid", notification.notificationUuid)
        string("notificationType", notification.notificationType)
        string("subtype", notification.subtype)
        string("signedPayload", notification.signedPayload)
        if notification.hasSignedDate {
            name("signedDate")
            guard JSONText.appendTimestamp(seconds: notification.signedDate.seconds, nanos: notification.signedDate.nanos, to: &out) else { return false }
        }
        string("accountId", notification.accountID)
        string("transactionId", notification.transactionID)
        string("originalTransactionId", notification.originalTransactionID)
        string("appBundleId", notification.appBundleID)
        out.append(UInt8(ascii: "}"))
        return true
    }

    /// A page of `app`'s notifications (`events`, read from its log) and its head as a
    /// ReadNotificationsResponse's JSON: the bytes swift-protobuf writes for the response holding
    /// each event's notification (``read(_:app:fast:)``).
    ///
    /// Fast: each stored notification's members copied from its record into the page (spliced
    /// between its position and its app, which the log keeps outside it), never decoded; a record
    /// the splice does not take is read and written again (``append(_:to:)``). Plain (fast paths
    /// off, or a notification the writer leaves to swift-protobuf): every notification decoded and
    /// the response written by swift-protobuf.
    ///
    /// `signedPayload` turns a stored signed payload into the one signed (``JWSHeaders``).
    static func page(
        _ events: [StoredEvent], app: String, head: UInt64, fast: Bool = FastPaths.enabled, signedPayload: (String) throws -> String
    ) throws -> [UInt8] {
        func plain() throws -> [UInt8] {
            try JSONCodec.encode(
                Storebus_Notifications_V1_ReadNotificationsResponse.with {
                    $0.notifications = try events.map { try read($0, app: app, fast: fast, signedPayload: signedPayload) }
                    $0.headPosition = head
                })
        }
        guard fast else { return try plain() }
        var out: [UInt8] = []
        out.reserveCapacity(events.reduce(64) { $0 + $1.json.utf8.count + 64 })
        out.append(UInt8(ascii: "{"))
        if !events.isEmpty {
            out += #""notifications":["#.utf8
            for (index, event) in events.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                guard try !splice(event, app: app, to: &out, signedPayload: signedPayload) else { continue }
                guard append(try read(event, app: app, signedPayload: signedPayload), to: &out) else { return try plain() }
            }
            out.append(UInt8(ascii: "]"))
        }
        if head != 0 {
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            out += #""headPosition":"#.utf8
            JSONText.appendQuoted(head, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The members a stored notification may hold, by name, with their field numbers: all but its
    /// position (1) and app (10), every one a string in proto3 JSON (the signed date a timestamp's).
    static let storedMembers: [String: Int] = [
        "notificationUuid": 2, "notificationType": 3, "subtype": 4, "signedPayload": 5, "signedDate": 6, "accountId": 7, "transactionId": 8,
        "originalTransactionId": 9
    ]

    /// Appends the notification `event` holds, at its position in `app`'s log, as swift-protobuf
    /// writes it, its members copied from the record; false, appending nothing, when the record's
    /// payload is not exactly what swift-protobuf would write again: members it knows, each once and
    /// in field order, every one a non-empty string (a default is left out when written). A signed
    /// payload kept in another form than the one signed (``CompactJWS``) is written as
    /// `signedPayload` gives it.
    static func splice(_ event: StoredEvent, app: String, to out: inout [UInt8], signedPayload: (String) throws -> String) throws -> Bool {
        let record = Array(event.json.utf8)
        guard let (_, payload) = JSONScanner.members(of: record, in: 0..<record.count, andOf: "payload"), let payload else { return false }
        var last = 1
        for member in payload {
            guard let number = storedMembers[member.name], number > last, member.value.count > 2, record[member.value.lowerBound] == UInt8(ascii: "\"")
            else { return false }
            last = number
        }
        // A stored signed payload starting with "~" (CompactJWS) is written whole again.
        var signed: String?
        if let member = payload.first(where: { $0.name == "signedPayload" }), record[member.value.lowerBound + 1] == CompactJWS.mark {
            guard let stored = JSONScanner.text(record, member.value) else { return false }
            signed = try signedPayload(stored)
        }
        out += #"{"position":"#.utf8
        JSONText.appendQuoted(event.keySeq, to: &out)
        record.withUnsafeBufferPointer { text in
            for member in payload {
                out += #",""#.utf8
                out += member.name.utf8
                out += #"":"#.utf8
                if member.name == "signedPayload", let signed {
                    JSONText.appendQuoted(signed, to: &out)
                } else {
                    out += UnsafeBufferPointer(rebasing: text[member.value])
                }
            }
        }
        if !app.isEmpty {
            out += #","appBundleId":"#.utf8
            JSONText.appendQuoted(app, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return true
    }

    /// The notification an event of the log holds, at its position in `app`'s log.
    ///
    /// Fast: the payload's text found in the stored record (``JSONScanner``) and decoded once.
    /// Plain (with fast paths off, or a record the scanner does not take): the record decoded as an
    /// event, its payload written out and decoded as a notification. Either way its signed payload
    /// is the one `signedPayload` makes of the stored one (``JWSHeaders``).
    static func read(
        _ stored: StoredEvent, app: String, fast: Bool = FastPaths.enabled, signedPayload: (String) throws -> String
    ) throws -> Storebus_Notifications_V1_Notification {
        var notification: Storebus_Notifications_V1_Notification
        let record = Array(stored.json.utf8)
        if fast, let payload = JSONScanner.member("payload", of: record, in: 0..<record.count), record[payload.lowerBound] == UInt8(ascii: "{") {
            notification = try Storebus_Notifications_V1_Notification(jsonUTF8Bytes: Array(record[payload]))
        } else {
            let event = try Storebus_Eventlog_V1_Event(jsonString: stored.json)
            notification = try Storebus_Notifications_V1_Notification(jsonString: try event.payload.jsonString())
        }
        notification.position = stored.keySeq
        notification.appBundleID = app
        if notification.signedPayload.utf8.first == CompactJWS.mark { notification.signedPayload = try signedPayload(notification.signedPayload) }
        return notification
    }
}
