import StoreSchema

extension Storebus_PaymentQueue_V1_QueueRef {
    /// The contract's rules for a queue (every part a usable name: present, at most 255 bytes, in
    /// normalization form C, without `|`, a line break or NUL; see ``QueueNames``), as the servers'
    /// interceptors check them, with fields reported under `field`.
    public func validate(field: String = "queue") throws(RPCError) {
        try checkFields(prefix: "\(field).")
    }
}
