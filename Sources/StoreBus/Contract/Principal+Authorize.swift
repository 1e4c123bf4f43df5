extension Principal {
    /// Refuses, with PERMISSION_DENIED (reason OTHER_APP), an app other than the principal's.
    public func authorize(app: String) throws(RPCError) {
        guard QueueNames.same(self.app, app) else {
            throw Self.outside("app", app, "this session acts for app \(self.app), not \(RPCError.echo(app))", reason: "OTHER_APP")
        }
    }

    /// Refuses, with PERMISSION_DENIED (reason OTHER_ACCOUNT), an account other than the principal's.
    public func authorize(account: String) throws(RPCError) {
        guard QueueNames.same(self.account, account) else {
            throw Self.outside("account", account, "this session acts for account \(self.account), not \(RPCError.echo(account))", reason: "OTHER_ACCOUNT")
        }
    }

    /// Refuses, with PERMISSION_DENIED (reason OTHER_DEVICE), a device other than the principal's: a
    /// device acts on its own queue only.
    public func authorize(device: String) throws(RPCError) {
        guard QueueNames.same(self.device, device) else {
            throw Self.outside("device", device, "this session acts for device \(self.device), not \(RPCError.echo(device))", reason: "OTHER_DEVICE")
        }
    }

    /// PERMISSION_DENIED for a call naming an app, account or device (`type`) outside its session,
    /// with the resource named and a reason to branch on.
    private static func outside(_ type: String, _ name: String, _ message: String, reason: String) -> RPCError {
        RPCError.resource(.permissionDenied, type: type, name: name, message).withReason(reason, domain: "storebus.gateway")
    }
}
