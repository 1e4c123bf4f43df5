import Foundation
import Metrics
import StoreBus
import StoreBusServer
import StoreSchema
import SwiftProtobuf

/// The notification service's metrics.
enum NotificationMetrics {
    /// `storebus_notifications_appended_total`: notifications appended to the apps' logs.
    static let appended = Counter(label: "storebus_notifications_appended_total")

    /// `storebus_notification_lag_seconds`: from the commit of a notification's event in the payment
    /// queue to the notification in its app's log (readable by backends).
    static let appendLag = Metrics.Timer(label: "storebus_notification_lag_seconds")

    /// `storebus_webhook_delivery_lag_seconds`: from a notification's appending to its webhook's
    /// successful attempt (retries included).
    static let deliveryLag = Metrics.Timer(label: "storebus_webhook_delivery_lag_seconds")

    /// `storebus_webhook_deliveries_pending`: deliveries waiting for an attempt (a first one, or a
    /// retry on Apple's schedule).
    static let pending = Gauge(label: "storebus_webhook_deliveries_pending")

    /// `storebus_webhook_attempts_total{result}`: webhook attempts, by Apple's sendAttemptResult.
    static func attempts(_ result: String) -> Counter {
        Counter(label: "storebus_webhook_attempts_total", dimensions: [("result", result)])
    }
}

/// Notifications' handlers: each app's log, read by its backend from a position it keeps, and TEST
/// notifications on request.
struct NotificationsHandlers: Storebus_Notifications_V1_Notifications.Handlers {
    let store: NotificationStore
    let receipt: RPCClient

    /// Serves every method: none runs on the loop (the protocol's default).
    var router: RPCRouter {
        var router = RPCRouter()
        router.register(self)
        return router
    }

    /// The longest a read waits for a notification, whatever it asks.
    static let longestWait = Duration.seconds(30)

    func readNotifications(
        _ request: Storebus_Notifications_V1_ReadNotificationsRequest, context: ServerContext
    ) async throws -> PrewrittenResponse<Storebus_Notifications_V1_ReadNotificationsResponse> {
        let app = request.appBundleID
        let limit = request.limit == 0 ? 100 : Int(request.limit)
        let head = try await store.head(app: app)
        guard request.afterPosition <= head else {
            throw RPCError(.outOfRange, "position \(request.afterPosition) is past the newest notification of \(RPCError.echo(app)), \(head)")
                .withReason("POSITION_PAST_HEAD", domain: "storebus.notifications")
        }
        if request.afterPosition > 0 {
            // Reading on after a pruned position would skip notifications without saying so.
            let oldest = try await store.oldest(app: app)
            if oldest > 1, request.afterPosition < oldest - 1 {
                var error = RPCError(
                    .outOfRange,
                    "notifications of \(RPCError.echo(app)) up to \(oldest - 1) are pruned: the oldest kept is \(oldest); read from there (after \(oldest - 1)) or from 0"
                ).withReason("POSITION_PRUNED", domain: "storebus.notifications")
                error.details.info.metadata["oldestPosition"] = String(oldest)
                throw error
            }
        }
        if request.afterPosition == head, request.waitMs > 0 {
            // Wait for the next one, leaving the caller time to hear the answer.
            var wait = min(Duration.milliseconds(Int64(request.waitMs)), Self.longestWait)
            if let remaining = context.timeRemaining { wait = min(wait, remaining - min(remaining / 10, .milliseconds(100))) }
            if wait > .zero { _ = await store.appended.wait(app, reaching: head + 1, timeout: wait) }
        }
        return PrewrittenResponse(json: try await store.page(app: app, after: request.afterPosition, limit: limit))
    }

    func getRootCertificate(
        _ request: Storebus_Notifications_V1_GetRootCertificateRequest, context: ServerContext
    ) async throws -> Storebus_Notifications_V1_GetRootCertificateResponse {
        let certificates = try await receipt.call(Storebus_Receipt_V1_Receipt.getSigningCertificates, .init(), options: CallOptions(timeout: context.timeRemaining))
        return .with {
            $0.rootCertificatePem = certificates.rootCertificatePem
            $0.environment = certificates.environment
        }
    }

    func getNotificationHistory(
        _ request: Storebus_Notifications_V1_GetNotificationHistoryRequest, context: ServerContext
    ) async throws -> Storebus_Notifications_V1_GetNotificationHistoryResponse {
        let page = try await store.history(app: request.appBundleID, after: request.afterPosition, limit: request.limit == 0 ? 20 : Int(request.limit))
        return .with {
            $0.items = page.items
            $0.hasMore_p = page.hasMore
        }
    }

    func setWebhook(_ request: Storebus_Notifications_V1_SetWebhookRequest, context: ServerContext) async throws -> Storebus_Notifications_V1_SetWebhookResponse {
        for (field, text) in [("url", request.url), ("sandboxUrl", request.sandboxURL)] where !text.isEmpty {
            guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false else {
                throw RPCError.invalidArgument(field: field, "must be an http or https URL with a host")
            }
        }
        let (production, sandbox) = try await store.setWebhook(app: request.appBundleID, url: request.url, sandboxURL: request.sandboxURL)
        return .with {
            $0.url = production
            $0.sandboxURL = sandbox
        }
    }

    func requestTestNotification(
        _ request: Storebus_Notifications_V1_RequestTestNotificationRequest, context: ServerContext
    ) async throws -> Storebus_Notifications_V1_RequestTestNotificationResponse {
        try await requestTest(app: request.appBundleID, timeout: context.timeRemaining)
    }

    /// Signs a TEST notification for `app` and appends it to its log (its webhook hears it).
    func requestTest(app: String, timeout: Duration?) async throws -> Storebus_Notifications_V1_RequestTestNotificationResponse {
        let uuid = UUID().uuidString.lowercased()
        let signedDate = EpochMilliseconds.now
        let signed = try await receipt.call(
            Storebus_Receipt_V1_Receipt.signNotifications,
            .with {
                $0.notifications = [
                    .with {
                        $0.notificationUuid = uuid
                        $0.notificationType = "TEST"
                        $0.appBundleID = app
                        $0.signedDateMs = signedDate
                    }
                ]
            }, options: CallOptions(timeout: timeout))
        guard let payload = signed.signedPayloads.first else {
            throw RPCError(.internalError, "the receipt service signed no TEST notification")
        }
        let position = try await store.append(
            .with {
                $0.notificationUuid = uuid
                $0.notificationType = "TEST"
                $0.signedPayload = payload
                $0.signedDate = Google_Protobuf_Timestamp(milliseconds: signedDate)
                $0.appBundleID = app
            }, environment: signed.environment)
        NotificationMetrics.appended.increment()
        return .with {
            $0.testNotificationToken = uuid
            $0.position = position
        }
    }
}
