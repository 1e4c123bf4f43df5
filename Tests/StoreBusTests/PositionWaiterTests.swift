import StoreBus
import Testing

@Suite("PositionWaiter: the one wait until a position is reached")
struct PositionWaiterTests {
    @Test("a position already reached answers at once; a later advance ends exactly the waits it reaches")
    func reaching() async {
        let waiter = PositionWaiter<String>()
        waiter.advance("log", to: 5)
        #expect(await waiter.wait("log", reaching: 5, timeout: nil))
        #expect(await waiter.wait("log", beyond: 4, timeout: nil))
        let seven = Task { await waiter.wait("log", reaching: 7, timeout: nil) }
        let nine = Task { await waiter.wait("log", reaching: 9, timeout: .seconds(600)) }
        let other = Task { await waiter.wait("other", reaching: 1, timeout: nil) }
        await Self.until { waiter.waitingCount == 3 }
        waiter.advance("log", to: 8)
        #expect(await seven.value)
        #expect(waiter.waitingCount == 2)
        // Positions never go back.
        waiter.advance("log", to: 2)
        #expect(waiter.position("log") == 8)
        waiter.advance("log", to: 9)
        #expect(await nine.value)
        waiter.bump("other")
        #expect(await other.value)
        #expect(waiter.waitingCount == 0)
    }

    @Test("a timeout, a cancellation and closing end a wait with false, and leave nothing behind")
    func endingWithoutReaching() async {
        let waiter = PositionWaiter<Int>()
        #expect(await waiter.wait(1, reaching: 1, timeout: .milliseconds(1)) == false)
        // Cancelled before, during and after it registers: each ends, once.
        for _ in 0..<200 {
            let task = Task { await waiter.wait(1, reaching: 1, timeout: nil) }
            task.cancel()
            #expect(await task.value == false)
        }
        let parked = Task { await waiter.wait(2, reaching: 10, timeout: nil) }
        await Self.until { waiter.waitingCount == 1 }
        parked.cancel()
        #expect(await parked.value == false)
        #expect(waiter.waitingCount == 0)
        let closing = Task { await waiter.wait(3, reaching: 1, timeout: nil) }
        await Self.until { waiter.waitingCount == 1 }
        waiter.close()
        #expect(await closing.value == false)
        #expect(await waiter.wait(3, reaching: 1, timeout: nil) == false)
        // A position already reached is still answered after close: it needs no waiting.
        waiter.advance(4, to: 1)
        #expect(await waiter.wait(4, reaching: 1, timeout: nil))
    }

    @Test("many waits and concurrent bumps: every wait within the final position ends true, none beyond it does")
    func concurrent() async {
        let waiter = PositionWaiter<Int>()
        let results = await withTaskGroup(of: (UInt64, Bool).self) { group in
            for index in 0..<500 {
                let target = UInt64(index % 250 + 1)
                group.addTask { (target, await waiter.wait(index % 2, reaching: target, timeout: target > 200 ? .milliseconds(50) : nil)) }
            }
            for key in 0..<2 {
                for _ in 0..<200 {
                    group.addTask {
                        waiter.bump(key); return (0, true)
                    }
                }
            }
            var results: [(UInt64, Bool)] = []
            for await result in group { results.append(result) }
            return results
        }
        #expect(waiter.position(0) == 200 && waiter.position(1) == 200)
        for (target, reached) in results where target > 0 {
            #expect(reached == (target <= 200), "target \(target)")
        }
        #expect(waiter.waitingCount == 0)
    }

    @Test("a batch window (gather) lasts its length while nobody waits; a wait for the key that its position has not reached ends it, at once when one waits already")
    func gatherEndsOnDemand() async {
        let waiter = PositionWaiter<String>()
        waiter.advance("log", to: 5)
        // Nobody waits: the whole window. A wait on another key, or one already reached, changes nothing.
        let clock = ContinuousClock()
        let other = Task { await waiter.wait("other", reaching: 1, timeout: nil) }
        #expect(await waiter.wait("log", reaching: 5, timeout: nil))
        let quiet = await clock.measure { await waiter.gather("log", upTo: .milliseconds(300)) }
        #expect(quiet >= .milliseconds(300))

        // A wait registered during a long window ends it.
        async let gathered = Self.within(.seconds(60)) { await waiter.gather("log", upTo: .seconds(600)) }
        try? await Task.sleep(for: .milliseconds(50))
        let reader = Task { await waiter.wait("log", reaching: 7, timeout: nil) }
        #expect(await gathered != nil, "the window ended when the wait came")

        // While that wait stands, a window ends at once; once it is answered, windows last again.
        await Self.until { waiter.waitingCount == 2 }
        #expect(await Self.within(.seconds(60)) { await waiter.gather("log", upTo: .seconds(600)) } != nil)
        waiter.advance("log", to: 7)
        #expect(await reader.value)
        let again = await clock.measure { await waiter.gather("log", upTo: .milliseconds(100)) }
        #expect(again >= .milliseconds(100))

        // Closing ends a window too.
        async let closed = Self.within(.seconds(60)) { await waiter.gather("log", upTo: .seconds(600)) }
        try? await Task.sleep(for: .milliseconds(50))
        waiter.close()
        #expect(await closed != nil)
        #expect(await other.value == false)
    }

    /// `body`'s value, or nil when it has not returned within `limit` (it is left running).
    static func within<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask { await body() }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// Waits, yielding, until `condition` holds (a registration on another task).
    static func until(_ condition: () -> Bool) async {
        while !condition() { await Task.yield() }
    }
}
