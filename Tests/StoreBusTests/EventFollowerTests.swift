import Foundation
import Logging
import StoreBusServer
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing
import ZeroMQ

@testable import StoreBus

@Suite("Event follower")
struct EventFollowerTests {
    /// Ends a test's follow, then its follower, doorbell publisher, client and server.
    static func stop<Success>(
        _ run: Task<Success, any Error>, _ follower: EventFollower, _ publisher: DoorbellPublisher, _ client: RPCClient, _ server: TestServer
    ) async {
        run.cancel()
        _ = await run.result
        await follower.shutdown()
        await publisher.shutdown()
        await client.shutdown()
        await server.stop()
    }

    /// A log of events 1 to `head()` (which the test moves on), telling `read` of each read, and a
    /// follower of it with doorbells.
    static func growingLog(
        head: @escaping @Sendable () -> UInt64, read: @escaping @Sendable () -> Void = {}, idlePoll: Duration, batchWindow: Duration
    ) throws -> (TestServer, DoorbellPublisher, RPCClient, EventFollower) {
        var router = RPCRouter()
        router.register(Storebus_Eventlog_V1_EventLog.readEvents) { request, _ in
            read()
            let last = head()
            return .with {
                $0.events = (1...last).filter { $0 > request.afterSeq }.map(EventFollowerTests.event(seq:))
                $0.headSeq = last
            }
        }
        let server = try TestServer(extra: router)
        let publisher = try DoorbellPublisher(endpoints: ["tcp://127.0.0.1:*"], context: server.context)
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [server.endpoint]))
        var configuration = EventFollower.Configuration(log: "test", doorbellEndpoints: publisher.boundEndpoints)
        configuration.idlePoll = idlePoll
        configuration.batchWindow = batchWindow
        let follower = try EventFollower(configuration: configuration, client: client, context: server.context, logger: Logger(label: "test"))
        return (server, publisher, client, follower)
    }

    /// What a ``FiledLog`` has filed and served: its head, the topic of each event (event 1 under
    /// downloads; none for the others unless filed), and the reads it answered.
    final class FiledState: Sendable {
        let head = Atomic<UInt64>(1)
        let reads = Atomic<Int>(0)
        let filed = Mutex<[UInt64: QueueTopic]>([1: .downloads])
    }

    /// A log of events 1 to its head, filed under topics by the test and read with the payment
    /// queue's topic filter, and a follower of its downloads topic alone with doorbells
    /// (`configure` sets the rest of its configuration).
    struct FiledLog {
        let state = FiledState()
        let server: TestServer
        let publisher: DoorbellPublisher
        let client: RPCClient
        let follower: EventFollower

        init(_ configure: (inout EventFollower.Configuration) -> Void) throws {
            var router = RPCRouter()
            router.register(Storebus_Eventlog_V1_EventLog.readEvents) { [state] request, _ in
                state.reads.wrappingAdd(1, ordering: .relaxed)
                let last = state.head.load(ordering: .relaxed)
                let topics = state.filed.withLock { $0 }
                return .with {
                    $0.events = (1...last).filter { $0 > request.afterSeq && request.topics.contains(topics[$0]?.rawValue ?? "") }.map(EventFollowerTests.event(seq:))
                    $0.headSeq = last
                    $0.throughSeq = last
                }
            }
            server = try TestServer(extra: router)
            publisher = try DoorbellPublisher(endpoints: ["tcp://127.0.0.1:*"], context: server.context)
            client = try RPCClient(configuration: ClientConfiguration(endpoints: [server.endpoint]))
            var configuration = EventFollower.Configuration(log: "test", topics: [QueueTopic.downloads.rawValue], doorbellEndpoints: publisher.boundEndpoints)
            configure(&configuration)
            follower = try EventFollower(configuration: configuration, client: client, context: server.context, logger: Logger(label: "test"))
        }

        /// Files event `seq` under `topic` (none: no topic), moves the head to it, and rings its
        /// doorbell, saying its topics unless `carriesTopics` is false.
        func ring(_ seq: UInt64, _ topic: QueueTopic?, carriesTopics: Bool = true) {
            state.filed.withLock { $0[seq] = topic }
            state.head.store(max(state.head.load(ordering: .relaxed), seq), ordering: .relaxed)
            publisher.ring([Doorbell(log: "test", key: "k", seq: seq, keySeq: seq, topics: carriesTopics ? (topic?.bit ?? []) : nil)])
        }
    }

    /// An event as the log serves it.
    static func event(seq: UInt64) -> Storebus_Eventlog_V1_Event {
        .with {
            $0.seq = seq
            $0.key = "k"
            $0.keySeq = seq
            $0.type = "google.protobuf.Struct"
        }
    }

    @Test("a page with a gap is not applied past the gap: the follower reads again until the missing event is there")
    func neverSkipsAGap() async throws {
        // Given a log whose first answers lack event 3 (as if its commit were not visible yet)
        let reads = Atomic<Int>(0)
        var router = RPCRouter()
        router.register(Storebus_Eventlog_V1_EventLog.readEvents) { request, _ in
            let attempt = reads.wrappingAdd(1, ordering: .relaxed).newValue
            let available: [UInt64] = attempt < 3 ? [1, 2, 4, 5] : [1, 2, 3, 4, 5]
            return .with {
                $0.events = available.filter { $0 > request.afterSeq }.map(EventFollowerTests.event(seq:))
                $0.headSeq = 5
            }
        }
        let server = try TestServer(extra: router)
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [server.endpoint]))
        var configuration = EventFollower.Configuration(log: "test", doorbellEndpoints: [])
        configuration.retryDelay = .milliseconds(5)
        configuration.idlePoll = .milliseconds(20)
        let follower = try EventFollower(configuration: configuration, client: client, context: server.context, logger: Logger(label: "test"))
        let applied = Mutex<[UInt64]>([])

        // When the follower runs until it has applied five events
        let run = Task {
            try await follower.follow(after: 0) { event in
                let count = applied.withLock { list -> Int in
                    list.append(event.seq); return list.count
                }
                if count == 5 { throw CancellationError() }
            }
        }
        _ = await run.result

        // Then it applied 1, 2, and waited for 3 before 4 and 5: nothing skipped, nothing twice
        #expect(applied.withLock { $0 } == [1, 2, 3, 4, 5])
        #expect(reads.load(ordering: .relaxed) >= 3)
        await follower.shutdown()
        await client.shutdown()
        await server.stop()
    }
    @Test("a doorbell beyond anything the log holds does not make the follower read in a loop")
    func staleDoorbell() async throws {
        // Given a log holding events 1 and 2, and a publisher announcing event 100 (a stray
        // publisher, or a log since restored from a backup)
        let reads = Atomic<Int>(0)
        var router = RPCRouter()
        router.register(Storebus_Eventlog_V1_EventLog.readEvents) { request, _ in
            reads.wrappingAdd(1, ordering: .relaxed)
            return .with {
                $0.events = [1, 2].filter { $0 > request.afterSeq }.map(EventFollowerTests.event(seq:))
                $0.headSeq = 2
            }
        }
        let server = try TestServer(extra: router)
        let publisher = try DoorbellPublisher(endpoints: ["tcp://127.0.0.1:*"], context: server.context)
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [server.endpoint]))
        var configuration = EventFollower.Configuration(log: "test", doorbellEndpoints: publisher.boundEndpoints)
        configuration.retryDelay = .milliseconds(100)
        configuration.idlePoll = .seconds(5)
        let follower = try EventFollower(configuration: configuration, client: client, context: server.context, logger: Logger(label: "test"))
        let applied = Mutex<[UInt64]>([])
        let run = Task {
            try await follower.follow(after: 0) { event in applied.withLock { $0.append(event.seq) } }
        }
        #expect(await waitUntil(timeout: .seconds(60)) { applied.withLock { $0 } == [1, 2] })
        // (The subscription may still be joining: ring until a read shows the follower heard it.)
        let before = reads.load(ordering: .relaxed)
        #expect(
            await waitUntil {
                publisher.ring([Doorbell(log: "test", key: "k", seq: 100, keySeq: 100)])
                return reads.load(ordering: .relaxed) > before
            })

        // When a second passes with that announcement standing
        let start = reads.load(ordering: .relaxed)
        try await Task.sleep(for: .seconds(1))
        let during = reads.load(ordering: .relaxed) - start

        // Then the follower read about once per retryDelay, not as fast as it could
        #expect(during <= 20, "\(during) reads in one second")
        #expect(applied.withLock { $0 } == [1, 2])
        await Self.stop(run, follower, publisher, client, server)
    }

    @Test("with a batch window, the events announced within it after a doorbell are taken in one read")
    func batchWindow() async throws {
        // Given a log the test appends to, and a follower that lets events gather for 4 s
        let head = Atomic<UInt64>(1)
        let reads = Atomic<Int>(0)
        let (server, publisher, client, follower) = try Self.growingLog(
            head: { head.load(ordering: .relaxed) }, read: { reads.wrappingAdd(1, ordering: .relaxed) }, idlePoll: .seconds(60), batchWindow: .seconds(4))
        let applied = Mutex<[UInt64]>([])
        let run = Task {
            try await follower.follow(after: 0) { event in applied.withLock { $0.append(event.seq) } }
        }
        // (The subscription may still be joining: event 2 is announced until the follower has it.)
        head.store(2, ordering: .relaxed)
        #expect(
            await waitUntil(timeout: .seconds(60)) {
                publisher.ring([Doorbell(log: "test", key: "k", seq: 2, keySeq: 2)])
                return applied.withLock { $0 } == [1, 2]
            })
        let before = reads.load(ordering: .relaxed)

        // When ten events are appended and announced one by one, 25 ms apart (a follower without
        // the window reads after each)
        for seq in UInt64(3)...12 {
            head.store(seq, ordering: .relaxed)
            publisher.ring([Doorbell(log: "test", key: "k", seq: seq, keySeq: seq)])
            try await Task.sleep(for: .milliseconds(25))
        }

        // Then the follower takes them all in one read, once the window has passed
        #expect(await waitUntil(timeout: .seconds(60)) { applied.withLock { $0 } == Array(1...12) })
        #expect(reads.load(ordering: .relaxed) - before == 1)
        await Self.stop(run, follower, publisher, client, server)
    }

    @Test("a call that waits for a position the follower has not reached ends its batch window: the event is read at once, not after the window")
    func batchWindowEndsOnDemand() async throws {
        // Given a follower with a ten-minute window, whose positions calls wait on
        let head = Atomic<UInt64>(1)
        let (server, publisher, client, follower) = try Self.growingLog(head: { head.load(ordering: .relaxed) }, idlePoll: .seconds(600), batchWindow: .seconds(600))
        let applied = PositionWaiter<String>()
        let run = Task {
            try await follower.followPages(
                after: 0, as: Storebus_Eventlog_V1_ReadEventsResponse.self, gather: { window in await applied.gather("test", upTo: window) }
            ) { _, through in applied.advance("test", to: through) }
        }
        #expect(await applied.wait("test", reaching: 1, timeout: .seconds(60)), "the first read, at start")

        // When event 2 is announced (the window starts; rung until the subscription has joined)
        // and a call then waits for it
        head.store(2, ordering: .relaxed)
        let ringing = Task {
            while !Task.isCancelled {
                publisher.ring([Doorbell(log: "test", key: "k", seq: 2, keySeq: 2)])
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        try await Task.sleep(for: .milliseconds(200))

        // Then the call is answered well before the window would have ended
        #expect(await applied.wait("test", reaching: 2, timeout: .seconds(60)))
        ringing.cancel()
        await Self.stop(run, follower, publisher, client, server)
    }

    @Test("a log that ends before the follower's position (replaced by an older one) ends the follow with OUT_OF_RANGE instead of waiting without a word")
    func logBehindThePosition() async throws {
        // Given a log of three events, and a follower that last applied event 10 of the log it replaced
        var router = RPCRouter()
        router.register(Storebus_Eventlog_V1_EventLog.readEvents) { request, _ in
            .with {
                $0.events = [1, 2, 3].filter { $0 > request.afterSeq }.map(EventFollowerTests.event(seq:))
                $0.headSeq = 3
            }
        }
        let server = try TestServer(extra: router)
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [server.endpoint]))
        var configuration = EventFollower.Configuration(log: "test", key: "k", doorbellEndpoints: [])
        configuration.idlePoll = .milliseconds(20)
        let follower = try EventFollower(configuration: configuration, client: client, context: server.context, logger: Logger(label: "test"))
        let applied = Atomic<Int>(0)

        // When it follows from there
        let run = Task { try await follower.follow(after: 10) { _ in applied.wrappingAdd(1, ordering: .relaxed) } }
        let outcome = await withTaskGroup(of: Result<Void, any Error>?.self) { group in
            group.addTask { await run.result }
            group.addTask {
                try? await Task.sleep(for: .seconds(5)); return nil
            }
            let first = await group.next()!
            // (The group waits for both: the follow has to end for the one awaiting it to.)
            run.cancel()
            group.cancelAll()
            return first
        }

        // Then the follow ends at once with OUT_OF_RANGE naming both positions, having applied nothing
        guard case .failure(let error as RPCError)? = outcome else {
            Issue.record("the follow did not end with an RPCError: \(String(describing: outcome))")
            return
        }
        #expect(error.code == .outOfRange && error.message.contains("ends at 3, before position 10"), "\(error)")
        #expect(applied.load(ordering: .relaxed) == 0)
        await follower.shutdown()
        await client.shutdown()
        await server.stop()
    }

    @Test("doorbells of events in none of the follower's topics move its position without a read or a wake-up; a doorbell lost, one without topics, or one in its topics makes it read")
    func quietDoorbells() async throws {
        // Given a log whose events the test files under topics (event 1 under downloads), read with
        // the payment queue's topic filter, and a follower of the downloads topic alone
        let log = try FiledLog { $0.idlePoll = .seconds(60) }
        let (publisher, client, server, follower) = (log.publisher, log.client, log.server, log.follower)
        let applied = Mutex<(events: [UInt64], through: UInt64)>(([], 0))
        let quiet = Atomic<UInt64>(0)
        let run = Task {
            try await follower.followPages(
                after: 0, as: Storebus_Eventlog_V1_ReadEventsResponse.self, quiet: { quiet.store($0, ordering: .relaxed) }
            ) { events, through in
                applied.withLock { $0 = ($0.events + events.map(\.seq), through) }
            }
        }
        func bell(_ seq: UInt64, _ topic: QueueTopic?, carriesTopics: Bool = true) { log.ring(seq, topic, carriesTopics: carriesTopics) }
        // (The subscription may still be joining: event 1 is announced until the follower has it.)
        #expect(
            await waitUntil(timeout: .seconds(60)) {
                bell(1, .downloads)
                return applied.withLock { $0.through } == 1
            })
        let before = log.state.reads.load(ordering: .relaxed)

        // When events 2 to 10, each under another topic or none, are announced one by one
        for seq in UInt64(2)...10 {
            bell(seq, seq % 2 == 0 ? .completed : nil)
            try await Task.sleep(for: .milliseconds(5))
        }

        // Then the follower's position reaches 10 without a read, and without waking it: those
        // waiting for the position hear of each step at once
        #expect(await waitUntil(timeout: .seconds(60)) { quiet.load(ordering: .relaxed) == 10 })
        #expect(log.state.reads.load(ordering: .relaxed) == before, "reads for events of other topics")
        #expect(applied.withLock { $0.through } == 1, "the follower slept through them")

        // A doorbell lost (11 is never announced): the follower reads
        bell(12, .finished)
        #expect(await waitUntil(timeout: .seconds(60)) { applied.withLock { $0.through } == 12 })
        #expect(log.state.reads.load(ordering: .relaxed) > before)
        // A doorbell that does not say its topics: it reads
        var now = log.state.reads.load(ordering: .relaxed)
        bell(13, .completed, carriesTopics: false)
        #expect(await waitUntil(timeout: .seconds(60)) { applied.withLock { $0.through } == 13 })
        #expect(log.state.reads.load(ordering: .relaxed) > now)
        // An event in its topic: it reads, and is handed the event
        now = log.state.reads.load(ordering: .relaxed)
        bell(14, .downloads)
        #expect(await waitUntil(timeout: .seconds(60)) { applied.withLock { $0.through } == 14 })
        #expect(log.state.reads.load(ordering: .relaxed) > now)
        #expect(applied.withLock { $0.events } == [1, 14])
        await Self.stop(run, follower, publisher, client, server)
    }

    @Test("topic doorbells: one per topic an event is filed under (its positions, not the event), one for an event under every topic, none for one in no topic or with topics unknown")
    func topicDoorbellFrames() throws {
        let both = Doorbell(log: "test", key: "k", seq: 7, keySeq: 3, topics: [QueueTopic.completed.bit, QueueTopic.downloads.bit], event: Array("{}".utf8))
        let messages = both.topicFrames
        #expect(messages.map { String(decoding: $0[0], as: UTF8.self) } == ["test#0/k\n", "test#5/k\n"])
        #expect(messages.allSatisfy { $0.count == 2 && $0[1] == both.frames[1] }, "the doorbell's positions frame, without the event")
        let heard = try #require(Doorbell(frames: messages[1]))
        #expect(heard.log == "test" && heard.key == "k" && heard.seq == 7 && heard.keySeq == 3 && heard.topics == both.topics && heard.event == nil)
        let every = Doorbell(log: "test", key: "k", seq: 8, keySeq: 4, topics: .all)
        #expect(every.topicFrames.map { String(decoding: $0[0], as: UTF8.self) } == ["test#*/k\n"])
        #expect(Doorbell(log: "test", key: "k", seq: 9, keySeq: 5, topics: []).topicFrames.isEmpty)
        #expect(Doorbell(log: "test", key: "k", seq: 9, keySeq: 5).topicFrames.isEmpty)
        // What a follower of completed and downloads subscribes to: both topics, and every-topic events.
        let prefixes = Doorbell.topicPrefixes(log: "test", topics: [QueueTopic.completed.bit, QueueTopic.downloads.bit])
        #expect(prefixes.map { String(decoding: $0, as: UTF8.self) } == ["test#0/", "test#5/", "test#*/"])
        // None of them matches the whole log's doorbells, which other subscribers take.
        #expect(!prefixes.contains { both.frames[0].starts(with: $0) })
    }

    @Test("a follower of topic doorbells is not woken by events of other topics; a call waiting for a position makes it read at once; an event in its topic wakes it")
    func topicDoorbellsFollower() async throws {
        // Given a log whose events the test files under topics (event 1 under downloads), and a
        // follower of the downloads topic that hears its topic doorbells only, whose positions
        // calls wait on, with a ten-minute idle poll
        let log = try FiledLog {
            $0.idlePoll = .seconds(600)
            $0.topicDoorbells = true
        }
        let (publisher, client, server, follower) = (log.publisher, log.client, log.server, log.follower)
        let applied = PositionWaiter<String>()
        let events = Mutex<[UInt64]>([])
        let run = Task {
            try await follower.followPages(
                after: 0, as: Storebus_Eventlog_V1_ReadEventsResponse.self, gather: { window in await applied.gather("test", upTo: window) }
            ) { records, through in
                events.withLock { $0 += records.map(\.seq) }
                applied.advance("test", to: through)
            }
        }
        func bell(_ seq: UInt64, _ topic: QueueTopic?) { log.ring(seq, topic) }
        #expect(await applied.wait("test", reaching: 1, timeout: .seconds(60)), "the first read, at start")
        // (The subscription may still be joining: an event of its topic is announced until it is read.)
        #expect(
            await waitUntil(timeout: .seconds(60)) {
                bell(2, .downloads)
                return events.withLock { $0 } == [1, 2]
            })

        // When events 3 to 10, each under another topic or none, are announced
        let before = log.state.reads.load(ordering: .relaxed)
        for seq in UInt64(3)...10 { bell(seq, seq % 2 == 0 ? .completed : nil) }
        try await Task.sleep(for: .milliseconds(300))

        // Then nothing reads them: the publisher sent this follower none of their doorbells
        #expect(log.state.reads.load(ordering: .relaxed) == before, "reads for events of other topics")
        #expect(applied.position("test") == 2)

        // When a call waits for position 10, the follower reads at once (its idle poll is ten minutes)
        #expect(await applied.wait("test", reaching: 10, timeout: .seconds(60)))
        #expect(log.state.reads.load(ordering: .relaxed) > before)

        // And an event in its topic wakes it, and is handed over
        bell(11, .downloads)
        #expect(await applied.wait("test", reaching: 11, timeout: .seconds(60)))
        #expect(events.withLock { $0 } == [1, 2, 11])

        // A call waiting for a position the log does not have (past its head) makes it read no
        // more often than every retryDelay (100 ms), not in a loop
        let during = log.state.reads.load(ordering: .relaxed)
        #expect(await applied.wait("test", reaching: 1_000, timeout: .seconds(2)) == false)
        #expect(log.state.reads.load(ordering: .relaxed) - during < 100)
        await Self.stop(run, follower, publisher, client, server)
    }
}
