import StoreBusHost
import Synchronization
import Testing

/// The ready line's wait for the process's HTTP listeners (``Listeners``).
struct ListenersTests {
    @Test("the wait ends once every listener expected has bound, each counted once; at once with none; on cancellation")
    func waitsForEveryListener() async throws {
        let listeners = Listeners()
        let metrics = listeners.expect()
        let console = listeners.expect()
        let ended = Atomic(false)
        let waiting = Task {
            await listeners.allBound()
            ended.store(true, ordering: .releasing)
        }
        // The wait begun first (a slow machine only makes the check below weaker, never wrong).
        try await Task.sleep(for: .milliseconds(100))
        metrics()
        metrics()
        // A wrong count would end the wait here.
        try await Task.sleep(for: .milliseconds(100))
        let endedEarly = ended.load(ordering: .acquiring)
        #expect(!endedEarly)
        console()
        await waiting.value
        let endedAfter = ended.load(ordering: .acquiring)
        #expect(endedAfter)

        // Bound before anyone waits, or none expected: no wait.
        await listeners.allBound()
        await Listeners().allBound()

        // A listener that never binds (its service failed): the cancelled wait ends.
        let stuck = Listeners()
        _ = stuck.expect()
        let cancelled = Task { await stuck.allBound() }
        cancelled.cancel()
        await cancelled.value
    }
}
