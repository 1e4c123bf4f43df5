import Logging
import Metrics
import StoreBus
import StoreSchema
import SwiftProtobuf
import Synchronization
import ZeroMQ

/// An answer of EventLog/ReadEvents as a follower decodes it: the generic
/// `storebus.eventlog.v1.ReadEventsResponse` (payloads as google.protobuf.Struct), or a log's typed
/// page of the same JSON (the payment queue's `QueueEventPage`), which spares a follower turning
/// each payload's Struct back into JSON and then into its message.
public protocol EventLogPage: SwiftProtobuf.Message {
    associatedtype Record: EventLogRecord
    /// Events, oldest first: consecutive, unless read with topics.
    var events: [Record] { get }
    /// The newest committed position.
    var headSeq: UInt64 { get }
    /// The position the page read through (0 from a log that predates it: the last event's).
    var throughSeq: UInt64 { get }
}

/// One event of an ``EventLogPage``: its positions in the whole log and in its key.
public protocol EventLogRecord: Sendable {
    var seq: UInt64 { get }
    var keySeq: UInt64 { get }
}

extension Storebus_Eventlog_V1_ReadEventsResponse: EventLogPage {}
extension Storebus_Eventlog_V1_Event: EventLogRecord {}
extension Storebus_PaymentQueue_V1_QueueEventPage: EventLogPage {}
extension Storebus_PaymentQueue_V1_QueueEventPage: DirectJSONDecodable {
    /// Read by ``QueueEventPageJSON`` (the followers' pages, the gateway's reads of a queue), or
    /// left to swift-protobuf.
    public static func decodeDirectly(_ json: [UInt8]) -> Self? {
        QueueEventPageJSON.decode(json)
    }
}
extension Storebus_PaymentQueue_V1_QueueEventRecord: EventLogRecord {}

/// Follows a service's event log: reads it in pages by RPC, in order, from a position the consumer
/// keeps, and wakes early when a doorbell rings.
///
/// The follower never skips: every event it hands over has the position right after the previous
/// one. A page that does not continue the sequence is a gap; the follower logs it and reads again
/// from its position until the missing event is there. With topics (``Configuration/topics``) it
/// hands over only the events in them, in order, and moves its position over the others as the
/// log's pages say (`through_seq`). Doorbells only shorten the wait: with none, the follower still
/// reads every `idlePoll`. A consumer that stores the position reached, together with the effect,
/// and restarts from it, applies every event exactly once.
public final class EventFollower: Sendable {
    /// What to follow.
    public struct Configuration: Sendable {
        /// The log's name, as in its doorbells (for example `payment-queue`).
        public var log: String
        /// "" for the whole log (positions are `seq`), or one key (positions are `key_seq`).
        public var key: String
        /// The PUB endpoints of the service's doorbells; none means polling only.
        public var doorbellEndpoints: [String]
        /// Events per page. Default 256.
        public var pageSize: UInt32 = 256
        /// Longest wait without a doorbell before reading again. Default 1 s.
        public var idlePoll: Duration = .seconds(1)
        /// Pause after a failed read or a gap before trying again. Default 100 ms.
        public var retryDelay: Duration = .milliseconds(100)
        /// How long to let events gather after a doorbell before reading them, so that one read
        /// and one apply take the events of several purchases: a follower's cost per event falls
        /// at moderate rates, its lag grows by as much. For consumers that can wait (notifications,
        /// which Apple delivers seconds later), or whose callers wait for the position they need,
        /// which ends the window (``followPages(after:shard:as:quiet:gather:_:)``'s `gather`); zero
        /// (the default) reads at once.
        public var batchWindow: Duration = .zero
        /// Only the events in any of these topics of the log (none: every event).
        public var topics: [String]
        /// The followed log's topic names in the order of their bits, which its doorbells carry
        /// (``Doorbell/topics``): the payment queue's (``QueueTopic/names``), the one log here with
        /// topics. A run of doorbells for events in none of ``topics`` moves the position without
        /// a read.
        public var logTopics: [String] = QueueTopic.names
        /// Hear only the topic doorbells of ``topics`` (``Doorbell/topicFrames``), not every
        /// doorbell of the log: events in none of them wake nothing here, as the publisher drops
        /// them for this subscriber. The position then moves over such events only when a page is
        /// read: at a doorbell of an event in its topics, at the idle poll, or, with the `gather`
        /// of ``followPages(after:shard:as:quiet:gather:_:)``, as soon as a call waits for a
        /// position. For a single follower whose callers wait through `gather`, never for one
        /// whose every position others read as it is reached. Its publisher must ring topic
        /// doorbells (the payment queue from this version on). Default false; no effect without
        /// ``topics`` or with a key.
        public var topicDoorbells = false

