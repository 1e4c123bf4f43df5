import StoreBus
import ZeroMQ

/// A doorbell: the announcement, after a commit, that an event log has grown.
///
/// On the wire (a PUB socket), two frames: the topic `<log>/<key>\n`, then `SB1E\n<seq>\n<key seq>`
/// (with `\n<shard>` after them when the shard is not 0, and `\n<shard>\n<topics>` when the event's
/// topics are known: their bits, ``EventTopics``, as a signed decimal); and a third, the event itself
/// as ReadEvents returns it, when it is small (``maxEventBytes``).
/// A subscriber to `<log>/` hears every key; a subscriber to `<log>/<key>\n` hears one. Doorbells may
/// be lost (PUB drops when a subscriber is slow or not yet connected); followers never rely on them for
/// correctness, only to learn sooner that there is something to read (and, with the event, what).
public struct Doorbell: Sendable, Equatable {
    /// The log's name, for example `payment-queue`.
    public var log: String
    /// The key the event belongs to.
    public var key: String
    /// The event's position in its shard (the whole log, when it is not sharded).
    public var seq: UInt64
    /// Its position within the key.
    public var keySeq: UInt64
    /// The shard (0 when the log is not sharded).
    public var shard: UInt32
    /// The topics the event is filed under; nil when the publisher does not say (then it may be in any).
    public var topics: EventTopics?
    /// The committed event as `storebus.eventlog.v1.Event` JSON, exactly as ReadEvents returns it;
    /// nil when it is larger than ``maxEventBytes`` (read it instead).
    public var event: [UInt8]?

    /// Largest event carried in a doorbell. A publisher queues up to 10,000 doorbells for a slow
    /// subscriber and a subscriber buffers as many, so this bounds both to about 40 MiB; a payment
    /// queue event of one transaction is 1 to 2 KiB (a restore's or a large requestData's is read).
    public static let maxEventBytes = 4 * 1024

    /// Creates a doorbell; an `event` over ``maxEventBytes`` is left out.
    public init(log: String, key: String, seq: UInt64, keySeq: UInt64, shard: UInt32 = 0, topics: EventTopics? = nil, event: [UInt8]? = nil) {
        self.log = log
        self.key = key
        self.seq = seq
        self.keySeq = keySeq
        self.shard = shard
        self.topics = topics
        self.event = event.flatMap { $0.count <= Self.maxEventBytes ? $0 : nil }
    }

    /// The subscription prefix for every key of a log.
    public static func topicPrefix(log: String) -> [UInt8] {
        Array("\(log)/".utf8)
    }

    /// The subscription prefix for one key of a log.
    public static func topic(log: String, key: String) -> [UInt8] {
        Array("\(log)/\(key)\n".utf8)
    }

    /// The subscription prefix for every key's doorbells of events in topic `bit` (0 to 62) of a
    /// log (``topicFrames``).
    public static func topicPrefix(log: String, bit: Int) -> [UInt8] {
        Array("\(log)#\(bit)/".utf8)
    }

    /// The subscription prefix for every key's doorbells of events the log files under every
    /// topic (``EventTopics/all``: an event its writer does not sort).
    public static func everyTopicPrefix(log: String) -> [UInt8] {
        Array("\(log)#*/".utf8)
    }

    /// The prefixes a follower of `topics` subscribes to so that it hears the topic doorbells of
    /// events in any of them, and of events filed under every topic.
    public static func topicPrefixes(log: String, topics: EventTopics) -> [[UInt8]] {
        bits(of: topics).map { topicPrefix(log: log, bit: $0) } + [everyTopicPrefix(log: log)]
    }

    /// The bits set in `topics`, lowest first (bit 63, the sign, is no topic).
    private static func bits(of topics: EventTopics) -> [Int] {
        var rest = topics.rawValue & Int64.max
        var bits: [Int] = []
        while rest != 0 {
            bits.append(rest.trailingZeroBitCount)
            rest &= rest - 1
        }
        return bits
    }

    /// The topic doorbells of this event, sent beside its doorbell when its topics are known: one
    /// message per topic it is filed under, topic `<log>#<bit>/<key>\n` (`<log>#*/<key>\n` for one
    /// filed under every topic), then the doorbell's positions frame; never the event. A follower
    /// that reads a few topics subscribes to theirs and is not woken by the rest of the log
    /// (publishers filter by prefix before sending). None for an event in no topic, or when the
    /// topics are not known (a log that files none).
    public var topicFrames: [[[UInt8]]] {
        topicFrames(positions: positions)
    }

    /// Every message this doorbell is published as: its frames, then its topic doorbells, the
    /// positions frame written once for all of them.
    public var messages: [[[UInt8]]] {
        let positions = self.positions
        return [frames(positions: positions)] + topicFrames(positions: positions)
    }

    /// ``topicFrames`` with `positions`, this doorbell's second frame.
    private func topicFrames(positions: [UInt8]) -> [[[UInt8]]] {
        guard let topics, topics.rawValue != 0 else { return [] }
        let keyLine = Array("\(key)\n".utf8)
        guard topics != .all else { return [[Self.everyTopicPrefix(log: log) + keyLine, positions]] }
        return Self.bits(of: topics).map { [Self.topicPrefix(log: log, bit: $0) + keyLine, positions] }
    }

    /// The second frame: `SB1E`, the positions, and the shard and topics when there are any.
    private var positions: [UInt8] {
        var positions = WireProtocol.doorbellTag + [0x0A] + Frames.decimal(seq) + [0x0A] + Frames.decimal(keySeq)
        if shard != 0 || topics != nil { positions += [0x0A] + Frames.decimal(UInt64(shard)) }
        if let topics { positions += [0x0A] + Array(String(topics.rawValue).utf8) }
        return positions
    }

