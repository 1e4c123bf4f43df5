import Foundation
import StoreBus
import StoreBusServer
import StoreBusTesting
import StoreSchema
import Testing

@testable import Gateway

/// A doorbell of the payment queue's log carrying its event, as the payment queue rings it.
private func bell(_ seq: UInt64, key: String, _ keySeq: UInt64, id: String = "t", carried: Bool = true) throws -> Doorbell {
    let record = Storebus_PaymentQueue_V1_QueueEventRecord.with {
        $0.seq = seq
        $0.key = key
        $0.keySeq = keySeq
        $0.type = "storebus.payment_queue.v1.QueueEvent"
        $0.payload.updatedTransactions.transactions = [
            .with {
                $0.transactionIdentifier = "\(id)\(keySeq)"; $0.transactionState = .purchased
            }
        ]
    }
    return Doorbell(log: "payment-queue", key: key, seq: seq, keySeq: keySeq, event: carried ? try JSONCodec.encode(record) : nil)
}

/// The callbacks of a lookup, decoded.
private func callbacks(_ lookup: RecentEvents.Lookup) -> [Storebus_Gateway_V1_ObserverEvent]? {
    guard case .events(let events, _) = lookup else { return nil }
    return events.map { try! JSONCodec.decode(Storebus_Gateway_V1_ObserverEvent.self, from: $0) }
}

private func seqs(_ lookup: RecentEvents.Lookup) -> [UInt64]? {
    callbacks(lookup)?.map(\.seq)
}

