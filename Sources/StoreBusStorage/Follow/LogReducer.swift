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
}

extension LogReducer {
    public func forget(in db: any SQLConnection) throws {}
}
