extension Storebus_PaymentQueue_V1_QueueRef {
    /// The queue's key in the payment queue's event log: `<app>|<account>|<device>`.
    public var key: String { "\(appBundleID)|\(accountID)|\(deviceID)" }
}
