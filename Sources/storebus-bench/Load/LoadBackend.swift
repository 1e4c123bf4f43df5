import Foundation
import Histogram
import ReceiptFormat
import StoreBus
import StoreBusSDK
import StoreSchema
import Synchronization

/// An app's backend beside the devices (`storebus-bench load --backend`): it follows the app's
/// notifications through the gateway with the app's server key, from the head when the run starts,
/// as a backend keeping its position does, and measures each notification's lag: from the commit
/// of what it tells (its transaction's purchaseDate, a refund's revocationDate) to the moment it is
/// in the backend's hands.
final class LoadBackend: Sendable {
    struct State {
        var lag = LoadRecorder.histogram()
        var byType: [String: Int] = [:]
        var received = 0
        var errors = 0
    }

    let connection: StoreConnection
    let state = Mutex(State())

    init(target: LoadTarget, serverKey: String) throws {
        var configuration = StoreConfiguration.server(gatewayEndpoints: target.gateways, serverKey: serverKey, appBundleID: target.app)
        configuration.gatewayPublicKey = target.gatewayKey
        configuration.callTimeout = .seconds(20)
        connection = try StoreConnection(configuration: configuration)
    }

    /// Follows the log until the task is cancelled.
    func run() async {
        var position: UInt64?
        while !Task.isCancelled {
            do {
                let page = try await connection.call(
                    Storebus_Notifications_V1_Notifications.readNotifications,
                    .with {
                        $0.afterPosition = position ?? 0
                        $0.limit = position == nil ? 1 : 500
                        $0.waitMs = position == nil ? 0 : 1_000
                    }, timeout: .seconds(10))
                let received = EpochMilliseconds.now
                guard let start = position else {
                    position = page.headPosition
                    continue
                }
                state.withLock { state in
                    for notification in page.notifications {
                        state.received += 1
                        state.byType[notification.notificationType, default: 0] += 1
                        if let committed = Self.committed(notification.signedPayload) {
                            _ = state.lag.record(UInt64(max(0, received - committed)) * 1000)
                        }
                    }
                }
                position = page.notifications.last?.position ?? start
            } catch {
                if Task.isCancelled { return }
                state.withLock { $0.errors += 1 }
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// When what a signed notification tells was committed: its transaction's revocationDate for a
    /// refund, its purchaseDate for a charge, a subscription or a renewal; nil for the rest.
    static func committed(_ signedPayload: String) -> Int64? {
        guard let payload = JWS.unverifiedPayload(signedPayload), let type = payload["notificationType"] as? String,
            ["ONE_TIME_CHARGE", "SUBSCRIBED", "DID_RENEW", "REFUND"].contains(type),
            let transaction = ((payload["data"] as? [String: Any])?["signedTransactionInfo"] as? String).flatMap(JWS.unverifiedPayload)
        else { return nil }
        let field = type == "REFUND" ? "revocationDate" : "purchaseDate"
        return (transaction[field] as? NSNumber)?.int64Value
    }

    /// What the backend saw, for the results.
    struct Figures: Codable {
        var notifications: Int
        var byType: [String: Int]
        var readErrors: Int
        var lag: LoadResults.Row
    }

    var figures: Figures {
        state.withLock { state in
            Figures(notifications: state.received, byType: state.byType, readErrors: state.errors, lag: LoadResults.Row("lag from commit", state.lag))
        }
    }

    func close() async {
        await connection.close()
    }
}
