import Foundation

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
///
/// For conditions that have no event to wait on (a counter in another process, a file); the poll
/// interval is short and the deadline explicit, so a test waits only as long as it must.
public func waitUntil(
    timeout: Duration = .seconds(10),
    interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: interval)
    }
}

/// Runs blocking work (a synchronous socket loop, waiting for a child process) on a thread of its
/// own, off Swift's cooperative pool: with two cores that pool has two threads, and blocking one of
/// them for seconds stalls every other task of the process (a test's deadline timing included).
public func onThread<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try body() })
        }
        thread.name = name
        thread.start()
    }
}
