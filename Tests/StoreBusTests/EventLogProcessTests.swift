import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

@Suite("Event log, end to end")
struct EventLogProcessTests {
    @Test("a follower of the whole log and a follower of one key each get their events in order")
    func followersGetEventsInOrder() async throws {
        let journal = try JournalFixture()
        try await journal.start()
        let client = try journal.client()
        let all = Collected(), onlyA = Collected()
        let wholeFollower = try journal.follower(client: client)
        let keyFollower = try journal.follower(client: client, key: "a")
        let following = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await wholeFollower.follow(after: 0) { all.append($0) } }
                group.addTask { try await keyFollower.follow(after: 0) { onlyA.append($0) } }
                try await group.waitForAll()
            }
        }
        // When entries are appended to two keys
        for index in 1...30 {
            let key = index % 3 == 0 ? "b" : "a"
            let answer = try await client.call(
                Storebus_Testkit_V1_Journal.append,
                .with {
                    $0.key = key; $0.text = "entry \(index)"
                })
            #expect(answer.seq == UInt64(index))
        }
        // Then the whole-log follower sees seq 1...30 and the key follower key_seq 1...20 of "a"
        #expect(await waitUntil { all.count == 30 && onlyA.count == 20 })
        #expect(all.events.map(\.seq) == Array(1...30))
        #expect(onlyA.events.map(\.keySeq) == Array(1...20))
        #expect(onlyA.events.allSatisfy { $0.key == "a" && $0.type == "storebus.testkit.v1.JournalEntryAppended" })
        let first = try Storebus_Testkit_V1_JournalEntryAppended(jsonString: try all.events[0].payload.jsonString())
        #expect(first.text == "entry 1")
        following.cancel()
        await wholeFollower.shutdown()
        await keyFollower.shutdown()
        await client.shutdown()
        await journal.stop()
    }

    @Test("killed with SIGKILL between commit and announcement, restarted, the follower still gets every event exactly once")
    func killBetweenCommitAndAnnouncement() async throws {
        // Given a journal that dies right after its 6th commit, before ringing its doorbell
        let journal = try JournalFixture()
        try await journal.start(failPoints: "eventlog.after-commit=kill-after:5")
        let client = try journal.client()
        let seen = Collected()
        let follower = try journal.follower(client: client)
        let following = Task { try await follower.follow(after: 0) { seen.append($0) } }

        var acknowledged = 0
        var lost = 0
        for index in 1...6 {
            do {
                _ = try await client.call(
                    Storebus_Testkit_V1_Journal.append,
                    .with {
                        $0.key = "k\(index % 2)"; $0.text = "before \(index)"
                    })
                acknowledged += 1
            } catch {
                // The 6th append committed, then the process died before answering.
                #expect(error.code == .unavailable || error.code == .deadlineExceeded, "\(error)")
                lost += 1
            }
        }
        #expect(acknowledged == 5 && lost == 1)
        #expect(await journal.process.waitForExit(timeout: .seconds(10)) != nil)

        // When it is restarted and more entries are appended
        try await journal.start()
        for index in 7...10 {
            _ = try await client.call(
                Storebus_Testkit_V1_Journal.append,
                .with {
                    $0.key = "k\(index % 2)"; $0.text = "after \(index)"
                })
        }
        let committed = try await client.call(Storebus_Testkit_V1_Journal.countEntries, .init()).count
        #expect(committed == 10, "the unanswered append was committed")

        // Then the follower has every committed event once, in order, the unannounced one included.
        // Delivery is ordered, so once a sentinel appended last has arrived, any duplicate would have too.
        let sentinel = try await client.call(
            Storebus_Testkit_V1_Journal.append,
            .with {
                $0.key = "sentinel"; $0.text = "last"
            })
        #expect(await waitUntil { seen.events.last?.seq == sentinel.seq })
        #expect(seen.events.map(\.seq) == Array(1...(committed + 1)))
        following.cancel()
        await follower.shutdown()
        await client.shutdown()
        await journal.stop()
    }

    @Test("a follower restarted from its last applied position resumes without repeating or missing events")
    func followerResumesFromPosition() async throws {
        let journal = try JournalFixture()
        try await journal.start()
        let client = try journal.client()
        for index in 1...12 {
            _ = try await client.call(
                Storebus_Testkit_V1_Journal.append,
                .with {
                    $0.key = "q"; $0.text = "\(index)"
                })
        }
        // A consumer that applies events and remembers its position stops after 5 events
        let first = Collected()
        let firstFollower = try journal.follower(client: client, key: "q")
        let run = Task {
            try await firstFollower.follow(after: 0) { event in
                first.append(event)
                if first.count == 5 { throw CancellationError() }
            }
        }
        _ = await run.result
        await firstFollower.shutdown()
        let position = first.events.last!.keySeq
        #expect(position == 5)

        // Restarted from position 5, it gets 6...12 and then live events
        let second = Collected()
        let secondFollower = try journal.follower(client: client, key: "q")
        let resumed = Task { try await secondFollower.follow(after: position) { second.append($0) } }
        _ = try await client.call(
            Storebus_Testkit_V1_Journal.append,
            .with {
                $0.key = "q"; $0.text = "13"
            })
        #expect(await waitUntil { second.count == 8 })
        #expect(second.events.map(\.keySeq) == Array(6...13))
        resumed.cancel()
        await secondFollower.shutdown()
        await client.shutdown()
        await journal.stop()
    }
}
