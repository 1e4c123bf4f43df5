import Foundation

/// An App Store Server Notification V2's payload: Apple's ResponseBodyV2DecodedPayload, field for
/// field, under Apple's names, as the notification's `signedPayload` (a JWS) carries it. Dates are
/// milliseconds since 1970. A field left nil is left out of the JSON.
public struct ResponseBodyV2DecodedPayload: Codable, Sendable, Equatable {
    /// What happened: Apple's NotificationTypeV2, such as "SUBSCRIBED", "DID_RENEW" or "REFUND".
    public var notificationType: String?
    /// More about it, for some types: "INITIAL_BUY", "BILLING_RECOVERY", "VOLUNTARY", ...
    public var subtype: String?
    /// The notification's identifier: a redelivery carries the same.
    public var notificationUUID: String?
    /// The app and the signed transaction and renewal info it is about.
    public var data: NotificationData?
    /// "2.0".
    public var version: String?
    /// When it was signed.
    public var signedDate: Int64?

    /// A payload with every field left out; set those that apply.
    public init() {}
}

/// A notification's `data`: Apple's Data object of App Store Server Notifications.
public struct NotificationData: Codable, Sendable, Equatable {
    /// Apple's numeric app id; StoreBus apps have none, so it is left out (Apple's libraries ask for
    /// it in production only).
    public var appAppleId: Int64?
    public var bundleId: String?
    public var bundleVersion: String?
    /// "Sandbox" or "Production".
    public var environment: String?
    /// The transaction, a JWS of JWSTransactionDecodedPayload.
    public var signedTransactionInfo: String?
    /// Auto-renewable subscriptions: the renewal info, a JWS of JWSRenewalInfoDecodedPayload.
    public var signedRenewalInfo: String?
    /// Auto-renewable subscriptions: 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked.
    public var status: Int?

    /// Data with every field left out; set those that apply.
    public init() {}
}
