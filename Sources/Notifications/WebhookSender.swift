import AsyncHTTPClient
import Foundation
import Logging
import Metrics
import NIOCore
import ServiceLifecycle
import StoreBus
import StoreSchema
import Synchronization

/// POSTs each queued notification to its app's webhook as Apple does (`{"signedPayload": "…"}`):
/// HTTP 200 to 206 is a success; any other status, a time-out or a connection that fails is a failed
/// attempt, tried again on Apple's schedule (``NotificationStore/retryHours`` times
/// `retryScale`). Deliveries are durable rows: a process killed with attempts to come makes them after
/// its restart; one killed during an attempt makes it again (a webhook may see a notification twice
/// before answering, never after a success is recorded). Each URL has at most `perURL` attempts in
/// flight and each attempt its time limit, so an endpoint that hangs or fails holds back no other.
struct WebhookSender: Service {
    let store: NotificationStore
    let client: HTTPClient
    let timeout: Duration
    /// The configuration's retry scale; nil: each app's store clock's (``clockScale(app:)``).
    let retryScale: Double?
    let perURL: Int
    let logger: Logger
    /// The payment queue, whose store clock shortens the retry schedule (nil: real time).
    var queue: RPCClient? = nil
    /// Each app's store-clock scale, read at most every minute.
    let clockScales = ClockScales()

    /// Each app's store-clock scale and when it was read.
    final class ClockScales: Sendable {
        let kept = Mutex<[String: (scale: Double, read: ContinuousClock.Instant)]>([:])
    }

    /// Most attempts in flight at once, over every URL.
    static let maxInFlight = 256
    /// What a task of the sender came to.
    enum Outcome: Sendable {
        /// The POST of an attempt is done: its URL has room again. Its record is to be written.
        case posted(Delivery, result: String, status: Int, startedMS: Int64, detail: String)
        /// The attempt's record is committed: the delivery may be looked at again.
        case recorded(Delivery)
        case tick
    }

    func run() async throws {
        // The client is shut down however sending ends (a cancelled read throws).
        var failure: (any Error)?
        do {
            try await cancelWhenGracefulShutdown { try await send() }
        } catch is CancellationError {
        } catch {
            failure = error
        }
        try await client.shutdown()
        if let failure { throw failure }
    }

    private func send() async throws {
        try await withThrowingTaskGroup(of: Outcome.self) { group in
            var busy = Set<Delivery>()
            var perURLBusy: [String: Int] = [:]
            var ticking = false
            var gauged: ContinuousClock.Instant?
            // Whether a slot may have opened since the last look: at start, after a POST, a tick.
            var look = true
            var urls = try await store.deliveryURLs()
            while !Task.isCancelled {
                if look {
                    look = false
                    // URL by URL, each for as many as it has room for: an endpoint that hangs or
                    // fails, whatever its backlog, holds back no other.
                    for url in urls where busy.count < Self.maxInFlight {
                        let room = min(perURL - perURLBusy[url, default: 0], Self.maxInFlight - busy.count)
                        guard room > 0 else { continue }
                        let busyHere = busy.filter { $0.url == url }
                        for delivery in try await store.due(url: url, nowMS: EpochMilliseconds.now, limit: room, excluding: busyHere) {
                            busy.insert(delivery)
                            perURLBusy[url, default: 0] += 1
                            group.addTask { await attempt(delivery) }
                        }
                    }
                }
                if !ticking {
                    // Looks again when deliveries are queued, when the next one falls due, or at
                    // least every second.
                    ticking = true
                    if gauged.map({ ContinuousClock.now - $0 >= .seconds(1) }) ?? true {
                        NotificationMetrics.pending.record(try await store.pendingCount())
                        gauged = .now
                    }
                    let next = try await store.nextDue()
                    let looked = UInt64(EpochMilliseconds.now)
                    group.addTask { [store] in
                        var wait = Duration.seconds(1)
                        if let next { wait = min(wait, .milliseconds(max(next - Int64(looked), 5))) }
                        _ = await store.queued.wait("", beyond: looked, timeout: wait)
                        return .tick
                    }
                }
                guard let outcome = try await group.next() else { continue }
                switch outcome {
                case .posted(let delivery, let result, let status, let startedMS, let detail):
                    look = true
                    // The URL may take another POST while this one's record commits (with others',
                    // in one group): the endpoint's answers, not the disk, pace its deliveries. The
                    // delivery stays busy until its record is in, so it is never sent twice.
                    perURLBusy[delivery.url, default: 1] -= 1
                    group.addTask { try await record(delivery, result: result, status: status, startedMS: startedMS, detail: detail) }
                case .recorded(let delivery):
                    busy.remove(delivery)
                case .tick:
                    ticking = false
                    look = true
                    // New URLs come with new deliveries, which ring the tick.
                    urls = try await store.deliveryURLs()
                }
            }
            group.cancelAll()
        }
    }

