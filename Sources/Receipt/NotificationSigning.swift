import Foundation
import ReceiptFormat
import StoreBus
import StoreSchema

// The notification service's notifications, signed here: the receipt service is the deployment's
// one signer, and its state has the transactions and subscriptions the notifications describe.
extension ReceiptBook {
    /// Each notification's signedPayload, in order: its ResponseBodyV2DecodedPayload with the
    /// transaction signed as signedTransactionInfo and, for a subscription, its renewal info and
    /// status, as this service's state holds them now. NOT_FOUND when a transaction is not in it.
    func signNotifications(_ notifications: [Storebus_Receipt_V1_NotificationToSign], now: Date = Date()) async throws -> [String] {
        let key = try authority.current(now: now)
        let environment = configuration.environment
        // The renewal states of each account named, read once per call; only the transaction and
        // the subscription a notification names are read, never the account's whole history.
        var states: [String: [String: RenewalState]] = [:]
        // The transactions named, read together: one read, not one (and its thread hops) each.
        let purchases = try await store.purchases(
            notifications.filter { !$0.transactionID.isEmpty }.map { (app: $0.appBundleID, account: $0.accountID, id: $0.transactionID) })
        var signed: [String] = []
        signed.reserveCapacity(notifications.count)
        for notification in notifications {
            let signedDate = EpochMilliseconds.date(notification.signedDateMs)
            var data = NotificationData()
            data.bundleId = notification.appBundleID
            data.environment = environment.rawValue
            let (app, account) = (notification.appBundleID, notification.accountID)
            if !notification.transactionID.isEmpty {
                guard let purchase = purchases[ReceiptStore.PurchaseKey(app: app, account: account, id: notification.transactionID)] else {
                    throw RPCError.resource(
                        .notFound, type: "transaction", name: notification.transactionID,
                        "account \(RPCError.echo(account)) has no purchased or restored transaction \(RPCError.echo(notification.transactionID))")
                }
                data.signedTransactionInfo = try SignedTransaction.sign(purchase, environment: environment, with: key, at: signedDate)
            }
            if !notification.originalTransactionID.isEmpty {
                let name = "\(app)|\(account)"
                if states[name] == nil { states[name] = try await store.renewalStates(app: app, account: account) }
                let periods = try await store.subscriptionPurchases(app: app, account: account, original: notification.originalTransactionID)
                if let status = SubscriptionStatus.all(periods, states: states[name] ?? [:], now: now).first {
                    data.signedRenewalInfo = try JWS.sign(status.renewalInfo(environment: environment, signedDate: signedDate), with: key, written: FastPaths.enabled)
                    data.status = status.status
                }
            }
            var payload = ResponseBodyV2DecodedPayload()
            payload.notificationType = notification.notificationType
            payload.subtype = notification.subtype.isEmpty ? nil : notification.subtype
            payload.notificationUUID = notification.notificationUuid
            payload.data = data
            payload.version = "2.0"
            payload.signedDate = notification.signedDateMs
            signed.append(try JWS.sign(payload, with: key, written: FastPaths.enabled))
        }
        return signed
    }
}
