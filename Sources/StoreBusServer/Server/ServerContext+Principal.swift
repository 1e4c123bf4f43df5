import StoreBus

extension ServerContext {
    /// The principal the call acts for; nil for calls from inside the deployment.
    public var principal: Principal? { Principal(metadata: metadata) }

    /// `app`, or the principal's app when `app` is empty (left out of the request) and the call has
    /// a principal: a call through the gateway acts for its session's own app unless it names one.
    public func ownWhenLeftOut(app: String) -> String { own(app, \.app) }

    /// `account`, or the principal's when it is empty (see ``ownWhenLeftOut(app:)``).
    public func ownWhenLeftOut(account: String) -> String { own(account, \.account) }

    /// `device`, or the principal's when it is empty (see ``ownWhenLeftOut(app:)``).
    public func ownWhenLeftOut(device: String) -> String { own(device, \.device) }

    private func own(_ value: String, _ id: KeyPath<Principal, String>) -> String {
        guard value.isEmpty, let principal else { return value }
        return principal[keyPath: id]
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