        /// A configuration following `key` (or the whole log) of `log`, the events in `topics` only
        /// when given.
        public init(log: String, key: String = "", topics: [String] = [], doorbellEndpoints: [String]) {
            self.log = log
            self.key = key
            self.topics = topics
            self.doorbellEndpoints = doorbellEndpoints
        }

        /// The bits of ``topics`` among ``logTopics``; nil (every doorbell may bring one of them)
        /// without topics, for a key, or with a name the log does not list.
        var topicBits: EventTopics? {
            guard !topics.isEmpty, key.isEmpty, case .success(let bits) = EventTopics.named(topics, in: logTopics) else { return nil }
            return bits
        }
    }

    private let configuration: Configuration
    private let client: RPCClient
    private let logger: Logger
    private let bell: DoorbellListener?
    /// Whether `bell` hears only the topic doorbells of the follower's topics
    /// (``Configuration/topicDoorbells``).
    private let hearsTopicsOnly: Bool
    /// `storebus_event_follower_lag`: events of the log not yet applied, as of the last page read,
    /// labelled with the log and the following process (its logger's label).
    private let lag: Gauge

    /// A follower reading through `client` (connected to the service's RPC endpoints).
    public init(configuration: Configuration, client: RPCClient, context: ZeroMQ.Context, logger: Logger) throws {
        self.configuration = configuration
        self.client = client
        self.logger = logger
        lag = Gauge(label: "storebus_event_follower_lag", dimensions: [("log", configuration.log), ("follower", logger.label)])
        var topicsOnly = false
        if configuration.doorbellEndpoints.isEmpty {
            bell = nil
        } else {
            let topicBits = configuration.topicBits
            let prefixes: [[UInt8]]
            if !configuration.key.isEmpty {
                prefixes = [Doorbell.topic(log: configuration.log, key: configuration.key)]
            } else if configuration.topicDoorbells, let topicBits {
                prefixes = Doorbell.topicPrefixes(log: configuration.log, topics: topicBits)
                topicsOnly = true
            } else {
                prefixes = [Doorbell.topicPrefix(log: configuration.log)]
            }
            bell = try DoorbellListener(endpoints: configuration.doorbellEndpoints, prefixes: prefixes, context: context, topics: topicBits)
        }
        hearsTopicsOnly = topicsOnly
    }

    /// Reads events after `position` and hands each to `apply`, in order, until the task is cancelled
    /// or `apply` throws (which ends the follow with that error). Read failures are retried.
    ///
    /// Throws OUT_OF_RANGE when the log ends before `position`, the last event applied: the log is not
    /// the one the position came from (the service's database was replaced, by a backup or a fresh
    /// one, or the position was stored wrongly). Waiting would hand over nothing until the new log
    /// passed the old position, and then only its later events; the consumer decides instead, for
    /// example to rebuild what it keeps from position 0.
    public func follow(after position: UInt64, _ apply: (Storebus_Eventlog_V1_Event) async throws -> Void) async throws {
        try await followPages(after: position, as: Storebus_Eventlog_V1_ReadEventsResponse.self) { events, _ in
            for event in events { try await apply(event) }
        }
    }

