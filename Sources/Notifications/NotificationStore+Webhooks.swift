import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema
import SwiftProtobuf

/// A notification waiting for (another) attempt at its webhook.
struct Delivery: Sendable, Hashable {
    var app: String
    var position: UInt64
    var url: String
    /// Attempts made so far.
    var attempts: Int
}

// Webhook deliveries: queued with their notifications, attempted by ``WebhookSender``, each attempt
// recorded with Apple's sendAttemptResult.
extension NotificationStore {
    /// Apple's App Store Server Notifications V2 schedule: after a failed attempt, the next comes 1, 12,
    /// 24, 48 and 72 hours later; after the sixth, the notification is not sent again.
    static let retryHours: [Double] = [1, 12, 24, 48, 72]

    /// Deliveries due by `nowMS`, oldest first, at most `limit`, leaving out those in `busy`.
    func due(nowMS: Int64, limit: Int, excluding busy: Set<Delivery>) async throws -> [Delivery] {
        try await database.read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT app, position, url, attempts FROM nt_delivery WHERE state = 'PENDING' AND next_ms <= ? ORDER BY next_ms, app, position LIMIT ?"),
                arguments: [nowMS, limit + busy.count]
            ).map { Delivery(app: $0[0], position: UInt64($0[1] as Int64), url: $0[2], attempts: $0[3]) }
                .filter { !busy.contains($0) }.prefix(limit).map { $0 }
        }
    }

    /// When the next pending delivery is due, if any.
    func nextDue() async throws -> Int64? {
        try await database.read { db in try Int64.fetchOne(db, sql: "SELECT MIN(next_ms) FROM nt_delivery WHERE state = 'PENDING'") }
    }

    /// The signed payload of a delivery's notification.
    func signedPayload(app: String, position: UInt64) async throws -> String? {
        try await read(app: app, after: position - 1, limit: 1).notifications.first { $0.position == position }?.signedPayload
    }

    /// Records an attempt: a success ends the delivery; a failure schedules the next attempt on
    /// Apple's schedule (its hours times `scale`), or ends it FAILED after the last.
    func record(_ delivery: Delivery, result: String, httpStatus: Int, atMS: Int64, scale: Double) async throws {
        try await database.write { db in
            let attempt = delivery.attempts + 1
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO nt_attempt (app, position, attempt, at_ms, result, http_status) VALUES (?, ?, ?, ?, ?, ?)")
                .execute(arguments: [delivery.app, Int64(delivery.position), attempt, atMS, result, httpStatus])
            let state: String
            var next = atMS
            if result == "SUCCESS" {
                state = "SUCCEEDED"
            } else if attempt > Self.retryHours.count {
                state = "FAILED"
            } else {
                state = "PENDING"
                next = atMS + Int64((Self.retryHours[attempt - 1] * 3_600_000 * scale).rounded(.up))
            }
            try db.cachedStatement(sql: "UPDATE nt_delivery SET attempts = ?, state = ?, next_ms = ? WHERE app = ? AND position = ? AND state = 'PENDING'")
                .execute(arguments: [attempt, state, next, delivery.app, Int64(delivery.position)])
        }
    }

    /// Sets (or, with an empty URL, clears) an app's webhook; returns the one in force now.
    func setWebhook(app: String, url: String) async throws -> String {
        let configured = configuredWebhooks
        return try await database.write { db in
            if url.isEmpty {
                try db.execute(sql: "DELETE FROM nt_webhook WHERE app = ?", arguments: [app])
            } else {
                try db.execute(sql: "INSERT OR REPLACE INTO nt_webhook (app, url) VALUES (?, ?)", arguments: [app, url])
            }
            return try Self.webhook(db, app: app, configured: configured) ?? ""
        }
    }

    /// The app's notifications after `position` with their deliveries and attempts, at most `limit`;
    /// whether more follow.
    func history(app: String, after position: UInt64, limit: Int) async throws -> (items: [Storebus_Notifications_V1_NotificationHistoryItem], hasMore: Bool) {
        let page = try await read(app: app, after: position, limit: limit + 1)
        let notifications = Array(page.notifications.prefix(limit))
        let items = try await database.read { db in
            try notifications.map { notification in
                let delivery = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT url, state FROM nt_delivery WHERE app = ? AND position = ?"), arguments: [app, Int64(notification.position)])
                let attempts = try Row.fetchAll(
                    db.cachedStatement(sql: "SELECT at_ms, result, http_status FROM nt_attempt WHERE app = ? AND position = ? ORDER BY attempt"),
                    arguments: [app, Int64(notification.position)])
                return Storebus_Notifications_V1_NotificationHistoryItem.with {
                    $0.notification = notification
                    $0.webhookURL = delivery?[0] ?? ""
                    $0.deliveryState = delivery?[1] ?? "NONE"
                    $0.sendAttempts = attempts.map { row in
                        .with {
                            $0.attemptDate = Google_Protobuf_Timestamp(milliseconds: row[0])
                            $0.sendAttemptResult = row[1]
                            $0.httpStatusCode = row[2]
                        }
                    }
                }
            }
        }
        return (items, page.notifications.count > limit)
    }
}
