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

extension ServerContext {
    /// The principal the call acts for; nil for calls from inside the deployment.
    public var principal: Principal? { Principal(metadata: metadata) }

    /// `app`, or the principal's app when `app` is empty (left out of the request) and the call has
    /// a principal: a call through the gateway acts for its session's own app unless it names one.
    public func ownWhenLeftOut(app: String) -> String {
        app.isEmpty ? principal?.app ?? app : app
    }

    /// `account`, or the principal's when it is empty (see ``ownWhenLeftOut(app:)``).
    public func ownWhenLeftOut(account: String) -> String {
        account.isEmpty ? principal?.account ?? account : account
    }

    /// `device`, or the principal's when it is empty (see ``ownWhenLeftOut(app:)``).
    public func ownWhenLeftOut(device: String) -> String {
        device.isEmpty ? principal?.device ?? device : device
    }

    /// Refuses, with PERMISSION_DENIED, a call acting for another app than its principal's.
    public func authorize(app: String) throws(RPCError) {
        guard let principal else { return }
        guard QueueNames.same(principal.app, app) else {
            throw Self.outside("app", app, "this session acts for app \(principal.app), not \(RPCError.echo(app))", reason: "OTHER_APP")
        }
    }

    /// Refuses, with PERMISSION_DENIED, a call naming another app or account than its principal's.
    public func authorize(app: String, account: String) throws(RPCError) {
        try authorize(app: app)
        guard let principal else { return }
        guard QueueNames.same(principal.account, account) else {
            throw Self.outside("account", account, "this session acts for account \(principal.account), not \(RPCError.echo(account))", reason: "OTHER_ACCOUNT")
        }
    }

    /// Refuses, with PERMISSION_DENIED, a call naming another queue than its principal's (a device
    /// acts on its own queue only).
    public func authorize(app: String, account: String, device: String) throws(RPCError) {
        try authorize(app: app, account: account)
        guard let principal else { return }
        guard QueueNames.same(principal.device, device) else {
            throw Self.outside("device", device, "this session acts for device \(principal.device), not \(RPCError.echo(device))", reason: "OTHER_DEVICE")
        }
    }

    /// PERMISSION_DENIED for a call naming an app, account or device (`type`) outside its session,
    /// with the resource named and a reason to branch on.
    private static func outside(_ type: String, _ name: String, _ message: String, reason: String) -> RPCError {
        RPCError.resource(.permissionDenied, type: type, name: name, message).withReason(reason, domain: "storebus.gateway")
    }
}