    /// One attempt's POST at `delivery`.
    private func attempt(_ delivery: Delivery) async -> Outcome {
        let started = EpochMilliseconds.now
        let (result, status, detail) = await post(delivery)
        return .posted(delivery, result: result, status: status, startedMS: started, detail: detail)
    }

    /// An attempt's record, committed.
    private func record(_ delivery: Delivery, result: String, status: Int, startedMS: Int64, detail: String) async throws -> Outcome {
        var scale = 1.0
        if result != "SUCCESS" {
            if let retryScale { scale = retryScale } else { scale = await clockScale(app: delivery.app) }
        }
        try await store.record(delivery, result: result, httpStatus: status, atMS: startedMS, scale: scale)
        NotificationMetrics.attempts(result).increment()
        if result == "SUCCESS" { NotificationMetrics.deliveryLag.recordMilliseconds(max(0, EpochMilliseconds.now - delivery.appendedMS)) }
        if result != "SUCCESS" {
            logger.info(
                "A webhook attempt failed",
                metadata: [
                    "app": "\(delivery.app)", "position": "\(delivery.position)", "attempt": "\(delivery.attempts + 1)", "result": "\(result)", "status": "\(status)",
                    "error": "\(detail)"
                ])
        }
        return .recorded(delivery)
    }

    /// How much faster than real time the app's store clock runs a month (1: real time): Apple's
    /// retry hours run on it. Read from the payment queue's renewal rate, kept a minute; real time
    /// while it cannot be read.
    func clockScale(app: String) async -> Double {
        if let kept = clockScales.kept.withLock({ $0[app] }), ContinuousClock.now - kept.read < .seconds(60) { return kept.scale }
        guard let queue,
            let answer = try? await queue.call(Storebus_PaymentQueue_V1_Subscriptions.getRenewalRate, .with { $0.appBundleID = app }, options: CallOptions(timeout: .seconds(2))),
            answer.monthMilliseconds > 0
        else { return 1 }
        let scale = min(1, Double(answer.monthMilliseconds) / 2_592_000_000)
        clockScales.kept.withLock { $0[app] = (scale, .now) }
        return scale
    }

    /// POSTs the notification; Apple's sendAttemptResult, the HTTP status (0: none) and what went
    /// wrong when nothing answered (for the log).
    private func post(_ delivery: Delivery) async -> (String, Int, String) {
        do {
            guard let payload = try await store.signedPayload(app: delivery.app, position: delivery.position) else { return ("OTHER", 0, "no signed payload") }
            var request = HTTPClientRequest(url: delivery.url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: "StoreBus-Notifications/2.0")
            var body = ByteBuffer()
            body.writeString("{\"signedPayload\":\"")
            body.writeString(payload)
            body.writeString("\"}")
            request.body = .bytes(body)
            let (seconds, attoseconds) = timeout.components
            let response = try await client.execute(request, timeout: .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
            // The answer's body is read (at most 64 KiB) and dropped: only its status counts.
            _ = try await response.body.collect(upTo: 64 * 1024)
            let code = Int(response.status.code)
            return ((200...206).contains(code) ? "SUCCESS" : "UNSUCCESSFUL_HTTP_RESPONSE_CODE", code, "")
        } catch let error as HTTPClientError {
            if [.deadlineExceeded, .readTimeout, .connectTimeout, .writeTimeout].contains(error) { return ("TIMED_OUT", 0, "\(error)") }
            if error == .remoteConnectionClosed { return ("PREMATURE_CLOSE", 0, "\(error)") }
            return (Self.classify(error), 0, "\(error)")
        } catch {
            return (Self.classify(error), 0, "\(type(of: error)) \(error)")
        }
    }

    /// Apple's sendAttemptResult for an error other than a time-out or an early close.
    static func classify(_ error: any Error) -> String {
        let text = "\(type(of: error)) \(error)"
        if text.contains("SSL") || text.contains("TLS") || text.contains("certificate") { return "TLS_ISSUE" }
        // Nobody listening, no route: the endpoint never answered.
        if text.contains("ConnectionError") || text.contains("connectFailed") || text.contains("Connection refused") { return "NO_RESPONSE" }
        return "SOCKET_ISSUE"
    }
}
