import Foundation
import Logging
import StoreBusServer
import StoreSchema
import Synchronization
import Testing
import ZeroMQ

@testable import StoreBus

@Suite("Reactor and component lifecycles")
struct ReactorTests {
    @Test("a timer action may schedule another timer (once a crash: exclusive access to the timer queue)")
    func timerSchedulesTimer() async throws {
        let context = try ZeroMQ.Context()
        let reactor = Reactor(name: "test", context: context)
        reactor.start()
        let fired = Mutex<[Int]>([])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            reactor.execute {
                reactor.schedule(at: .now) {
                    fired.withLock { $0.append(1) }
                    reactor.schedule(at: .now + .milliseconds(1)) {
                        fired.withLock { $0.append(2) }
                        done.resume()
                    }
                }
            }
        }
        #expect(fired.withLock { $0 } == [1, 2])
        reactor.stop()
        await reactor.join()
        context.terminate()
    }

    @Test("stop actions registered while the reactor stops (by a stop action, or by a job it queues) run too; one removed does not")
    func stopActionsDuringStop() async throws {
        let context = try ZeroMQ.Context()
        let reactor = Reactor(name: "test", context: context)
        reactor.start()
        let ran = Mutex<[String]>([])
        let registered = await reactor.perform {
            reactor.onStop {
                ran.withLock { $0.append("first") }
                reactor.onStop { ran.withLock { $0.append("from a stop action") } }
                reactor.execute {
                    reactor.onStop { ran.withLock { $0.append("from a job") } }
                }
            }
            let removed = reactor.onStop { ran.withLock { $0.append("removed") } }
            reactor.removeStopAction(removed)
        }
        #expect(registered)
        reactor.stop()
        await reactor.join()
        #expect(ran.withLock { $0 } == ["first", "from a stop action", "from a job"])
        context.terminate()
    }

    @Test("every job accepted before or while the reactor stops runs; later ones are refused")
    func jobsAroundStop() async throws {
        let context = try ZeroMQ.Context()
        let reactor = Reactor(name: "test", context: context)
        reactor.start()
        let ran = Atomic<Int>(0)
        var accepted = 0
        for index in 0..<10_000 {
            if index == 5_000 { reactor.stop() }
            if reactor.execute({ ran.wrappingAdd(1, ordering: .relaxed) }) { accepted += 1 }
        }
        await reactor.join()
        #expect(ran.load(ordering: .relaxed) == accepted)
        #expect(!reactor.execute {})
        context.terminate()
    }

    @Test("idle work runs after the turn's jobs, taking in all they asked for; while it has more, the loop comes back without blocking", .timeLimit(.minutes(1)))
    func idleWorkBatchesATurn() async throws {
        let context = try ZeroMQ.Context()
        let reactor = Reactor(name: "test", context: context)
        reactor.start()
        // Loop-confined state, reached only from jobs on the loop.
        final class Box: @unchecked Sendable {
            var pending: [Int] = []
            var batches: [[Int]] = []
        }
        let box = Box()
        let batches = await withCheckedContinuation { (done: CheckedContinuation<[[Int]], Never>) in
            reactor.execute {
                reactor.whenIdle(hasWork: { !box.pending.isEmpty }) {
                    box.batches.append(box.pending)
                    box.pending.removeAll()
                    switch box.batches.count {
                    // A job the work queues asks for more: nothing else will wake the loop (it has
                    // no timer and no socket), so only the loop coming back finds it.
                    case 1: reactor.execute { box.pending.append(99) }
                    default: done.resume(returning: box.batches)
                    }
                }
                // One turn's jobs: each asks for one piece of work.
                for index in 0..<10 { reactor.execute { box.pending.append(index) } }
            }
        }
        #expect(batches == [Array(0..<10), [99]])
        reactor.stop()
        await reactor.join()
        context.terminate()
    }

    @Test("a call made after the client shut down fails with CANCELLED at once instead of hanging")
    func callAfterShutdown() async throws {
        let server = try TestServer()
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [server.endpoint]))
        _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .init())
        await client.shutdown()
        await client.shutdown() // twice is harmless
        let error = await #expect(throws: RPCError.self) {
            _ = try await client.call(Storebus_Diagnostics_V1_Diagnostics.echo, .init(), options: CallOptions(timeout: .seconds(30)))
        }
        #expect(error?.code == .cancelled)
        await server.stop()
    }

    @Test("a server's run() returns when its task is cancelled (as a service group does when a sibling ends)")
    func serverRunHonoursCancellation() async throws {
        let context = try ZeroMQ.Context()
        let server = try RPCServer(
            configuration: ServerConfiguration(endpoints: ["tcp://127.0.0.1:*"]), router: RPCRouter(),
            context: context, logger: Logger(label: "test")
        )
        let running = Task { await server.run() }
        try await Task.sleep(for: .milliseconds(50))
        running.cancel()
        let finished = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await running.value; return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(10)); return false
            }
            let first = await group.next()!
            group.cancelAll()
            return first
        }
        #expect(finished)
        context.shutdown()
        context.terminate()
    }
}
