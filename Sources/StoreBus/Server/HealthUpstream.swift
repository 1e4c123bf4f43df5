import StoreSchema
import Synchronization

/// A service that a process forwards calls to (the gateway's catalog and payment queue), which the
/// process's Health/Check asks in turn (see ``BuiltinServices``), so that one check at the front says
/// whether the whole system answers.
public struct HealthUpstream: Sendable {
    /// How long a check waits for an upstream's answer by default.
    public static let defaultTimeout: Duration = .seconds(1)

    /// Its short name in answers, such as `catalog`.
    public var name: String
    /// The executable expected to answer, such as `storebus-catalog`: another process answering at
    /// its endpoints does not make the service healthy.
    public var process: String
    /// The fully qualified names of its services that calls are forwarded to.
    public var services: [String]
    /// The client the process forwards calls with: the check goes where a forwarded call would.
    public var client: RPCClient
    /// How long a check waits for the upstream's answer before reporting it not serving, at most:
    /// a check whose caller has less time waits for three quarters of what the caller has left.
    public var timeout: Duration

    /// An upstream checked through `client`.
    public init(name: String, process: String, services: [String], client: RPCClient, timeout: Duration = Self.defaultTimeout) {
        self.name = name
        self.process = process
        self.services = services
        self.client = client
        self.timeout = timeout
    }

    /// Asks the upstream for Health/Check of `service` ("" for the process), waiting at most
    /// `timeout`, and says what it found.
    func check(service: String, timeout: Duration) async -> Storebus_Health_V1_UpstreamHealth {
        var health = Storebus_Health_V1_UpstreamHealth.with {
            $0.name = name
            $0.services = services
            $0.status = .notServing
        }
        do {
            let answer = try await client.call(
                Storebus_Health_V1_Health.check, .with { $0.service = service },
                options: CallOptions(timeout: timeout)
            )
            health.process = answer.process
            health.version = answer.version
            health.uptimeSeconds = answer.uptimeSeconds
            if answer.process != process {
                health.message = "\(answer.process) answers where \(process) was expected"
            } else if answer.status != .serving {
                health.message = "\(process) is not serving (it is starting or shutting down)"
            } else {
                health.status = .serving
            }
        } catch {
            health.message = error.message
        }
        return health
    }
}

/// The upstream checks under way, shared by every Health/Check that asks the same question
/// meanwhile: however many checks arrive (callers need no session for Health), each upstream is
/// asked at most once at a time for each service.
final class UpstreamHealthChecks: Sendable {
    private let running = Mutex<[String: Task<Storebus_Health_V1_UpstreamHealth, Never>]>([:])

    /// What `upstream` answers for `service`, from the check under way or a new one, which waits for
    /// it as long as a caller with `timeRemaining` left can (see ``HealthUpstream/timeout``).
    func check(_ upstream: HealthUpstream, service: String, timeRemaining: Duration?) async -> Storebus_Health_V1_UpstreamHealth {
        let key = upstream.name + "\u{0}" + service
        let task = running.withLock { running in
            if let task = running[key] { return task }
            let timeout = timeRemaining.map { min(upstream.timeout, $0 * 3 / 4) } ?? upstream.timeout
            let task = Task { [self] in
                let health = await upstream.check(service: service, timeout: timeout)
                self.running.withLock { _ = $0.removeValue(forKey: key) }
                return health
            }
            // Inserted before this lock is let go, so the task's removal always comes after.
            running[key] = task
            return task
        }
        return await task.value
    }

    /// What every upstream answers for the process as a whole, asked at once, in their order.
    func checkAll(_ upstreams: [HealthUpstream], timeRemaining: Duration?) async -> [Storebus_Health_V1_UpstreamHealth] {
        await withTaskGroup(of: (Int, Storebus_Health_V1_UpstreamHealth).self) { group in
            for (index, upstream) in upstreams.enumerated() {
                group.addTask { (index, await self.check(upstream, service: "", timeRemaining: timeRemaining)) }
            }
            var answers = [Storebus_Health_V1_UpstreamHealth?](repeating: nil, count: upstreams.count)
            for await (index, health) in group { answers[index] = health }
            return answers.compactMap { $0 }
        }
    }
}
