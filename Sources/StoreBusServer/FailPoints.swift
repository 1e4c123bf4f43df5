import Foundation
import Glibc
import Logging
import StoreBus
import Synchronization

#if canImport(Glibc)
#endif

/// Named places in the code where a test can make the process die on purpose (FreeBSD's fail points,
/// TiKV's fail-rs), to prove that a crash at exactly that moment loses nothing.
///
/// Off unless configured: executables read `STOREBUS_FAILPOINTS`, a comma-separated list of
/// `name=kill` (die with SIGKILL the first time the point is reached) or `name=kill-after:N` (pass N
/// times, die on the next). Known points: `eventlog.after-commit` (after a transaction with events
/// committed, before its doorbell rang).
public final class FailPoints: Sendable {
    private let armed: Mutex<[String: Int]>
    /// Whether any point was configured: points are set only at start, so when none is, `hit` on
    /// the hot paths (every commit) returns without taking the lock.
    private let configured: Bool

    /// No fail points.
    public init() {
        armed = Mutex([:])
        configured = false
    }

    /// Fail points from a specification such as `eventlog.after-commit=kill-after:3`; throws on a
    /// malformed entry.
    public init(specification: String) throws {
        var points: [String: Int] = [:]
        for entry in specification.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !entry.isEmpty {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty else { throw StartupError("fail point \"\(entry)\" is not name=action") }
            if parts[1] == "kill" {
                points[parts[0]] = 0
            } else if parts[1].hasPrefix("kill-after:"), let count = Int(parts[1].dropFirst("kill-after:".count)), count >= 0 {
                points[parts[0]] = count
            } else {
                throw StartupError("fail point \"\(entry)\": the action is kill or kill-after:N")
            }
        }
        armed = Mutex(points)
        configured = !points.isEmpty
    }

    /// Whether no point is armed (points stay armed once configured: a hit only counts down).
    public var isEmpty: Bool { !configured }

    /// Reached the point `name`: dies with SIGKILL if it is armed and its count is used up.
    public func hit(_ name: String) {
        guard configured else { return }
        let die = armed.withLock { points -> Bool in
            guard let remaining = points[name] else { return false }
            if remaining == 0 { return true }
            points[name] = remaining - 1
            return false
        }
        if die {
            Glibc.kill(getpid(), SIGKILL)
        }
    }
}
