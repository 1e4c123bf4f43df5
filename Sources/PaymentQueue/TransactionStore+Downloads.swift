import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema

/// SKDownload's states, kept with each transaction's downloads: the download service moves them
/// (UpdateDownloads), and FinishTransaction cancels what is not done. Every change is an
/// `updatedDownloads` event in the queue's log, so observers see it in order with the queue's
/// other callbacks.
extension TransactionStore {
    /// Longest content URL a device may report, in bytes.
    public static let maxContentURLBytes = 2048
    /// Longest error description a device may report, in bytes.
    public static let maxDownloadErrorBytes = 1024

    /// The outcome of UpdateDownloads.
    public struct DownloadsUpdate: Sendable {
        public var downloads: [Storebus_PaymentQueue_V1_Download]
        public var productIdentifiers: [String]
        public var keySeq: UInt64
        public var logSeq: UInt64
    }

    /// Applies `updates` to downloads of `queue`'s transactions, all or none (see UpdateDownloads in
    /// the contract); with `checkOnly`, checks them and writes nothing.
    public func updateDownloads(
        _ updates: [Storebus_PaymentQueue_V1_DownloadUpdate], queue: Storebus_PaymentQueue_V1_QueueRef, checkOnly: Bool
    ) async throws -> DownloadsUpdate {
        try await writer.write { db, batch in
            try batch.requireOwner(key: queue.key)
            var changed: [String: TransactionRecord] = [:]
            var order: [String] = []
            var decoded: [String: [Storebus_PaymentQueue_V1_Download]] = [:]
            var announced: [Storebus_PaymentQueue_V1_Download] = []
            var result = DownloadsUpdate(downloads: [], productIdentifiers: [], keySeq: 0, logSeq: 0)
            for update in updates {
                let id = update.transactionIdentifier
                let record: TransactionRecord
                if let known = changed[id] {
                    record = known
                } else {
                    record = try Self.queueRecord(db, id: id, queue: queue)
                    guard !record.finished else {
                        throw RPCError.resource(.failedPrecondition, type: "transaction", name: id, "transaction \(RPCError.echo(id)) is finished: its downloads can no longer be used")
                            .withReason("TRANSACTION_FINISHED", domain: "storebus.payment_queue")
                    }
                    guard record.state == .purchased || record.state == .restored else {
                        throw RPCError.resource(
                            .failedPrecondition, type: "transaction", name: id, "transaction \(RPCError.echo(id)) is \(record.state), not purchased or restored: it has no content to download"
                        )
                        .withReason("NOT_PURCHASED", domain: "storebus.payment_queue")
                    }
                    changed[id] = record
                    order.append(id)
                    decoded[id] = try record.offeredDownloads()
                }
                guard let index = decoded[id]!.firstIndex(where: { $0.contentIdentifier == update.contentIdentifier }) else {
                    throw RPCError.resource(.notFound, type: "download", name: update.contentIdentifier, "transaction \(RPCError.echo(id)) has no content \(RPCError.echo(update.contentIdentifier))")
                }
                var download = decoded[id]![index]
                guard let target = download.state.after(update.action) else {
                    throw RPCError.resource(
                        .failedPrecondition, type: "download", name: update.contentIdentifier,
                        "the download of \(RPCError.echo(update.contentIdentifier)) is \(download.state.name): it cannot be \(Self.actionName(update.action))"
                    )
                    .withReason("DOWNLOAD_STATE", domain: "storebus.payment_queue")
                }
                let before = download
                download.state = target
                download.progress = target == .finished ? 1 : (target == .cancelled ? 0 : min(max(update.progress, 0), 1))
                download.timeRemainingSeconds = target == .finished ? 0 : -1
                download.clearError()
                if target == .failed {
                    download.error = update.error
                    if download.error.localizedDescription.utf8.count > Self.maxDownloadErrorBytes {
                        download.error.localizedDescription = String(decoding: Array(download.error.localizedDescription.utf8.prefix(Self.maxDownloadErrorBytes)), as: UTF8.self)
                    }
                }
                download.contentURL = target == .finished ? (update.contentURL.isEmpty ? before.contentURL : update.contentURL) : ""
                if target != before.state || (target == .failed && download.error != before.error) {
                    decoded[id]![index] = download
                    announced.append(download)
                }
                result.downloads.append(download)
                result.productIdentifiers.append(record.payment.productIdentifier)
            }
            if !checkOnly && !announced.isEmpty {
                for id in order {
                    let stored = try Self.storedDownloads(decoded[id]!)
                    try db.execute(cached: Self.setDownloadsSQL) {
                        $0.text(stored)
                        $0.text(id)
                    }
                    var record = changed[id]!
                    record.downloads = stored
                    try Self.setReplayWeight(db, id: id, Self.replayWeight(record.transaction(db)))
                }
                try batch.appendQueueEvent(
                    key: queue.key,
                    Storebus_PaymentQueue_V1_QueueEvent.with {
                        $0.updatedDownloads.downloads = announced
                        $0.queue = queue
                    })
            }
            result.keySeq = try EventLog.head(db, key: queue.key)
            // A position of the queue's shard (the whole log, when it is not sharded).
            result.logSeq = try EventLog.head(db, key: "", shard: self.shardOf(queue.key))
            return result
        }
    }

