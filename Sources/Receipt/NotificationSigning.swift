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
        // The state of each account named, read once per call.
        var accounts: [String: (purchases: [StoredPurchase], statuses: [SubscriptionStatus])] = [:]
        var signed: [String] = []
        signed.reserveCapacity(notifications.count)
        for notification in notifications {
            let signedDate = EpochMilliseconds.date(notification.signedDateMs)
            var data = NotificationData()
            data.bundleId = notification.appBundleID
            data.environment = environment.rawValue
            if !notification.transactionID.isEmpty || !notification.originalTransactionID.isEmpty {
                let name = "\(notification.appBundleID)|\(notification.accountID)"
                if accounts[name] == nil {
                    let purchases = try await store.purchases(app: notification.appBundleID, account: notification.accountID, includingCleared: true)
                    let states = try await store.renewalStates(app: notification.appBundleID, account: notification.accountID)
                    accounts[name] = (purchases, SubscriptionStatus.all(purchases, states: states, now: now))
                }
                let account = accounts[name]!
                if !notification.transactionID.isEmpty {
                    guard let purchase = account.purchases.first(where: { $0.id == notification.transactionID }) else {
                        throw RPCError.resource(
                            .notFound, type: "transaction", name: notification.transactionID,
                            "account \(RPCError.echo(notification.accountID)) has no purchased or restored transaction \(RPCError.echo(notification.transactionID))")
                    }
                    data.signedTransactionInfo = try SignedTransaction.sign(purchase, environment: environment, with: key, at: signedDate)
                }
                if !notification.originalTransactionID.isEmpty,
                    let status = account.statuses.first(where: { $0.originalID == notification.originalTransactionID })
                {
                    data.signedRenewalInfo = try JWS.sign(status.renewalInfo(environment: environment, signedDate: signedDate), with: key)
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
            signed.append(try JWS.sign(payload, with: key))
        }
        return signed
    }
}
