import StoreBus
import StoreSchema

extension Storebus_PaymentQueue_V1_QueueRef {
    /// The queue's key in the event log: `<app>|<account>|<device>`.
    public var key: String { "\(appBundleID)|\(accountID)|\(deviceID)" }

    /// Checks that every part is present and usable in a key (no `|`, no newline, at most 255 bytes).
    public func validate(field: String = "queue") throws(RPCError) {
        for (name, value) in [("appBundleId", appBundleID), ("accountId", accountID), ("deviceId", deviceID)] {
            guard !value.isEmpty, value.utf8.count <= 255, !value.contains("|"), !value.contains("\n") else {
                throw RPCError.invalidArgument(field: "\(field).\(name)", "must be 1 to 255 characters without | or a newline")
            }
        }
    }
}
