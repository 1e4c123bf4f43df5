import Synchronization

/// Answers of cacheable methods (`option (storebus.options.v1.cacheable)`, FetchProducts among them)
/// the gateway has forwarded, kept for a short while: the devices of an app ask for the same products
/// again and again (every launch, every store screen), and the catalog changes only when it is
/// reloaded.
///
/// Keyed by the method, the session's app and the request body byte for byte, so an answer is only
/// ever given for the very request it answered, and never to another app. A reload reaches clients
/// at most `lifetime` later (the payment queue caches its lookups the same way). Only successful
/// answers of at most ``maxAnswerBytes`` are kept, and at most ``maxBytes`` in all.
public final class AnswerCache: Sendable {
    /// Largest answer kept.
    public static let maxAnswerBytes = 64 * 1024
    /// Most bytes of answers kept.
    public static let maxBytes = 16 * 1024 * 1024

    private struct Key: Hashable {
        var path: String
        var app: String
        var body: [UInt8]
    }

    private struct Entry {
        var answer: [UInt8]
        var expires: ContinuousClock.Instant
        /// Bytes it holds, its key's included.
        var size: Int
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var bytes = 0
    }

    /// How long an answer is kept (zero keeps nothing).
    public let lifetime: Duration
    private let state = Mutex(State())

    /// A cache keeping answers for `lifetime`.
    public init(lifetime: Duration) {
        self.lifetime = lifetime
    }

    /// The kept answer of `path` to `body` from a session of `app`, if it is still fresh.
    func answer(path: String, app: String, body: [UInt8], now: ContinuousClock.Instant = .now) -> [UInt8]? {
        guard lifetime > .zero else { return nil }
        return state.withLock { state in
            guard let entry = state.entries[Key(path: path, app: app, body: body)], now < entry.expires else { return nil }
            return entry.answer
        }
    }

    /// Keeps `answer` of `path` to `body` from a session of `app`.
    func keep(_ answer: [UInt8], path: String, app: String, body: [UInt8], now: ContinuousClock.Instant = .now) {
        guard lifetime > .zero, answer.count <= Self.maxAnswerBytes else { return }
        let size = answer.count + body.count + app.utf8.count + path.utf8.count
        state.withLock { state in
            if state.bytes + size > Self.maxBytes {
                // Full: drop what has expired, and everything if that is not enough.
                state.entries = state.entries.filter { $0.value.expires > now }
                state.bytes = state.entries.values.reduce(0) { $0 + $1.size }
                if state.bytes + size > Self.maxBytes {
                    state.entries.removeAll()
                    state.bytes = 0
                }
            }
            let key = Key(path: path, app: app, body: body)
            if let old = state.entries.updateValue(Entry(answer: answer, expires: now + lifetime, size: size), forKey: key) {
                state.bytes -= old.size
            }
            state.bytes += size
        }
    }

    /// Answers kept now (for tests).
    var count: Int { state.withLock { $0.entries.count } }
}
