import StoreBus
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
    /// How long the upstream is given to answer; a caller with less time left waits for three
    /// quarters of it, then reports the upstream not serving (the check goes on for the others).
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
    /// its ``timeout``, and says what it found.
    func check(service: String) async -> Storebus_Health_V1_UpstreamHealth {
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
            // The code alone: the error's message names the service's endpoints, which callers
            // without a session have no business knowing.
            health.message = "\(process) did not answer (\(error.code))"
        }
        return health
    }

    /// What a caller that stopped waiting after `waited` reports.
    func notAnswered(within waited: Duration) -> Storebus_Health_V1_UpstreamHealth {
        .with {
            $0.name = name
            $0.services = services
            $0.status = .notServing
            $0.message = "\(process) did not answer within \(waited.wireMilliseconds) ms"
        }
    }
}

/// The upstream checks under way, shared by every Health/Check that asks the same question
/// meanwhile: however many checks arrive (callers need no session for Health), each upstream is
/// asked at most once at a time for each service. The shared check waits its upstream's full
/// ``HealthUpstream/timeout``; each caller waits for it only as long as its own deadline allows, so
/// a caller with little time can neither shorten the check for the others nor be kept past its
/// deadline by it.
final class UpstreamHealthChecks: Sendable {
    private let running = Mutex<[String: SharedCheck]>([:])

    /// What `upstream` answers for `service`, from the check under way or a new one; a caller with
    /// `timeRemaining` left waits for three quarters of it at most, and for the upstream's timeout.
    func check(_ upstream: HealthUpstream, service: String, timeRemaining: Duration?) async -> Storebus_Health_V1_UpstreamHealth {
        let key = upstream.name + "\u{0}" + service
        let shared = running.withLock { running in
            if let shared = running[key] { return shared }
            let shared = SharedCheck()
            // Inserted before this lock is let go, so the removal below always comes after.
            running[key] = shared
            Task { [self] in
                let health = await upstream.check(service: service)
                self.running.withLock { _ = $0.removeValue(forKey: key) }
                shared.finish(health)
            }
            return shared
        }
        let budget = timeRemaining.map { min(upstream.timeout, $0 * 3 / 4) } ?? upstream.timeout
        return await shared.answer(within: budget) ?? upstream.notAnswered(within: budget)
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

/// One upstream check under way and the callers waiting for its answer, each for as long as it can.
final class SharedCheck: Sendable {
    private struct State {
        var answer: Storebus_Health_V1_UpstreamHealth?
        var waiters: [UInt64: CheckedContinuation<Storebus_Health_V1_UpstreamHealth?, Never>] = [:]
        /// Callers that gave up before they were registered (cancelled at once, say).
        var gaveUp: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Hands the answer to every caller still waiting, and to those that come later.
    func finish(_ answer: Storebus_Health_V1_UpstreamHealth) {
        let waiters = state.withLock { state in
            state.answer = answer
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: answer) }
    }

    /// The answer, or nil when it has not come within `budget` or the caller is cancelled first.
    func answer(within budget: Duration) async -> Storebus_Health_V1_UpstreamHealth? {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        let timer = Task { [self] in
            // Only a wait that ran out gives up here; a cancelled timer means the answer came.
            if (try? await Task.sleep(for: budget)) != nil { giveUp(id) }
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now: Storebus_Health_V1_UpstreamHealth?? = state.withLock { state in
                    if let answer = state.answer { return .some(answer) }
                    if state.gaveUp.remove(id) != nil { return .some(nil) }
                    state.waiters[id] = continuation
                    return .none
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            giveUp(id)
        }
    }

    /// Ends caller `id`'s wait with no answer, now or, when it is not waiting yet, as soon as it does.
    private func giveUp(_ id: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<Storebus_Health_V1_UpstreamHealth?, Never>? in
            if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
            if state.answer == nil { state.gaveUp.insert(id) }
            return nil
        }
        waiter?.resume(returning: nil)
    }
}