@Suite("Gateway: events kept from doorbells")
struct RecentEventsTests {
    @Test("consecutive events after a position, at most the limit; caught up at the newest; unknown before the first kept")
    func lookups() throws {
        let recent = RecentEvents()
        recent.heard(try bell(1, key: "a", 1))
        recent.heard(try bell(2, key: "b", 1))
        recent.heard(try bell(3, key: "a", 2))
        recent.heard(try bell(4, key: "a", 3))
        #expect(seqs(recent.lookup(key: "a", after: 0, limit: 64)) == [1, 2, 3])
        #expect(seqs(recent.lookup(key: "a", after: 1, limit: 1)) == [2])
        #expect(
            callbacks(recent.lookup(key: "a", after: 1, limit: 64)) == [
                GatewayHandlers.callback(try JSONCodec.decode(Storebus_PaymentQueue_V1_QueueEventRecord.self, from: bell(3, key: "a", 2).event!)),
                GatewayHandlers.callback(try JSONCodec.decode(Storebus_PaymentQueue_V1_QueueEventRecord.self, from: bell(4, key: "a", 3).event!))
            ], "the callbacks the log's events make")
        guard case .events(_, let newest) = recent.lookup(key: "a", after: 1, limit: 64) else { return }
        #expect(newest == 3)
        #expect(recent.lookup(key: "a", after: 3, limit: 64) == .caughtUp)
        #expect(recent.lookup(key: "a", after: 7, limit: 64) == .unknown, "ahead of anything heard")
        #expect(recent.lookup(key: "c", after: 0, limit: 64) == .unknown, "a queue never heard")
    }

    @Test("a lost doorbell (a jump in the log's seq) drops everything; runs grow again from the next")
    func lostDoorbell() throws {
        let recent = RecentEvents()
        recent.heard(try bell(1, key: "a", 1))
        recent.heard(try bell(2, key: "b", 1))
        // seq 3 (key b, 2) is lost
        recent.heard(try bell(4, key: "a", 2))
        #expect(recent.lookup(key: "b", after: 1, limit: 64) == .unknown, "b's newest is unknown: not caught up")
        #expect(recent.lookup(key: "a", after: 0, limit: 64) == .unknown)
        #expect(seqs(recent.lookup(key: "a", after: 1, limit: 64)) == [2])
    }

    @Test("a doorbell without its event ends its queue's run; a gap within a queue starts a new run")
    func uncarriedEvents() throws {
        let recent = RecentEvents()
        recent.heard(try bell(1, key: "a", 1))
        recent.heard(try bell(2, key: "a", 2, carried: false))
        #expect(recent.lookup(key: "a", after: 1, limit: 64) == .unknown, "event 2 must be read")
        recent.heard(try bell(3, key: "a", 3))
        #expect(recent.lookup(key: "a", after: 1, limit: 64) == .unknown)
        #expect(seqs(recent.lookup(key: "a", after: 2, limit: 64)) == [3])
    }

    @Test("a doorbell heard twice changes nothing; the same position with other content (a new log) drops everything")
    func duplicatesAndNewLogs() throws {
        let recent = RecentEvents()
        recent.heard(try bell(1, key: "a", 1))
        recent.heard(try bell(2, key: "a", 2))
        recent.heard(try bell(2, key: "a", 2))
        recent.heard(try bell(1, key: "a", 1))
        #expect(seqs(recent.lookup(key: "a", after: 0, limit: 64)) == [1, 2])
        // The database was replaced: its first event has seq 1 and key seq 1 again, with other content.
        recent.heard(try bell(1, key: "a", 1, id: "new"))
        guard case .events(let events, let newest) = recent.lookup(key: "a", after: 0, limit: 64) else {
            Issue.record("the new log's event was not kept")
            return
        }
        #expect(events.map { try! JSONCodec.decode(Storebus_Gateway_V1_ObserverEvent.self, from: $0).updatedTransactions.transactions.first?.transactionIdentifier } == ["new1"])
        #expect(newest == 1)
        // And a read of the log showing a head below what is kept drops everything.
        recent.heard(try bell(2, key: "a", 2, id: "new"))
        recent.check(key: "a", logHead: 1)
        #expect(recent.count == 0)
    }

    @Test("memory is bounded: the oldest events go first, and a queue keeps at most its share")
    func bounded() throws {
        let size = try bell(1, key: "k0", 1).event!.count
        let recent = RecentEvents(capacityBytes: size * 100, eventsPerQueue: 8)
        var seq: UInt64 = 0
        for round in 1...20 {
            for key in 0..<10 {
                seq += 1
                recent.heard(try bell(seq, key: "k\(key)", UInt64(round)))
            }
        }
        #expect(recent.count <= 80, "eight per queue at most")
        #expect(seqs(recent.lookup(key: "k3", after: 12, limit: 64)) == Array(13...20))
        #expect(recent.lookup(key: "k3", after: 11, limit: 64) == .unknown, "older than kept")
        let small = RecentEvents(capacityBytes: size * 10 + size / 2, eventsPerQueue: 8)
        seq = 0
        for round in 1...5 {
            for key in 0..<10 {
                seq += 1
                small.heard(try bell(seq, key: "k\(key)", UInt64(round)))
            }
        }
        #expect(small.count <= 10, "the byte bound holds")
        #expect(seqs(small.lookup(key: "k9", after: 4, limit: 64)) == [5], "the newest stay")
    }

    @Test("bookkeeping of events no longer kept stays proportional to the events kept")
    func bookkeepingIsBounded() async throws {
        let recent = RecentEvents(capacityBytes: 1 << 30, eventsPerQueue: 128)
        // 31,000 doorbells take seconds in a debug build: on a thread of their own, not one of the
        // two of the cooperative pool that the SDK tests of this process wait on.
        try await onThread("recent-events-bookkeeping") {
            var seq: UInt64 = 0
            for key in 0..<1000 {
                seq += 1
                recent.heard(try bell(seq, key: "idle\(key)", 1))
            }
            for keySeq in 1...30_000 {
                seq += 1
                recent.heard(try bell(seq, key: "busy", UInt64(keySeq)))
            }
        }
        #expect(recent.count == 1128)
        #expect(recent.orderLength <= 2 * 1128 + 1025, "\(recent.orderLength) entries for \(recent.count) events")
        #expect(seqs(recent.lookup(key: "busy", after: 29_990, limit: 64)) == Array(29_991...30_000))
    }

    @Test("doorbell frames: two without the event, three with it; a large event is left out")
    func doorbellFrames() throws {
        let carried = try bell(5, key: "a|b|c", 2)
        #expect(carried.frames.count == 3)
        #expect(Doorbell(frames: carried.frames) == carried)
        let plain = Doorbell(log: "payment-queue", key: "a|b|c", seq: 5, keySeq: 2)
        #expect(plain.frames.count == 2)
        #expect(Doorbell(frames: plain.frames) == plain)
        let large = Doorbell(log: "payment-queue", key: "k", seq: 1, keySeq: 1, event: [UInt8](repeating: 0x20, count: Doorbell.maxEventBytes + 1))
        #expect(large.event == nil && large.frames.count == 2)
        #expect(Doorbell(frames: plain.frames + [[], []]) == nil, "four frames")
        // Topics: after the shard, which is then written even when 0; none, some, or all of them
        for topics: EventTopics in [[], QueueTopic.completed.bit, [QueueTopic.finished.bit, QueueTopic.downloads.bit], .all] {
            let filed = Doorbell(log: "payment-queue", key: "k", seq: 9, keySeq: 4, topics: topics)
            #expect(Array(filed.frames[1].split(separator: 0x0A).dropFirst(3).map { String(decoding: $0, as: UTF8.self) }) == ["0", String(topics.rawValue)])
            #expect(Doorbell(frames: filed.frames) == filed)
        }
        #expect(Doorbell(frames: [Array("payment-queue/k\n".utf8), Array("SB1E\n9\n4\n0\nx".utf8)]) == nil, "topics not a number")
        #expect(Doorbell(frames: [Array("payment-queue/k\n".utf8), Array("SB1E\n9\n4\n3".utf8)])?.topics == nil, "a sharded doorbell without topics")
    }
}