    /// ``follow(after:_:)`` a page at a time, each answer decoded as `Page` (a log's typed page, see
    /// ``EventLogPage``), for a consumer that applies a page in one transaction: `apply` gets the new
    /// events of each page read and the position they bring the follower to (the last one's, or past
    /// it over events not in the follower's topics). Without topics it always gets events; with
    /// topics, a page may bring none and still move the position.
    ///
    /// Without a key, `shard` is the shard followed (0, the only one of a log that is not sharded).
    ///
    /// With topics and `quiet`, while it waits caught up, the doorbells of events in none of them
    /// move its position without a read or a wake-up: `quiet` hears each such move at once (from
    /// the doorbell listener's thread; keep it short), and `apply` hears of them, with no event, when
    /// the wait ends. Without `quiet` (a consumer whose every position others must see as soon as
    /// it is reached), each doorbell wakes it to read.
    ///
    /// `gather` waits out the batch window (``Configuration/batchWindow``) after a doorbell: by
    /// default a sleep; a consumer whose calls wait for positions ends it early when one does
    /// (``PositionWaiter/gather(_:upTo:)``).
    public func followPages<Page: EventLogPage>(
        after position: UInt64, shard: UInt32 = 0, as page: Page.Type, quiet: (@Sendable (UInt64) -> Void)? = nil,
        gather: (@Sendable (Duration) async -> Bool)? = nil, _ apply: ([Page.Record], _ through: UInt64) async throws -> Void
    ) async throws {
        var position = position
        let keyed = !configuration.key.isEmpty
        let filtered = !configuration.topics.isEmpty
        /// The position at which the last wait ended with a doorbell (nil: it timed out).
        var rangAt: UInt64?
        while !Task.isCancelled {
            let page: Page
            do {
                page = try await read(Page.self, after: position, shard: shard)
            } catch let error where error.code == .cancelled && Task.isCancelled {
                return
            } catch {
                logger.warning("Event log read failed; retrying", metadata: ["error": "\(error)", "queue.seq": "\(position)", "shard": "\(shard)"])
                try? await Task.sleep(for: configuration.retryDelay)
                continue
            }
            var gap = false
            var run: [Page.Record] = []
            var next = position
            for event in page.events {
                let at = keyed ? event.keySeq : event.seq
                if at <= next { continue } // already applied (overlapping page)
                // With topics the log leaves out what is in none of them; it says how far it read.
                guard at == next + 1 || filtered else {
                    logger.error("Gap in the event log; not skipping", metadata: ["expected": "\(next + 1)", "got": "\(at)"])
                    gap = true
                    break
                }
                run.append(event)
                next = at
            }
            if filtered && !gap && page.throughSeq > next { next = page.throughSeq }
            if next > position {
                try await apply(run, next)
                position = next
            }
            lag.record(page.headSeq > position ? page.headSeq - position : 0)
            if gap {
                try? await Task.sleep(for: configuration.retryDelay)
                continue
            }
            if position < page.headSeq { continue } // more pages
            if position > page.headSeq {
                logger.error("The event log ends before the follower's position", metadata: ["queue.seq": "\(position)", "head": "\(page.headSeq)"])
                throw RPCError(
                    .outOfRange,
                    "the \(configuration.log) event log\(keyed ? " of \(configuration.key)" : "") ends at \(page.headSeq), before position \(position) where this follower stands: the log was replaced, or the position is not from it"
                )
            }
            // Caught up: wait for a doorbell beyond our position, or poll after idlePoll.
            if let bell {
                // A doorbell beyond anything the log holds (a log restored from a backup, a stray
                // publisher) would end every wait at once: after a ring that brought nothing, read
                // no more often than every retryDelay.
                if rangAt == position { try? await Task.sleep(for: configuration.retryDelay) }
                // Meanwhile, events heard one by one, each in none of the follower's topics, are
                // pages that would bring none of them: the position moves past them without a read
                // (`quiet` tells whoever waits for it), and the wait goes on.
                if !keyed, let quiet { bell.park(shard: shard, at: position, quiet: quiet) }
                let rang: Bool
                if hearsTopicsOnly, let gather {
                    // Events of other topics ring nothing here: a call waiting for a position
                    // makes the follower read (the page says how far the log goes). It counts as
                    // a ring, so a call waiting for what no read brings (a position past the log's
                    // head) makes it read no more often than every retryDelay, as above.
                    let (at, idlePoll) = (position, configuration.idlePoll)
                    rang = await Self.first({ await bell.wait(beyond: at, keyed: keyed, shard: shard, timeout: idlePoll) }, { await gather(idlePoll) })
                } else {
                    rang = await bell.wait(beyond: position, keyed: keyed, shard: shard, timeout: configuration.idlePoll)
                }
                if !keyed, quiet != nil, let moved = bell.unpark(shard: shard), moved > position {
                    try await apply([], moved)
                    position = moved
                }
                rangAt = rang ? position : nil
                if rangAt != nil, configuration.batchWindow > .zero {
                    if let gather { _ = await gather(configuration.batchWindow) } else { try? await Task.sleep(for: configuration.batchWindow) }
                }
            } else {
                try? await Task.sleep(for: configuration.idlePoll)
            }
        }
    }

