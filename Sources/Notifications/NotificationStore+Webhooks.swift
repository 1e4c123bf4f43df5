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
    /// When its notification was appended (milliseconds since 1970).
    var appendedMS: Int64
}

// Webhook deliveries: queued with their notifications, attempted by ``WebhookSender``, each attempt
// recorded with Apple's sendAttemptResult.
extension NotificationStore {
    /// Apple's App Store Server Notifications V2 schedule: after a failed attempt, the next comes 1, 12,
    /// 24, 48 and 72 hours later; after the sixth, the notification is not sent again.
    static let retryHours: [Double] = [1, 12, 24, 48, 72]

    /// Every URL deliveries were queued for.
    func deliveryURLs() async throws -> [String] {
        try await database.read { db in try db.values(String.self, cached: "SELECT url FROM nt_url ORDER BY url") }
    }

    /// Deliveries to `url` due by `nowMS`, oldest first, at most `limit`, leaving out those in
    /// `busy` (through the URL's own index: another URL's backlog is never read).
    func due(url: String, nowMS: Int64, limit: Int, excluding busy: Set<Delivery>) async throws -> [Delivery] {
        try await database.read { db in
            try db.rows(
                cached: """
                    SELECT d.app, d.position, d.url, d.attempts, e.time_ms FROM nt_delivery d
                    JOIN storebus_event e ON e.stream_key = d.app AND e.key_seq = d.position
                    WHERE d.url = ? AND d.state = 'PENDING' AND d.next_ms <= ? ORDER BY d.next_ms, d.app, d.position LIMIT ?
                    """,
                arguments: [url, nowMS, limit + busy.count]
            )
            .map { Delivery(app: $0[0], position: UInt64($0[1] as Int64), url: $0[2], attempts: $0[3], appendedMS: $0[4]) }
            .filter { !busy.contains($0) }.prefix(limit).map { $0 }
        }
    }

    /// Deliveries waiting for an attempt.
    func pendingCount() async throws -> Int {
        try await database.read { db in try db.value(Int.self, cached: CachedSQL("SELECT COUNT(*) FROM nt_delivery WHERE state = 'PENDING'")) ?? 0 }
    }

    /// When the next pending delivery is due, if any.
    func nextDue() async throws -> Int64? {
        try await database.read { db in try db.value(Int64.self, cached: CachedSQL("SELECT MIN(next_ms) FROM nt_delivery WHERE state = 'PENDING'")) }
    }

    /// The signed payload of a delivery's notification.
    func signedPayload(app: String, position: UInt64) async throws -> String? {
        try await read(app: app, after: position - 1, limit: 1).notifications.first { $0.position == position }?.signedPayload
    }

    /// Records an attempt: a success ends the delivery; a failure schedules the next attempt on
    /// Apple's schedule (its hours times `scale`), or ends it FAILED after the last.
    func record(_ delivery: Delivery, result: String, httpStatus: Int, atMS: Int64, scale: Double) async throws {
        try await attempts.write { db, _ in
            let attempt = delivery.attempts + 1
            try db.execute(
                cached: """
                    INSERT INTO nt_attempt (app, position, attempt, at_ms, result, http_status) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT (app, position, attempt) DO UPDATE SET at_ms = excluded.at_ms, result = excluded.result, http_status = excluded.http_status
                    """,
                arguments: [delivery.app, Int64(delivery.position), attempt, atMS, result, httpStatus])
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
            try db.execute(
                cached: "UPDATE nt_delivery SET attempts = ?, state = ?, next_ms = ? WHERE app = ? AND position = ? AND state = 'PENDING'",
                arguments: [attempt, state, next, delivery.app, Int64(delivery.position)])
        }
    }

    /// Sets an app's production and sandbox webhooks (an empty one: the configuration's); returns
    /// the two in force now.
    func setWebhook(app: String, url: String, sandboxURL: String) async throws -> (production: String, sandbox: String) {
        let configured = configuredWebhooks
        return try await database.write { db in
            if url.isEmpty && sandboxURL.isEmpty {
                try db.execute(cached: "DELETE FROM nt_webhook WHERE app = ?", arguments: [app])
            } else {
                try db.execute(
                    cached: """
                        INSERT INTO nt_webhook (app, url, sandbox_url) VALUES (?, ?, ?)
                        ON CONFLICT (app) DO UPDATE SET url = excluded.url, sandbox_url = excluded.sandbox_url
                        """, arguments: [app, url, sandboxURL])
            }
            return (
                try Self.webhook(db, app: app, environment: "Production", configured: configured) ?? "",
                try Self.webhook(db, app: app, environment: "Sandbox", configured: configured) ?? ""
            )
        }
    }

    /// The app's notifications after `position` with their deliveries and attempts, at most `limit`;
    /// whether more follow.
    func history(app: String, after position: UInt64, limit: Int) async throws -> (items: [Storebus_Notifications_V1_NotificationHistoryItem], hasMore: Bool) {
        let page = try await read(app: app, after: position, limit: limit + 1)
        let items = try await historyItems(app: app, Array(page.notifications.prefix(limit)))
        return (items, page.notifications.count > limit)
    }

    /// Up to `limit` of the app's notifications after `position` that `matching` keeps, looking at
    /// no more than `scanning` of them: the items found, the position of the last one looked at, and
    /// whether any is left to look at.
    func searchHistory(
        app: String, after position: UInt64, limit: Int, scanning: Int,
        matching: (Storebus_Notifications_V1_NotificationHistoryItem) -> Bool
    ) async throws -> (items: [Storebus_Notifications_V1_NotificationHistoryItem], last: UInt64, more: Bool) {
        var found: [Storebus_Notifications_V1_NotificationHistoryItem] = []
        var last = position
        var looked = 0
        while found.count < limit, looked < scanning {
            let page = try await read(app: app, after: last, limit: min(200, scanning - looked))
            if page.notifications.isEmpty { return (found, last, false) }
            for item in try await historyItems(app: app, page.notifications) {
                last = item.notification.position
                looked += 1
                if matching(item) {
                    found.append(item)
                    if found.count == limit { break }
                }
            }
            if last >= page.head { return (found, last, false) }
        }
        return (found, last, try await head(app: app) > last)
    }

    /// The TEST notification whose token (notificationUUID) is `token`, in `app`'s log, with its
    /// delivery and attempts; nil when the app has none by that token.
    func testNotification(app: String, token: String) async throws -> Storebus_Notifications_V1_NotificationHistoryItem? {
        let found = try await database.read { db in
            try db.value(Int64.self, cached: "SELECT position FROM nt_test WHERE token = ? AND app = ?", arguments: [token, app])
        }
        guard let position = found else { return nil }
        let page = try await read(app: app, after: UInt64(position) - 1, limit: 1)
        return try await historyItems(app: app, page.notifications).first
    }

    /// `notifications` of `app` with their deliveries and attempts.
    func historyItems(app: String, _ notifications: [Storebus_Notifications_V1_Notification]) async throws -> [Storebus_Notifications_V1_NotificationHistoryItem] {
        try await database.read { db in
            try notifications.map { notification in
                let delivery = try db.row(cached: "SELECT url, state FROM nt_delivery WHERE app = ? AND position = ?", arguments: [app, Int64(notification.position)])
                let attempts = try db.rows(
                    cached: "SELECT at_ms, result, http_status FROM nt_attempt WHERE app = ? AND position = ? ORDER BY attempt",
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
    }
}
