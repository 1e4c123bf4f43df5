import StoreBus
import StoreSchema

extension Storebus_PaymentQueue_V1_QueueRef {
    /// Checks that every part is a usable name (see ``QueueNames``): present, at most 255 bytes, in
    /// normalization form C, without `|` or a line break.
    public func validate(field: String = "queue") throws(RPCError) {
        try QueueNames.check(app: appBundleID, account: accountID, device: deviceID, fieldPrefix: "\(field).")
    }
}

extension ServerContext {
    /// Refuses, with PERMISSION_DENIED, a call through the gateway naming a queue that is not its
    /// session's.
    public func authorize(_ queue: Storebus_PaymentQueue_V1_QueueRef) throws(RPCError) {
        try authorize(app: queue.appBundleID, account: queue.accountID, device: queue.deviceID)
    }

    /// Fills the ids `queue` leaves out with the session's own (a call through the gateway may name
    /// no queue: it acts on its session's), then refuses, with PERMISSION_DENIED, a queue that is
    /// not the session's. Without a principal an id left out stays empty, for validation to refuse.
    public func authorize(_ queue: inout Storebus_PaymentQueue_V1_QueueRef) throws(RPCError) {
        queue.appBundleID = ownWhenLeftOut(app: queue.appBundleID)
        queue.accountID = ownWhenLeftOut(account: queue.accountID)
        queue.deviceID = ownWhenLeftOut(device: queue.deviceID)
        try authorize(queue)
    }
}
