/// Waits between attempts: `first`, then twice as long each time, at most two seconds.
struct Backoff {
    let first: Duration
    /// The next wait.
    private(set) var next: Duration

    init(first: Duration) {
        // At least 10 ms: a zero would stay zero when doubled, and the loop would spin.
        self.first = max(first, .milliseconds(10))
        next = self.first
    }

    mutating func wait() async {
        try? await Task.sleep(for: next)
        next = min(next * 2, .seconds(2))
    }

    mutating func reset() { next = first }
}
