import Foundation
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import SwiftProtobuf
import Testing

@testable import Notifications

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

    @Test("1,000 random notifications and 200 pages of them are swift-protobuf's bytes exactly; a signed date proto3 JSON cannot write is left to swift-protobuf")
    func writeMatchesSwiftProtobuf() throws {
        var random = SeededRandom(seed: 2_048)
        for _ in 0..<1_000 {
            let notification = Self.notification(&random)
            let plain: [UInt8] = try notification.jsonUTF8Bytes()
            #expect(NotificationJSON.write(notification) == plain, "\(String(decoding: plain, as: UTF8.self).prefix(120))")
        }
        for index in 0..<200 {
            var page = Storebus_Notifications_V1_ReadNotificationsResponse()
            page.notifications = (0..<(index % 7)).map { _ in Self.notification(&random) }
            page.headPosition = [0, 1, UInt64.random(in: 0...UInt64.max, using: &random), .max][index % 4]
            let plain: [UInt8] = try page.jsonUTF8Bytes()
            #expect(NotificationJSON.write(page) == plain, "\(String(decoding: plain, as: UTF8.self).prefix(120))")
        }
        var outOfRange = Storebus_Notifications_V1_Notification()
        outOfRange.signedDate = Google_Protobuf_Timestamp(seconds: 253_402_300_800, nanos: 0)
        #expect(NotificationJSON.write(outOfRange) == nil)
        #expect(NotificationJSON.write(Storebus_Notifications_V1_ReadNotificationsResponse.with { $0.notifications = [outOfRange] }) == nil)
        #expect(throws: (any Error).self) { try outOfRange.jsonString() }
    }

    @Test("a notification appended as written by hand or by swift-protobuf reads back the same both ways, at its position in its app's log")
    func storedReadsBothWays() async throws {
        let directory = try TemporaryDirectory(prefix: "ntjson")
        defer { directory.remove() }
        let database = try StoreDatabase(directory: directory.url, name: "notifications", durability: .normal, migrator: NotificationsSchema.migrator)
        var random = SeededRandom(seed: 77)
        let notifications = (0..<300).map { _ in
            var notification = Self.notification(&random)
            notification.position = 0
            notification.appBundleID = ""
            return notification
        }
        let app = "com.example.json"
        let stored = try await database.write { db in
            for (index, notification) in notifications.enumerated() {
                if index % 2 == 0, let json = NotificationJSON.write(notification) {
                    _ = try EventLog.appendJSON(db, key: app, type: Storebus_Notifications_V1_Notification.protoMessageName, payloadJSON: json)
                } else {
                    _ = try EventLog.append(db, key: app, payload: notification)
                }
            }
            return try EventLog.read(db, key: app, after: 0, limit: 1_000)
        }
        #expect(stored.count == notifications.count)
        for (event, notification) in zip(stored, notifications) {
            var expected = notification
            expected.position = event.keySeq
            expected.appBundleID = app
            #expect(try NotificationJSON.read(event, app: app, fast: true) == expected)
            #expect(try NotificationJSON.read(event, app: app, fast: false) == expected)
        }
        try database.close()
    }
}