    /// The frames sent on the PUB socket.
    public var frames: [[UInt8]] {
        frames(positions: positions)
    }

    /// ``frames`` with `positions`, this doorbell's second frame.
    private func frames(positions: [UInt8]) -> [[UInt8]] {
        let bell = [Doorbell.topic(log: log, key: key), positions]
        guard let event else { return bell }
        return bell + [event]
    }

    /// Parses frames received on a SUB socket: two frames, or three with the event.
    public init?(frames: [[UInt8]]) {
        guard frames.count == 2 || frames.count == 3, frames[0].last == 0x0A, let slash = frames[0].firstIndex(of: 0x2F) else { return nil }
        let lines = Frames.lines(frames[1])
        guard (3...5).contains(lines.count), lines[0].elementsEqual(WireProtocol.doorbellTag),
            let seq = Frames.parseDecimal(lines[1]), let keySeq = Frames.parseDecimal(lines[2])
        else { return nil }
        if lines.count >= 4 {
            guard let shard = Frames.parseDecimal(lines[3]), shard <= UInt64(UInt32.max) else { return nil }
            self.shard = UInt32(shard)
        } else {
            self.shard = 0
        }
        if lines.count == 5 {
            guard let bits = Int64(String(decoding: lines[4], as: UTF8.self)) else { return nil }
            topics = EventTopics(rawValue: bits)
        } else {
            topics = nil
        }
        // A topic doorbell's `<log>#<topic>`: the log is the part before `#`.
        let logEnd = frames[0][..<slash].firstIndex(of: UInt8(ascii: "#")) ?? slash
        self.log = String(decoding: frames[0][..<logEnd], as: UTF8.self)
        self.key = String(decoding: frames[0][(slash + 1)..<(frames[0].count - 1)], as: UTF8.self)
        self.seq = seq
        self.keySeq = keySeq
        self.event = frames.count == 3 && frames[2].count <= Self.maxEventBytes ? frames[2] : nil
    }
}

/// Rings doorbells on a PUB socket owned by a reactor thread: its own, or one it shares with the
/// process's RPC server.
public final class DoorbellPublisher: Sendable {
    /// The endpoints bound, wildcard ports resolved.
    public let boundEndpoints: [String]
    private let reactor: Reactor
    /// Whether the reactor is the publisher's own (stopped by ``shutdown()``) or shared.
    private let ownsReactor: Bool
    private let socket: LoopBound<Socket>
    /// The reactor's stop action that closes the socket (forgotten when ``shutdown()`` closes it first).
    private let stopAction: LoopBound<StopActionBox>

    /// Binds the PUB socket; throws ``StartupError`` naming an endpoint that cannot be bound.
    ///
    /// With a `reactor` (a service host's), the socket lives on that reactor, which its owner starts
    /// and stops; the socket closes when it stops or at ``shutdown()``, whichever comes first.
    /// A commit's doorbells and the answers to its callers then go out with one wake-up of that
    /// thread. Without one, the publisher runs a reactor of its own. A publisher on a shared reactor
    /// that is never started keeps its socket open until the process ends. Throws ``StartupError``
    /// when the shared reactor has already stopped.
    public init(endpoints: [String], context: ZeroMQ.Context, reactor shared: Reactor? = nil) throws {
        let socket: Socket
        var bound: [String] = []
        do {
            socket = try Socket(context: context, type: .pub)
            // Drop rather than queue without bound when a subscriber is slow: the log is the truth.
            try socket.set(.sendHighWaterMark(10_000))
            try socket.set(.heartbeat(interval: 2000, timeout: 6000, ttl: 6000))
        } catch {
            throw StartupError("cannot create the doorbell socket: \(error.message)")
        }
        for endpoint in endpoints {
            do {
                try socket.bind(endpoint)
                bound.append(socket.lastEndpoint)
            } catch {
                socket.close()
                throw StartupError("cannot publish events on \(endpoint): \(error.message)")
            }
        }
        boundEndpoints = bound
        reactor = shared ?? Reactor(name: "sb-doorbell", context: context)
        ownsReactor = shared == nil
        self.socket = LoopBound(socket, on: reactor)
        stopAction = LoopBound(StopActionBox(), on: reactor)
        let accepted = reactor.execute { [box = self.socket, stopAction, reactor] in
            let socket = box.value
            guard !socket.isClosed else { return }
            stopAction.value.id = reactor.onStop { socket.close() }
        }
        guard accepted else {
            socket.close()
            throw StartupError("cannot publish events on \(bound.joined(separator: ", ")): the reactor has stopped")
        }
        if ownsReactor { reactor.start() }
    }

    /// Announces committed events. Never blocks; a doorbell that cannot be sent is dropped.
    public func ring(_ doorbells: [Doorbell]) {
        guard !doorbells.isEmpty else { return }
        reactor.execute { [socket] in
            // A topic doorbell no subscriber has the prefix of is dropped by the socket at once.
            for doorbell in doorbells {
                for frames in doorbell.messages { try? socket.value.send(frames: frames, dontWait: true) }
            }
        }
    }

    /// Closes the socket and stops the reactor (a shared reactor keeps running).
    public func shutdown() async {
        guard ownsReactor else {
            // Closing twice is harmless: the reactor's stop action may have closed it already.
            _ = await reactor.perform { [socket, stopAction, reactor] in
                socket.value.close()
                if let id = stopAction.value.id { reactor.removeStopAction(id) }
                stopAction.value.id = nil
            }
            return
        }
        reactor.stop()
        await reactor.join()
    }
}

/// A stop action's identifier, set on the reactor's thread once registered.
final class StopActionBox {
    var id: StopActionID?
}
