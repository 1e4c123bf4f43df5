import StoreBus
import StoreSchema

extension Storebus_PaymentQueue_V1_QueueRef {
    /// Checks that every part is present and usable in a key (no `|`, no newline, at most 255 bytes).
    public func validate(field: String = "queue") throws(RPCError) {
        for (name, value) in [("appBundleId", appBundleID), ("accountId", accountID), ("deviceId", deviceID)] {
            guard !value.isEmpty, value.utf8.count <= 255, !value.contains("|"), !value.contains("\n") else {
                throw RPCError.invalidArgument(field: "\(field).\(name)", "must be 1 to 255 characters without | or a newline")
            }
        }
    }
}

extension ServerContext {
    /// Refuses, with PERMISSION_DENIED, a call through the gateway naming a queue that is not its
    /// session's.
    func authorize(_ queue: Storebus_PaymentQueue_V1_QueueRef) throws(RPCError) {
        try authorize(app: queue.appBundleID, account: queue.accountID, device: queue.deviceID)
    }
}