    /// Runs `a` and `b` at once, returns the answer of the first to return, and cancels the other.
    private static func first(_ a: @escaping @Sendable () async -> Bool, _ b: @escaping @Sendable () async -> Bool) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await a() }
            group.addTask { await b() }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// A follower's whole life: ``followPages(after:as:_:)`` from the position `start` reads (the
    /// consumer's own, committed with what it applied), until the task is cancelled; when the log
    /// ends before that position (the producer's database was replaced), `replaced` is told, so the
    /// consumer forgets its position, and the log is followed again from the position `start` then
    /// reads.
    public func followAlways<Page: EventLogPage>(
        as page: Page.Type, shard: UInt32 = 0, start: () async throws -> UInt64, quiet: (@Sendable (UInt64) -> Void)? = nil,
        gather: (@Sendable (Duration) async -> Bool)? = nil, _ apply: ([Page.Record], _ through: UInt64) async throws -> Void,
        replaced: (RPCError) async throws -> Void
    ) async throws {
        while !Task.isCancelled {
            do {
                try await followPages(after: try await start(), shard: shard, as: page, quiet: quiet, gather: gather, apply)
                return
            } catch let error as RPCError where error.code == .outOfRange {
                try await replaced(error)
            }
        }
    }

    /// How many shards the log has (1 when it is not sharded), as its service answers; read failures
    /// are retried until the task is cancelled.
    public func shardCount() async throws -> UInt32 {
        while true {
            try Task.checkCancellation()
            do {
                let body = try JSONCodec.encode(Storebus_Eventlog_V1_ReadEventsRequest.with { $0.limit = 1 })
                let response = try await client.callRaw(
                    path: Storebus_Eventlog_V1_EventLog.readEvents.path, idempotent: true, body: body, options: CallOptions(timeout: .seconds(5)))
                guard response.code == .ok else { throw response.error ?? RPCError(response.code, "reading the \(configuration.log) event log failed") }
                let page = try JSONCodec.decode(Storebus_Eventlog_V1_ReadEventsResponse.self, from: response.body)
                return max(1, page.shardCount)
            } catch let error as RPCError where error.code == .cancelled && Task.isCancelled {
                throw CancellationError()
            } catch {
                logger.warning("Asking the event log its shards failed; retrying", metadata: ["log": "\(configuration.log)", "error": "\(error)"])
                try await Task.sleep(for: configuration.retryDelay)
            }
        }
    }

    /// Runs `follow` for every shard of the log at once (shard 0 alone when it is not sharded),
    /// once the log has said how many it has (told to `found` first), until all of them return or
    /// one throws.
    public func followEveryShard(found: (UInt32) -> Void = { _ in }, _ follow: @escaping @Sendable (UInt32) async throws -> Void) async throws {
        let count = try await shardCount()
        found(count)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for shard in 0..<count {
                group.addTask { try await follow(shard) }
            }
            try await group.waitForAll()
        }
    }

    /// A page of the log after `position` (in `shard`, without a key), decoded as `Page`.
    private func read<Page: EventLogPage>(_ type: Page.Type, after position: UInt64, shard: UInt32) async throws(RPCError) -> Page {
        let body = try JSONCodec.encode(
            Storebus_Eventlog_V1_ReadEventsRequest.with {
                $0.key = configuration.key
                $0.afterSeq = position
                $0.limit = configuration.pageSize
                $0.topics = configuration.topics
                if configuration.key.isEmpty { $0.shard = shard }
            })
        let response = try await client.callRaw(
            path: Storebus_Eventlog_V1_EventLog.readEvents.path, idempotent: true, body: body, options: CallOptions(timeout: .seconds(5))
        )
        guard response.code == .ok else { throw response.error ?? RPCError(response.code, "reading the \(configuration.log) event log failed") }
        return try JSONCodec.decode(Page.self, from: response.body)
    }

    /// Closes the doorbell subscription.
    public func shutdown() async {
        await bell?.shutdown()
    }
}

