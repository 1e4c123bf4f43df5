/// Who a call acts for, when it comes through the gateway.
///
/// The gateway authenticates a client, drops any `principal-*` metadata the client sent, and
/// forwards each call with the session's app, account and device in these entries. Services that own
/// per-account data check every app, account or queue a request names against it. Calls without a
/// principal come from inside the deployment (other services, operators' tools on the service
/// endpoints) and are not restricted: the gateway is the only door clients have.
public struct Principal: Sendable, Equatable {
    /// Metadata key of the app.
    public static let appKey = "principal-app"
    /// Metadata key of the account.
    public static let accountKey = "principal-account"
    /// Metadata key of the device.
    public static let deviceKey = "principal-device"
    /// Every metadata key the gateway owns (clients may not set them).
    public static let metadataKeys = [appKey, accountKey, deviceKey]

    /// The app, for example `com.example.app`.
    public var app: String
    /// The App Store account.
    public var account: String
    /// The device.
    public var device: String

    /// A principal.
    public init(app: String, account: String, device: String) {
        self.app = app
        self.account = account
        self.device = device
    }

    /// The principal a call's metadata names, if any.
    public init?(metadata: Metadata) {
        guard let app = metadata[Self.appKey] else { return nil }
        self.init(app: app, account: metadata[Self.accountKey] ?? "", device: metadata[Self.deviceKey] ?? "")
    }

    /// Writes the principal into `metadata`.
    public func apply(to metadata: inout Metadata) {
        metadata[Self.appKey] = app
        metadata[Self.accountKey] = account
        metadata[Self.deviceKey] = device
    }
}
