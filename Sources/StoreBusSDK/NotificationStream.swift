import Foundation
import StoreBus
import StoreSchema

/// One App Store Server Notification of an app's log, verified: its position in the log, the
/// decoded payload, and the transaction and renewal info it carries, each checked against the root
/// the stream was given.
public struct VerifiedNotification: Sendable, Equatable {
    /// Its position in the app's log: keep the last one handled, and start the next stream after it.
    public var position: UInt64
    /// The decoded ResponseBodyV2DecodedPayload: `notificationType`, `subtype`, `notificationUUID`...
    public var payload: ResponseBodyV2DecodedPayload
    /// The transaction it carries (signedTransactionInfo), verified; nil for TEST.
    public var transaction: JWSTransactionDecodedPayload?
    /// A subscription's renewal info (signedRenewalInfo), verified; nil for other notifications.
    public var renewalInfo: JWSRenewalInfoDecodedPayload?
    /// The notification as signed, as Apple delivers it (`signedPayload`).
    public var signedPayload: String
    /// The account it is about (StoreBus's; Apple's notifications name none); empty for TEST.
    public var accountIdentifier: String

    /// `notificationType`, such as "DID_RENEW".
    public var notificationType: String { payload.notificationType ?? "" }
    /// `subtype`, or nil.
    public var subtype: String? { payload.subtype }
}

/// An app's notifications, as its backend follows them through a gateway with the app's server key
/// (``StoreConfiguration/server(gatewayEndpoints:serverKey:appBundleID:)``): every notification after
/// a position, in order, each verified, waiting for the next as long as the loop runs. Positions are
/// gapless; a backend that keeps the position of the last notification it handled (beside what it
/// did with it) and starts from there misses nothing and sees nothing twice.
///
/// ```swift
/// let connection = try StoreConnection(configuration: .server(gatewayEndpoints: [gateway], serverKey: key, appBundleID: app))
/// for try await notification in NotificationStream(connection: connection, after: lastHandled) {
///     try handle(notification)            // and keep notification.position with its effects
/// }
/// ```
///
/// The gateway or the notification service out of reach (restarting, say) is waited out, trying again
/// with a growing pause; a notification that does not verify, a position past the log's end
/// (OUT_OF_RANGE) or a key refused end the sequence with that error.
public struct NotificationStream: AsyncSequence, Sendable {
    public typealias Element = VerifiedNotification

    let connection: StoreConnection
    let position: UInt64
    let root: String?
    let pageSize: Int
    let wait: Duration

    /// The notifications of `connection`'s app after `position` (0: from the first), verified against
    /// `root` (PEM; nil: the root the notification service gives, fetched once: pin one instead), read `pageSize` at a time (1 to 500),
    /// each read waiting up to `wait` (at most 30 s) for the next.
    public init(connection: StoreConnection, after position: UInt64 = 0, root: String? = nil, pageSize: Int = 100, wait: Duration = .seconds(20)) {
        self.connection = connection
        self.position = position
        self.root = root
        self.pageSize = Swift.min(Swift.max(pageSize, 1), 500)
        self.wait = Swift.min(wait, .seconds(30))
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(stream: self, position: position)
    }

    /// Reads the log page by page.
    public struct Iterator: AsyncIteratorProtocol {
        let stream: NotificationStream
        var position: UInt64
        var pending: [Storebus_Notifications_V1_Notification] = []
        var verifier: ReceiptVerifier?

        public mutating func next() async throws -> VerifiedNotification? {
            var pause = stream.connection.configuration.reconnectDelay
            while pending.isEmpty {
                try Task.checkCancellation()
                do {
                    let (seconds, attoseconds) = stream.wait.components
                    let page = try await stream.connection.call(
                        Storebus_Notifications_V1_Notifications.readNotifications,
                        .with {
                            $0.afterPosition = position
                            $0.limit = UInt32(stream.pageSize)
                            $0.waitMs = UInt32(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
                        }, timeout: stream.wait + stream.connection.configuration.callTimeout)
                    pending = page.notifications
                    pause = stream.connection.configuration.reconnectDelay
                } catch let error as StoreError where error.isTransient && error.status != .outOfRange {
                    try await Task.sleep(for: pause)
                    pause = Swift.min(pause * 2, .seconds(2))
                }
            }
            let notification = pending.removeFirst()
            if verifier == nil {
                var root = stream.root
                if root == nil {
                    root = try await stream.connection.call(Storebus_Notifications_V1_Notifications.getRootCertificate, .init()).rootCertificatePem
                }
                verifier = try ReceiptVerifier(rootCertificatePEM: root ?? "")
            }
            let verifier = verifier!
            let payload = try await verifier.verifyNotification(notification.signedPayload)
            let transaction = try await payload.data?.signedTransactionInfo.asyncMap { try await verifier.verifyTransaction($0) }
            let renewal = try await payload.data?.signedRenewalInfo.asyncMap { try await verifier.verifyRenewalInfo($0) }
            position = notification.position
            return VerifiedNotification(
                position: notification.position, payload: payload, transaction: transaction, renewalInfo: renewal, signedPayload: notification.signedPayload,
                accountIdentifier: notification.accountID)
        }
    }
}

extension Optional {
    /// The wrapped value mapped by an async closure.
    fileprivate func asyncMap<Mapped>(_ transform: (Wrapped) async throws -> Mapped) async rethrows -> Mapped? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}

extension StoreConfiguration {
    /// A server session's configuration: an app's backend, with the app's server key (a key the
    /// gateways list with `"server": true`), acting for the app alone.
    public static func server(gatewayEndpoints: [String], serverKey: String, appBundleID: String) -> StoreConfiguration {
        StoreConfiguration(gatewayEndpoints: gatewayEndpoints, apiKey: serverKey, appBundleID: appBundleID, accountID: "", deviceID: "")
    }
}
