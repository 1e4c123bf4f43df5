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
        try principal?.authorize(app: app)
    }

    /// Refuses, with PERMISSION_DENIED, a call naming another app or account than its principal's.
    public func authorize(app: String, account: String) throws(RPCError) {
        guard let principal else { return }
        try principal.authorize(app: app)
        try principal.authorize(account: account)
    }

    /// Refuses, with PERMISSION_DENIED, a call naming another queue than its principal's (a device
    /// acts on its own queue only).
    public func authorize(app: String, account: String, device: String) throws(RPCError) {
        guard let principal else { return }
        try principal.authorize(app: app)
        try principal.authorize(account: account)
        try principal.authorize(device: device)
    }
}
