import GRDB
import StoreBusServer

/// What a follower of another service's event log does with it, and nothing else: the effects of
/// consecutive records on its own database, which the log can always give again (they are committed
/// as derived state: see ``LogFollowerService``). ``LogFollowerService`` reads the log, runs ``apply(_:in:)``
/// in the transaction that also moves the position, and ``forget(in:)`` when the log was replaced.
public protocol LogReducer: Sendable {
    /// The log's typed page (the payment queue's: `Storebus_PaymentQueue_V1_QueueEventPage`).
    associatedtype Page: EventLogPage

    /// Applies consecutive records, oldest first, in the write transaction `db`.
    func apply(_ records: [Page.Record], in db: any SQLConnection) throws
    /// Removes what the log gave, in the write transaction `db`: the log was replaced and is applied
    /// again from its start. Default: nothing (state the log cannot give again stays).
    func forget(in db: any SQLConnection) throws
    /// With several instances sharing the log (``LogFollowerService``'s leases): this instance holds
    /// `shard` of the log's `count` from now on and is about to follow it, from its database's
    /// position. Default: nothing.
    func holding(shard: UInt32, of count: UInt32) async throws
    /// With several instances: this instance no longer holds `shard`; another may follow it now.
    /// Default: nothing.
    func released(shard: UInt32, of count: UInt32)
}

extension LogReducer {
    public func forget(in db: any SQLConnection) throws {}
    public func holding(shard: UInt32, of count: UInt32) async throws {}
    public func released(shard: UInt32, of count: UInt32) {}
}
