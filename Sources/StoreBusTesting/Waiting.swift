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
