import Foundation
import StoreBusTesting
import StoreSchema
import SwiftProtobuf
import Testing

@testable import Notifications
@testable import StoreBusStorage

/// The notification log's JSON written and read by hand (fast paths) against swift-protobuf, their
/// plain twin.
struct NotificationJSONTests {
    static let alphabet = Array("abZ09-_.+/=\"\\\n\t\u{0}\u{1f}\u{7f}\u{85}é日🎉 ".unicodeScalars)

    static func text(_ random: inout SeededRandom, longest: Int) -> String {
        var text = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...longest, using: &random) { text.append(alphabet.randomElement(using: &random)!) }
        return String(text)
    }

    /// A notification with each field set or left at its default, at random.
    static func notification(_ random: inout SeededRandom) -> Storebus_Notifications_V1_Notification {
        var notification = Storebus_Notifications_V1_Notification()
        func maybe(_ set: () -> Void) { if Bool.random(using: &random) { set() } }
        maybe { notification.position = [1, UInt64.random(in: 0...UInt64.max, using: &random), .max].randomElement(using: &random)! }
        maybe { notification.notificationUuid = UUID().uuidString.lowercased() }
        maybe { notification.notificationType = text(&random, longest: 20) }
        maybe { notification.subtype = text(&random, longest: 20) }
        maybe {
            // Mostly a JWS's alphabet, sometimes any text.
            if Bool.random(using: &random) {
                let bytes = (0..<Int.random(in: 0...6_000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                notification.signedPayload = Data(bytes).base64EncodedString() + "." + text(&random, longest: 8)
            } else {
                notification.signedPayload = text(&random, longest: 200)
            }
        }
        maybe {
            let nanos: Int32 = [0, 450_000_000, 123_456_000, 123_456_789, 999_999_999].randomElement(using: &random)!
            notification.signedDate = Google_Protobuf_Timestamp(seconds: Int64.random(in: -62_135_596_800...253_402_300_799, using: &random), nanos: nanos)
        }
        maybe { notification.accountID = text(&random, longest: 30) }
        maybe { notification.transactionID = text(&random, longest: 30) }
        maybe { notification.originalTransactionID = text(&random, longest: 30) }
        maybe { notification.appBundleID = text(&random, longest: 30) }
        return notification
    }

    @Test("1,000 random notifications are swift-protobuf's bytes exactly; a signed date proto3 JSON cannot write is left to swift-protobuf")
    func writeMatchesSwiftProtobuf() throws {
        var random = SeededRandom(seed: 2_048)
        for _ in 0..<1_000 {
            let notification = Self.notification(&random)
            let plain: [UInt8] = try notification.jsonUTF8Bytes()
            #expect(NotificationJSON.write(notification) == plain, "\(String(decoding: plain, as: UTF8.self).prefix(120))")
        }
        var outOfRange = Storebus_Notifications_V1_Notification()
        outOfRange.signedDate = Google_Protobuf_Timestamp(seconds: 253_402_300_800, nanos: 0)
        #expect(NotificationJSON.write(outOfRange) == nil)
        #expect(throws: (any Error).self) { try outOfRange.jsonString() }
    }

    /// 300 random notifications without position and app, as the log keeps them, appended to
    /// `app`'s log in `database`, every other one written by hand and the rest by swift-protobuf.
    static func stored(in database: StoreDatabase, app: String, seed: UInt64) async throws -> (notifications: [Storebus_Notifications_V1_Notification], events: [StoredEvent]) {
        var random = SeededRandom(seed: seed)
        let notifications = (0..<300).map { _ in
            var notification = Self.notification(&random)
            notification.position = 0
            notification.appBundleID = ""
            return notification
        }
        let events = try await database.write { db in
            for (index, notification) in notifications.enumerated() {
                if index % 2 == 0, let json = NotificationJSON.write(notification) {
                    _ = try EventLog.appendJSON(db, key: app, type: Storebus_Notifications_V1_Notification.protoMessageName, payloadJSON: json)
                } else {
                    _ = try EventLog.append(db, key: app, payload: notification)
                }
            }
            return try EventLog.read(db, key: app, after: 0, limit: 1_000)
        }
        return (notifications, events)
    }

    @Test("pages of stored notifications, spliced from their records, are the bytes swift-protobuf writes for the notifications read back, whichever wrote them")
    func pagesMatchSwiftProtobuf() async throws {
        let scratch = try ScratchNotifications(prefix: "ntpage")
        defer { scratch.directory.remove() }
        let database = scratch.database
        for app in ["com.example.page", "app \"quoted\" é\n", ""] {
            let events = try await Self.stored(in: database, app: app, seed: 4_096).events
            var random = SeededRandom(seed: 91)
            var spliced = 0
            for index in 0..<200 {
                let start = Int.random(in: 0...events.count, using: &random)
                let window = Array(events[start..<min(events.count, start + index % 9)])
                let head: UInt64 = [0, 1, 300, UInt64.random(in: 0...UInt64.max, using: &random), .max][index % 5]
                let plain = try NotificationJSON.page(window, app: app, head: head, fast: false, signedPayload: { $0 })
                let expected: [UInt8] = try Storebus_Notifications_V1_ReadNotificationsResponse.with {
                    $0.notifications = try window.map { try NotificationJSON.read($0, app: app, fast: false, signedPayload: { $0 }) }
                    $0.headPosition = head
                }.jsonUTF8Bytes()
                #expect(plain == expected)
                #expect(try NotificationJSON.page(window, app: app, head: head, fast: true, signedPayload: { $0 }) == expected, "\(String(decoding: expected, as: UTF8.self).prefix(160))")
            }
            for event in events {
                var out: [UInt8] = []
                if try NotificationJSON.splice(event, app: app, to: &out, signedPayload: { $0 }) { spliced += 1 }
            }
            // Both writers' records are spliced (a notification with no member set is too).
            #expect(spliced == events.count, "\(app): \(spliced) of \(events.count) spliced")
        }
        // A record the splice does not take (a member out of order, one it does not know, an empty
        // string) is read and written again: the same page.
        let unusual = [
            #"{"type":"storebus.notifications.v1.Notification","payload":{"notificationType":"A","notificationUuid":"u"}}"#,
            #"{"type":"storebus.notifications.v1.Notification","payload":{"notificationUuid":"u","subtype":""}}"#,
            #"{"type":"storebus.notifications.v1.Notification","payload":{"notificationUuid":"u","somethingNew":"x"}}"#
        ]
        for json in unusual {
            let event = StoredEvent(seq: 1, key: "a", keySeq: 1, json: json)
            var out: [UInt8] = []
            #expect(try !NotificationJSON.splice(event, app: "a", to: &out, signedPayload: { $0 }) && out.isEmpty, "\(json)")
            if let expected = try? NotificationJSON.page([event], app: "a", head: 1, fast: false, signedPayload: { $0 }) {
                #expect(try NotificationJSON.page([event], app: "a", head: 1, fast: true, signedPayload: { $0 }) == expected, "\(json)")
            }
        }
        try database.close()
    }

    @Test("a notification appended as written by hand or by swift-protobuf reads back the same both ways, at its position in its app's log")
    func storedReadsBothWays() async throws {
        let scratch = try ScratchNotifications(prefix: "ntjson")
        defer { scratch.directory.remove() }
        let database = scratch.database
        let app = "com.example.json"
        let (notifications, stored) = try await Self.stored(in: database, app: app, seed: 77)
        #expect(stored.count == notifications.count)
        for (event, notification) in zip(stored, notifications) {
            var expected = notification
            expected.position = event.keySeq
            expected.appBundleID = app
            #expect(try NotificationJSON.read(event, app: app, fast: true, signedPayload: { $0 }) == expected)
            #expect(try NotificationJSON.read(event, app: app, fast: false, signedPayload: { $0 }) == expected)
        }
        try database.close()
    }
}
