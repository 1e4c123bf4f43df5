import Foundation
import Synchronization

/// The people logged in to the console: each login is a random token (the session cookie's value)
/// naming the admin key it was opened with, its form token (every form carries it; a post without
/// it is refused) and a message for the next page. Kept in memory only: the console keeps nothing
/// durable, and a restart asks everyone to log in again. A login unused for `idle` ends; beyond
/// `limit` logins, the least recently used ends.
final class ConsoleSessions: Sendable {
    struct Login: Sendable {
        /// The cookie's value.
        let token: String
        /// The token every form of this login carries.
        let formToken: String
        /// The admin key the gateway accepted at login: every call is made with it.
        let adminKey: String
        var lastUse: ContinuousClock.Instant
        /// A message for the next page shown (an action's result).
        var flash: Flash?
    }

    /// An action's result, shown once on the next page.
    struct Flash: Sendable {
        var text: String
        var isError: Bool
    }

    private let logins = Mutex<[String: Login]>([:])
    let idle: Duration
    let limit: Int

    init(idle: Duration, limit: Int) {
        self.idle = idle
        self.limit = limit
    }

    /// A new login for `adminKey`.
    func open(adminKey: String) -> Login {
        let login = Login(token: Self.randomToken(), formToken: Self.randomToken(), adminKey: adminKey, lastUse: .now, flash: nil)
        logins.withLock { logins in
            Self.sweep(&logins, idle: idle)
            while logins.count >= limit, let oldest = logins.values.min(by: { $0.lastUse < $1.lastUse }) {
                logins[oldest.token] = nil
            }
            logins[login.token] = login
        }
        return login
    }

    /// The login `token` names, marked used now; nil when there is none (never, ended, or idle too long).
    func login(_ token: String?) -> Login? {
        guard let token, !token.isEmpty else { return nil }
        return logins.withLock { logins in
            guard var login = logins[token] else { return nil }
            guard login.lastUse.duration(to: .now) < idle else {
                logins[token] = nil
                return nil
            }
            login.lastUse = .now
            logins[token] = login
            return login
        }
    }

    /// Ends the login `token` names.
    func close(_ token: String) {
        _ = logins.withLock { $0.removeValue(forKey: token) }
    }

    /// Keeps `flash` for the login's next page.
    func say(_ flash: Flash, to token: String) {
        logins.withLock { $0[token]?.flash = flash }
    }

    /// The login's message, once.
    func takeFlash(_ token: String) -> Flash? {
        logins.withLock { logins in
            defer { logins[token]?.flash = nil }
            return logins[token]?.flash
        }
    }

    /// Whether `given` is the login's form token (compared in constant time).
    static func matches(_ given: String, _ expected: String) -> Bool {
        let left = Array(given.utf8), right = Array(expected.utf8)
        guard left.count == right.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(left, right) { difference |= a ^ b }
        return difference == 0
    }

    private static func sweep(_ logins: inout [String: Login], idle: Duration) {
        let now = ContinuousClock.now
        logins = logins.filter { $0.value.lastUse.duration(to: now) < idle }
    }

    /// 32 random bytes as base64url without padding (cookie-safe).
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