    static let setDownloadsSQL: CachedSQL = "UPDATE pq_transaction SET downloads = ? WHERE id = ?"

    /// Downloads as the `downloads` column keeps them: without the transaction identifier, which
    /// the row holds.
    static func storedDownloads(_ downloads: [Storebus_PaymentQueue_V1_Download]) throws -> String {
        try Storebus_PaymentQueue_V1_Download.jsonString(
            from: downloads.map { download in
                var download = download
                download.transactionIdentifier = ""
                return download
            })
    }

    /// A restored copy offers its original's content anew: every download WAITING, whatever became
    /// of the original's.
    static func offerDownloadsAfresh(_ db: any SQLConnection, id: String) throws {
        guard let stored = try db.value(String.self, cached: CachedSQL("SELECT downloads FROM pq_transaction WHERE id = ?"), arguments: [id]), stored != "[]" else { return }
        let fresh = try Storebus_PaymentQueue_V1_Download.array(fromJSONString: stored).map { download in
            Storebus_PaymentQueue_V1_Download.with {
                $0.contentIdentifier = download.contentIdentifier
                $0.contentVersion = download.contentVersion
                $0.contentLength = download.contentLength
                $0.state = .waiting
            }
        }
        try db.execute(cached: setDownloadsSQL) {
            $0.text(try storedDownloads(fresh))
            $0.text(id)
        }
    }

    /// FinishTransaction's part: every download of `record` not finished or cancelled becomes
    /// CANCELLED, announced before the transaction leaves the queue. Returns the downloads as kept.
    static func cancelUnfinishedDownloads(
        _ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, _ record: inout TransactionRecord, queue: Storebus_PaymentQueue_V1_QueueRef
    ) throws {
        guard record.state == .purchased || record.state == .restored else { return }
        var downloads = try record.offeredDownloads()
        var cancelled: [Storebus_PaymentQueue_V1_Download] = []
        for index in downloads.indices where downloads[index].state != .finished && downloads[index].state != .cancelled {
            downloads[index].state = .cancelled
            downloads[index].progress = 0
            downloads[index].timeRemainingSeconds = -1
            downloads[index].clearError()
            downloads[index].contentURL = ""
            cancelled.append(downloads[index])
        }
        guard !cancelled.isEmpty else { return }
        record.downloads = try storedDownloads(downloads)
        try db.execute(cached: setDownloadsSQL) {
            $0.text(record.downloads)
            $0.text(record.id)
        }
        try batch.appendQueueEvent(
            key: queue.key,
            Storebus_PaymentQueue_V1_QueueEvent.with {
                $0.updatedDownloads.downloads = cancelled
                $0.queue = queue
            })
    }

    /// The transaction `id` of `queue`: NOT_FOUND when there is none in it, PERMISSION_DENIED when it
    /// is another account's.
    static func queueRecord(_ db: any SQLConnection, id: String, queue: Storebus_PaymentQueue_V1_QueueRef) throws -> TransactionRecord {
        guard let record = try TransactionRecord.fetch(db, id: id), QueueNames.same(record.app, queue.appBundleID) else {
            throw RPCError.resource(.notFound, type: "transaction", name: id, "no transaction \(RPCError.echo(id)) in this queue")
        }
        guard QueueNames.same(record.account, queue.accountID) else {
            throw RPCError.resource(.permissionDenied, type: "transaction", name: id, "transaction \(RPCError.echo(id)) belongs to another account")
                .withReason("OTHER_ACCOUNT", domain: "storebus.payment_queue")
        }
        guard QueueNames.same(record.device, queue.deviceID) else {
            throw RPCError.resource(.notFound, type: "transaction", name: id, "no transaction \(RPCError.echo(id)) in this queue")
        }
        return record
    }

    static func actionName(_ action: Storebus_PaymentQueue_V1_DownloadAction) -> String {
        switch action {
        case .start: return "started"
        case .pause: return "paused"
        case .resume: return "resumed"
        case .cancel: return "cancelled"
        case .complete: return "completed"
        case .fail: return "failed"
        default: return "changed by an unknown action"
        }
    }
}