/// A SUB socket on a reactor that remembers the highest position announced and wakes waiters.
final class DoorbellListener: Sendable {
    /// The two positions a doorbell announces: the log's and its key's.
    enum Position: Hashable, Sendable {
        /// A shard's position (the whole log's, shard 0, when it is not sharded).
        case seq(UInt32)
        case keySeq
    }

    private let reactor: Reactor
    private let announced = PositionWaiter<Position>()
    /// The follower's topics; nil: every doorbell wakes it.
    private let topics: EventTopics?
    /// Per shard, a follower caught up and waiting (``park(shard:at:quiet:)``): its position, moved
    /// on by doorbells of events in none of its topics, and what it is told of each such move.
    private let parked = Mutex<[UInt32: Parked]>([:])

    private struct Parked {
        var position: UInt64
        var quiet: @Sendable (UInt64) -> Void
    }

    init(endpoints: [String], prefixes: [[UInt8]], context: ZeroMQ.Context, topics: EventTopics? = nil) throws {
        reactor = Reactor(name: "sb-doorbell-sub", context: context)
        self.topics = topics
        try DoorbellSubscription.start(endpoints: endpoints, prefixes: prefixes, context: context, reactor: reactor) { [weak self] doorbell in
            self?.heard(doorbell)
        }
    }

    /// A doorbell for the event right after a parked follower's position, in none of its topics,
    /// moves that position on without waking it (the page it would read brings nothing); any other
    /// (one it may have to read, or one after a doorbell lost) wakes it.
    private func heard(_ doorbell: Doorbell) {
        if let topics, let eventTopics = doorbell.topics, eventTopics.isDisjoint(with: topics) {
            let quiet = parked.withLock { parked -> (@Sendable (UInt64) -> Void)? in
                guard var follower = parked[doorbell.shard], doorbell.seq == follower.position + 1 else { return nil }
                follower.position = doorbell.seq
                parked[doorbell.shard] = follower
                return follower.quiet
            }
            if let quiet {
                quiet(doorbell.seq)
                announced.advance(.keySeq, to: doorbell.keySeq)
                return
            }
        }
        announced.advance(.seq(doorbell.shard), to: doorbell.seq)
        announced.advance(.keySeq, to: doorbell.keySeq)
    }

    /// Parks a follower of `shard` caught up at `position` until ``unpark(shard:)``: doorbells of
    /// events in none of its topics move its position on, each move told to `quiet` (on the
    /// listener's thread), without ending its wait. Nothing happens without topics.
    func park(shard: UInt32, at position: UInt64, quiet: @escaping @Sendable (UInt64) -> Void) {
        guard topics != nil else { return }
        parked.withLock { $0[shard] = Parked(position: position, quiet: quiet) }
    }

    /// Ends the parking of `shard`'s follower: the position the doorbells moved it to, or nil.
    func unpark(shard: UInt32) -> UInt64? {
        parked.withLock { $0.removeValue(forKey: shard)?.position }
    }

    /// Returns when a doorbell beyond `position` has rung (maybe already): true; or after `timeout`,
    /// on cancellation or at shutdown: false.
    @discardableResult
    func wait(beyond position: UInt64, keyed: Bool, shard: UInt32 = 0, timeout: Duration) async -> Bool {
        await announced.wait(keyed ? .keySeq : .seq(shard), beyond: position, timeout: timeout)
    }

    func shutdown() async {
        announced.close()
        reactor.stop()
        await reactor.join()
    }
}
