import Foundation
import StoreBus
import StoreBusServer
import Synchronization
import Testing
import ZeroMQ

@Suite("Doorbell board: parked waits")
struct DoorbellBoardTests {
    @Test("a wait ends at its timeout, at a doorbell of its key past its position, at cancellation, or at shutdown, and leaves no waiter behind", .timeLimit(.minutes(1)))
    func waitsEnd() async throws {
        let context = try ZeroMQ.Context()
        let publisher = try DoorbellPublisher(endpoints: ["tcp://127.0.0.1:*"], context: context)
        let heard = Mutex<[String]>([])
        let board = try DoorbellBoard(
            endpoints: publisher.boundEndpoints, log: "test", context: context,
            heard: { doorbell in
                heard.withLock { $0.append(doorbell.key) }
            })
        // Rings `key` until the board has heard it: a subscription's first doorbells can be lost
        // while it connects; once one is heard, every doorbell rung before it has been handled.
        func ringUntilHeard(_ key: String) async throws {
            for seq in 1...500 where !heard.withLock({ $0.contains(key) }) {
                publisher.ring([Doorbell(log: "test", key: key, seq: UInt64(seq), keySeq: UInt64(seq))])
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(heard.withLock { $0.contains(key) })
        }
        try await ringUntilHeard("connected")
        // Bounds on waits that must end early are loose (the whole suite runs at once meanwhile).
        let early = Duration.seconds(10)

        // Nothing rings: the wait lasts its timeout.
        var started = ContinuousClock.now
        await board.wait(board.ticket(key: "quiet", beyond: 0), timeout: .milliseconds(150))
        var waited = started.duration(to: .now)
        #expect(waited >= .milliseconds(150) && waited < early, "\(waited)")
        #expect(board.waiting == 0)

        // A doorbell of another key, or of this key at the position already seen, does not end it.
        let ticket = board.ticket(key: "k", beyond: 5)
        publisher.ring([
            Doorbell(log: "test", key: "other", seq: 1, keySeq: 9),
            Doorbell(log: "test", key: "k", seq: 2, keySeq: 5)
        ])
        try await ringUntilHeard("marker")
        started = ContinuousClock.now
        await board.wait(ticket, timeout: .milliseconds(200))
        #expect(started.duration(to: .now) >= .milliseconds(200), "woken by a doorbell it does not wait for")
        // One past the position does, before its timeout.
        let next = board.ticket(key: "k", beyond: 5)
        started = ContinuousClock.now
        async let woken: Void = board.wait(next, timeout: .seconds(30))
        try await Task.sleep(for: .milliseconds(20))
        publisher.ring([Doorbell(log: "test", key: "k", seq: 3, keySeq: 6)])
        await woken
        waited = started.duration(to: .now)
        #expect(waited < early, "\(waited)")
        #expect(board.waiting == 0)

        // Cancelled: the wait ends long before its timeout.
        let cancelled = Task { await board.wait(board.ticket(key: "c", beyond: 0), timeout: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(50))
        started = ContinuousClock.now
        cancelled.cancel()
        await cancelled.value
        waited = started.duration(to: .now)
        #expect(waited < early, "\(waited)")
        #expect(board.waiting == 0)

        // Shutdown wakes every wait.
        let parked = (0..<3).map { index in
            Task { await board.wait(board.ticket(key: "s\(index)", beyond: 0), timeout: .seconds(30)) }
        }
        try await Task.sleep(for: .milliseconds(50))
        started = ContinuousClock.now
        await board.shutdown()
        for wait in parked { await wait.value }
        waited = started.duration(to: .now)
        #expect(waited < early, "\(waited)")
        #expect(board.waiting == 0)
        // After shutdown a wait does not park.
        started = ContinuousClock.now
        await board.wait(board.ticket(key: "late", beyond: 0), timeout: .seconds(30))
        #expect(started.duration(to: .now) < early)

        await publisher.shutdown()
        context.shutdown()
        context.terminate()
    }
}
