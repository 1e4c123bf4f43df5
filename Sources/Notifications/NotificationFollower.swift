import Foundation
import Logging
import ServiceLifecycle
import StoreBus
import StoreBusServer
import StoreBusStorage
import StoreSchema
import SwiftProtobuf
import Synchronization

/// Follows the payment queue's log into the notification logs, a page at a time: the rules say
/// which notifications the page calls for, the receipt service signs them (once its own copy of the
/// log has reached the page), and the signed notifications are appended with the page's position and
/// what the rules learnt, in one transaction. Whatever stops the process, a page is appended once:
/// done again, it gives the same notifications (their UUIDs come from the events' positions).
struct NotificationFollower: Service {
    /// The events the rules (``NotificationRules``) make notifications of.
    static let topics = [QueueTopic.completed, .refunded, .subscriptions].map(\.rawValue)
    let follower: EventFollower
    let log: FollowedLog
    let store: NotificationStore
    let receipt: RPCClient
    let logger: Logger

    /// Follows every shard of the log (the whole log, when it is not sharded), each to its own
    /// position, at once.
    func run() async throws {
        try await cancelWhenGracefulShutdown {
            try await follower.followEveryShard { shard in try await follow(shard: shard) }
        }
        await follower.shutdown()
    }

    func follow(shard: UInt32) async throws {
        let (log, logger) = (log.shard(shard), logger)
        /// The position stored, as this follower last read or moved it: each page moves it on
        /// condition that no other instance did meanwhile (FollowedLog.Moved otherwise).
        var stored: UInt64 = 0
        try await follower.followAlways(
            as: Storebus_PaymentQueue_V1_QueueEventPage.self,
            shard: shard,
            start: {
                stored = try await log.position()
                return stored
            },
            // Events in none of its topics (two of a purchase's three) are slept through.
            quiet: { _ in },
            { records, through in
                if try await apply(records, after: stored, through: through, shard: shard) { stored = through }
            },
            replaced: { error in
                // The notifications already appended stay: a backend has seen them. The rules'
                // knowledge goes, and the new log is read from its start.
                logger.warning("The payment queue's event log was replaced; following it again from its start", metadata: ["error": "\(error.message)"])
                try await log.forget { db in
                    try db.execute(cached: "DELETE FROM nt_subscription")
                    try db.execute(cached: "DELETE FROM nt_noted")
                }
            })
    }

    /// One page: its notifications planned, signed, appended, and the position moved from `stored`
    /// to `through` (refused, ``FollowedLog/Moved``, when another instance moved it). A page with no
    /// event moves it in memory only (after a restart the log steps over them again): false.
    @discardableResult
    func apply(_ records: [Storebus_PaymentQueue_V1_QueueEventRecord], after stored: UInt64, through: UInt64, shard: UInt32 = 0) async throws -> Bool {
        guard let last = records.last?.seq else { return false }
        let before = try await store.knowledge(for: records)
        var rules = before
        var intents: [NotificationIntent] = []
        // Each notification's event's commit time, for the lag metric.
        var committed: [Int64] = []
        for record in records where record.type == Storebus_PaymentQueue_V1_QueueEvent.protoMessageName {
            let planned = rules.intents(for: record.payload, seq: record.seq, shard: shard)
            intents += planned
            committed += Array(repeating: record.time.milliseconds, count: planned.count)
        }
        let signedDate = EpochMilliseconds.now
        let signing = ContinuousClock.now
        let (payloads, environment) = intents.isEmpty ? ([], "") : try await sign(intents, signedDate: signedDate, minSeq: last, shard: shard)
        let signed = ContinuousClock.now
        let notifications = zip(intents, payloads).map { intent, payload in
            Storebus_Notifications_V1_Notification.with {
                $0.notificationUuid = intent.uuid
                $0.notificationType = intent.type
                $0.subtype = intent.subtype
                $0.signedPayload = payload
                $0.signedDate = Google_Protobuf_Timestamp(milliseconds: signedDate)
                $0.accountID = intent.account
                $0.transactionID = intent.transactionID
                $0.originalTransactionID = intent.originalTransactionID
                $0.appBundleID = intent.app
            }
        }
        let learnt = rules
        let heads = LockedHeads()
        let (webhooks, headers) = (store.configuredWebhooks, store.headers)
        try await log.shard(shard).apply(after: stored, through: through) { db in
            heads.set(try NotificationStore.write(db, learnt: learnt, since: before, notifications: notifications, webhooks: webhooks, environment: environment, headers: headers))
        }
        store.advance(heads.value)
        logger.debug(
            "Applied a page of the payment queue's log",
            metadata: [
                "events": "\(records.count)", "notifications": "\(notifications.count)", "last.seq": "\(last)",
                "sign.ms": "\((signed - signing).wireMilliseconds)", "append.ms": "\((ContinuousClock.now - signed).wireMilliseconds)"
            ])
        if !notifications.isEmpty {
            NotificationMetrics.appended.increment(by: notifications.count)
            let appended = EpochMilliseconds.now
            for time in committed { NotificationMetrics.appendLag.recordMilliseconds(max(0, appended - time)) }
        }
        return true
    }

    /// The signed payloads of `intents`, from the receipt service, tried again (with a growing pause)
    /// while it cannot answer: the log waits, and loses nothing.
    func sign(_ intents: [NotificationIntent], signedDate: Int64, minSeq: UInt64, shard: UInt32 = 0) async throws -> (payloads: [String], environment: String) {
        let request = Storebus_Receipt_V1_SignNotificationsRequest.with {
            $0.minSeq = minSeq
            $0.shard = shard
            $0.notifications = intents.map { intent in
                .with {
                    $0.notificationUuid = intent.uuid
                    $0.notificationType = intent.type
                    $0.subtype = intent.subtype
                    $0.appBundleID = intent.app
                    $0.accountID = intent.account
                    $0.transactionID = intent.transactionID
                    $0.originalTransactionID = intent.subscription ? intent.originalTransactionID : ""
                    $0.signedDateMs = signedDate
                }
            }
        }
        var pause = Duration.milliseconds(100)
        while true {
            do {
                let method = Storebus_Receipt_V1_Receipt.signNotifications
                let answer = try await receipt.callRaw(
                    path: method.path, idempotent: method.idempotent, body: try JSONCodec.encode(request), options: CallOptions(timeout: .seconds(10)))
                if let error = answer.error { throw error }
                let response = try SignedPayloadsJSON.decode(answer.body)
                guard response.signedPayloads.count == intents.count else {
                    throw RPCError(.internalError, "the receipt service signed \(response.signedPayloads.count) notifications of \(intents.count)")
                }
                return (response.signedPayloads, response.environment)
            } catch {
                try Task.checkCancellation()
                logger.warning("The receipt service did not sign notifications; trying again", metadata: ["error": "\(error)", "pause": "\(pause)"])
                try await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(5))
            }
        }
    }
}

/// The heads a write transaction reached, handed out of its closure.
private final class LockedHeads: Sendable {
    private let heads = Mutex<[String: UInt64]>([:])
    func set(_ value: [String: UInt64]) { heads.withLock { $0 = value } }
    var value: [String: UInt64] { heads.withLock { $0 } }
}
