import Foundation
import GRDB
import Logging
import ReceiptFormat
import ServiceLifecycle
import StoreBus
import StoreBusServer
import StoreBusStorage
import StoreSchema
import Synchronization

/// The receipt service's reducer of the payment queue's log: purchased and restored transactions,
/// refunds, finishes and cleared histories into the receipt store's tables. The events come decoded
/// as the payment queue's typed log page (QueueEventRecord): reading them through
/// google.protobuf.Struct took half of this process's CPU under the flow benchmark.
struct ReceiptReducer: LogReducer {
    typealias Page = Storebus_PaymentQueue_V1_QueueEventPage
    /// The events that change a receipt: a purchase or a restore completed, a refund, a finish (a
    /// consumable leaves the receipt), a cleared history, a subscription's renewal state.
    static let topics = [QueueTopic.completed, .refunded, .finished, .cleared, .subscriptions].map(\.rawValue)

    func apply(_ records: [Storebus_PaymentQueue_V1_QueueEventRecord], in db: any SQLConnection) throws {
        for record in records where record.type == Storebus_PaymentQueue_V1_QueueEvent.protoMessageName {
            try ReceiptStore.apply(db, record.payload, seq: record.seq)
        }
    }

    /// Forgets the transactions the log gave. Devices keep their opaque values, so receipts issued
    /// before still name their account.
    func forget(in db: any SQLConnection) throws {
        try db.execute(cached: "DELETE FROM rc_transaction")
    }
}
