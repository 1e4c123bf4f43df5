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
/// service's CPU per purchase. Written here, a string that needs no escape is copied whole; read
/// here, the payload's text is found in the record and decoded once.
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

    /// A page of notifications as swift-protobuf writes it, or nil when one of them is left to
    /// swift-protobuf (see ``append(_:to:)``).
    static func write(_ response: Storebus_Notifications_V1_ReadNotificationsResponse) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(response.notifications.reduce(64) { $0 + $1.signedPayload.utf8.count + 512 })
        out.append(UInt8(ascii: "{"))
        if !response.notifications.isEmpty {
            out += #""notifications":["#.utf8
            for (index, notification) in response.notifications.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                guard append(notification, to: &out) else { return nil }
            }
            out.append(UInt8(ascii: "]"))
        }
        if response.headPosition != 0 {
            if out.count > 1 { out.append(UInt8(ascii: ",")) }
            out += #""headPosition":"#.utf8
            JSONText.appendQuoted(response.headPosition, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The notification an event of the log holds, at its position in `app`'s log.
    ///
    /// Fast: the payload's text found in the stored record (``JSONScanner``) and decoded once.
    /// Plain (with fast paths off, or a record the scanner does not take): the record decoded as an
    /// event, its payload written out and decoded as a notification.
    static func read(_ stored: StoredEvent, app: String, fast: Bool = FastPaths.enabled) throws -> Storebus_Notifications_V1_Notification {
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
        return notification
    }
}
