import Foundation
import Logging
import Metrics
import ServiceLifecycle
import StoreBus
import StoreBusServer
import StoreSchema
import Synchronization

/// The gateway's handlers: Authenticate, Observe, and the forwarding of client and admin calls to
/// the services.
///
/// It holds no state of its own: sessions are signed tokens (``SessionSigner``), the observer stream
/// is read from the payment queue's event log at the position each call acknowledges, and forwarded
/// calls carry their bodies through undecoded.
public final class GatewayHandlers: Storebus_Gateway_V1_Gateway.Handlers {
    /// The metadata entry that carries the session token.
    public static let sessionMetadataKey = "session"
    /// Credit of an Observe call that grants none.
    public static let defaultCredit: UInt32 = 64
    /// Longest a parked Observe trusts doorbells alone before reading the log again.
    static let recheckInterval: Duration = .seconds(1)

    private let keyring: APIKeyring
    private let signer: SessionSigner
    private let sessionLifetime: Int64
    /// Longest session lifetime the gateway accepts: a year, in seconds.
    public static let maxSessionLifetimeSeconds = 366 * 24 * 3600
    /// What each forwarded path goes to, from the contract and the upstreams.
    private let table: ForwardingTable
    /// The payment queue's client, for the observer stream (its event log and queue snapshots).
    private let paymentQueue: RPCClient
    private let board: DoorbellBoard
    private let recent: RecentEvents?
    private let answers: AnswerCache
    private let logger: Logger
    private let closing = Atomic<Bool>(false)
    /// Observe calls held open now, and the most allowed: each holds a slot of the RPC server until it
    /// answers, so beyond the cap Observe answers at once (the client simply calls again).
    private let parked = Atomic<Int>(0)
    /// `storebus_gateway_observe_parked`: Observe calls held open right now.
    private let parkedGauge = Gauge(label: "storebus_gateway_observe_parked")
    private let maxParked: Int
    /// Observe calls held open now per queue: one device (or one client looping on its session) may
    /// hold only a few, so it cannot take every slot from the others.
    private let parkedPerQueue = Mutex<[String: Int]>([:])
    static let maxParkedPerQueue = 8
    /// Tokens already verified, with their claims: checking a MAC and decoding claims on every call
    /// was a quarter of the gateway's work. A cache only: expiry and revocation are checked on every
    /// use, and any gateway verifies a token it has not seen.
    private let verified = Mutex<[VerifiedToken: SessionClaims]>([:])
    static let verifiedCapacity = 50_000

    /// A token as the cache's key, hashed by its last bytes only: they are the MAC's, which no one
    /// without the secret chooses, and hashing a whole token (about 150 bytes) on each call was 2% of
    /// the gateway's instructions per purchase flow. Equality still compares the whole token.
    struct VerifiedToken: Hashable {
        let token: String

        func hash(into hasher: inout Hasher) {
            var token = token
            token.withUTF8 { bytes in
                hasher.combine(bytes.count)
                hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes.suffix(16))))
            }
        }
    }

    /// A gateway forwarding the client and admin methods of each upstream's services to it; the
    /// observer stream follows the log of `paymentQueue`, for which `board` rings, and `recent` (when
    /// given) keeps the events its doorbells carry, fed by the board's `heard`. Throws when an
    /// upstream names a service the contract does not have, or one another upstream serves.
    public init(
        keyring: APIKeyring, signer: SessionSigner, sessionLifetimeSeconds: Int = 3600,
        upstreams: [GatewayUpstream], paymentQueue: RPCClient, board: DoorbellBoard, recent: RecentEvents? = nil, logger: Logger,
        maxParkedObservers: Int = 100_000, answers: AnswerCache = AnswerCache(lifetime: .zero)
    ) throws {
        self.table = try ForwardingTable(upstreams: upstreams)
        self.recent = recent
        self.answers = answers
        self.maxParked = maxParkedObservers
        self.keyring = keyring
        self.signer = signer
        precondition((1...Self.maxSessionLifetimeSeconds).contains(sessionLifetimeSeconds), "a session lifetime of 1 s to a year")
        self.sessionLifetime = Int64(sessionLifetimeSeconds)
        self.paymentQueue = paymentQueue
        self.board = board
        self.logger = logger
    }

    /// Every method the gateway answers besides the built-in Health and Diagnostics: its own, and a
    /// forwarder for each method of the contract it routes.
    public var router: RPCRouter {
        // Observe's session is checked before its body is read: a caller without one hears
        // UNAUTHENTICATED, never a description of its body.
        var router = RPCRouter(interceptors: StandardInterceptors.all + [SessionAdmission(gateway: self)])
        router.register(self)
        for route in table.routes {
            router.registerRaw(path: route.method.path) { [self] body, context in
                try await forward(route, body: body, context: context)
            }
        }
        for method in table.refused {
            router.registerRaw(path: method.path) { _, _ in
                throw RPCError(.permissionDenied, "\(method.path) is internal to a StoreBus deployment and is not served through the gateway")
                    .withReason("INTERNAL_METHOD", domain: "storebus.gateway")
            }
        }
        return router
    }

    /// Answers parked Observe calls at once from now on (the process is stopping).
    public func beginClosing() async {
        guard !closing.exchange(true, ordering: .acquiringAndReleasing) else { return }
        await board.shutdown()
    }

    /// Sessions are checked in memory and the observer stream awaits the payment queue: on the loop.
    public var loopSafe: LoopSafeMethods { .all(of: Storebus_Gateway_V1_Gateway.self) }

    public func authenticate(_ request: Storebus_Gateway_V1_AuthenticateRequest, context: ServerContext) async throws -> Storebus_Gateway_V1_AuthenticateResponse {
        try authenticate(request)
    }

    public func observe(_ request: Storebus_Gateway_V1_ObserveRequest, context: ServerContext) async throws -> PrewrittenResponse<Storebus_Gateway_V1_ObserveResponse> {
        PrewrittenResponse(json: try await observe(request, session: try session(context), context: context).encoded())
    }

    /// Admits an Observe call only with a valid session, before its body is read.
    struct SessionAdmission: ServerInterceptor {
        let gateway: GatewayHandlers

        func admit(method: AnyMethodDescriptor, context: ServerContext) throws(RPCError) {
            guard method.path == Storebus_Gateway_V1_Gateway.observe.path else { return }
            guard try !gateway.session(context).server else {
                throw RPCError(.permissionDenied, "a server session has no queue to observe: follow the app's notifications instead")
                    .withReason("DEVICE_SESSION_REQUIRED", domain: "storebus.gateway")
            }
        }
    }

    // MARK: Sessions

    func authenticate(_ request: Storebus_Gateway_V1_AuthenticateRequest) throws(RPCError) -> Storebus_Gateway_V1_AuthenticateResponse {
        guard !request.apiKey.isEmpty, let key = keyring.key(for: request.apiKey) else {
            logger.info("Authentication refused: unknown API key", metadata: ["app": "\(request.appBundleID)"])
            throw RPCError(.unauthenticated, "the API key is not valid").withReason("INVALID_API_KEY", domain: "storebus.gateway")
        }
        if key.server {
            // The app's backend: a session of the app alone.
            try QueueNames.check(request.appBundleID, field: "appBundleId")
            guard request.accountID.isEmpty, request.deviceID.isEmpty else {
                throw RPCError.invalidArgument(field: request.accountID.isEmpty ? "deviceId" : "accountId", "a server key's session acts for its app alone: leave the account and device empty")
            }
        } else {
            try QueueNames.check(app: request.appBundleID, account: request.accountID, device: request.deviceID)
        }
        guard key.allows(app: request.appBundleID) else {
            throw RPCError.resource(.permissionDenied, type: "app", name: request.appBundleID, "the API key \(key.name) may not act for app \(RPCError.echo(request.appBundleID))")
                .withReason("APP_NOT_ALLOWED", domain: "storebus.gateway")
        }
        let expires = Int64(Date().timeIntervalSince1970) + sessionLifetime
        let claims = SessionClaims(
            app: request.appBundleID, account: request.accountID, device: request.deviceID,
            key: APIKeyring.identifier(of: key), expires: expires
        )
        return .with {
            $0.sessionID = signer.token(for: claims)
            $0.expiresAt = .init(seconds: expires, nanos: 0)
            $0.allowedMethods = table.allowedPaths(for: key)
            $0.queue = .with {
                $0.appBundleID = request.appBundleID
                $0.accountID = request.accountID
                $0.deviceID = request.deviceID
            }
            $0.admin = key.admin
        }
    }

    /// A verified session and the key it was opened with, as configured now.
    struct Session {
        var claims: SessionClaims
        var key: APIKey
        var admin: Bool { key.admin }
        /// An app's backend: no queue, the server methods only.
        var server: Bool { key.server }
    }

    /// The call's session, or UNAUTHENTICATED.
    func session(_ context: ServerContext) throws(RPCError) -> Session {
        guard let token = context.metadata[Self.sessionMetadataKey], !token.isEmpty else {
            throw RPCError(
                .unauthenticated, "this call needs a session: call \(Storebus_Gateway_V1_Gateway.authenticate.path) and send its sessionId as the \"\(Self.sessionMetadataKey)\" metadata entry"
            )
            .withReason("SESSION_REQUIRED", domain: "storebus.gateway")
        }
        let claims: SessionClaims
        if let known = verified.withLock({ $0[VerifiedToken(token: token)] }) {
            guard Int64(Date().timeIntervalSince1970) < known.expires else {
                _ = verified.withLock { $0.removeValue(forKey: VerifiedToken(token: token)) }
                throw RPCError(.unauthenticated, "the session has expired; authenticate again").withReason("SESSION_EXPIRED", domain: "storebus.gateway")
            }
            claims = known
        } else {
            claims = try verify(token)
            verified.withLock { cache in
                if cache.count >= Self.verifiedCapacity { cache.removeAll(keepingCapacity: true) }
                cache[VerifiedToken(token: token)] = claims
            }
        }
        guard let key = keyring.key(identifier: claims.key), key.allows(app: claims.app) else {
            throw RPCError(.unauthenticated, "the session's API key has been revoked").withReason("SESSION_REVOKED", domain: "storebus.gateway")
        }
        return Session(claims: claims, key: key)
    }

    private func verify(_ token: String) throws(RPCError) -> SessionClaims {
        do {
            return try signer.claims(of: token)
        } catch .expired {
            throw RPCError(.unauthenticated, "the session has expired; authenticate again").withReason("SESSION_EXPIRED", domain: "storebus.gateway")
        } catch {
            throw RPCError(.unauthenticated, "the session is not valid").withReason("SESSION_INVALID", domain: "storebus.gateway")
        }
    }

    /// The metadata a service sees for a call of this session: the principal (none for admin
    /// sessions, which act across accounts) and the caller's idempotency key. Anything else the
    /// client sent, a forged principal included, stays behind.
    private func upstreamMetadata(_ session: Session, from context: ServerContext) -> Metadata {
        var metadata = Metadata()
        metadata[WireProtocol.callerRequestIDMetadata] = context.requestID
        if let key = context.metadata[WireProtocol.idempotencyKeyMetadata] {
            metadata[WireProtocol.idempotencyKeyMetadata] = key
        }
        if !session.admin {
            let claims = session.claims
            Principal(app: claims.app, account: claims.account, device: claims.device).apply(to: &metadata)
        }
        return metadata
    }

    // MARK: Forwarding

    /// The time a call forwarded for `context` may take: what the caller has left, less a tenth of it (5 to
    /// 100 ms), so that the upstream's answer, or the gateway's own when the call timed out or was never
    /// sent, still reaches the caller before its deadline (with 5 ms, a loaded machine often let the
    /// caller time out first, hiding a NOT_SENT that said the call did not run).
    private func upstreamTimeout(_ context: ServerContext) -> Duration? {
        context.timeRemaining.map { remaining in
            let margin = min(max(remaining / 10, .milliseconds(5)), .milliseconds(100))
            return max(remaining - margin, .milliseconds(1))
        }
    }

    /// Passes a call to the upstream serving it, and its answer back as it came: body and
    /// attachment undecoded.
    func forward(_ route: ForwardingTable.Route, body: [UInt8], context: ServerContext) async throws -> RawReply {
        let session = try session(context)
        guard ForwardingTable.allows(session.key, route.method.access) else {
            switch route.method.access {
            case .server:
                throw RPCError(.permissionDenied, "\(route.method.path) needs a server session (the app's server key)").withReason("SERVER_REQUIRED", domain: "storebus.gateway")
            case .client:
                throw RPCError(.permissionDenied, "\(route.method.path) is a device's call: a server session has no account or device")
                    .withReason("DEVICE_SESSION_REQUIRED", domain: "storebus.gateway")
            default:
                throw RPCError(.permissionDenied, "\(route.method.path) needs an admin session").withReason("ADMIN_REQUIRED", domain: "storebus.gateway")
            }
        }
        // Not for admin sessions: services let them read any app, so their answers are not the
        // session's app's to give.
        let cached = !session.admin && route.method.cacheable
        if cached, let answer = answers.answer(path: route.method.path, app: session.claims.app, body: body) { return RawReply(body: answer) }
        logger.debug(
            "Forwarding",
            metadata: [
                "request.id": "\(context.requestID)", "rpc.method": "\(route.method.path)", "upstream": "\(route.upstream.name)"
            ])
        let options = CallOptions(timeout: upstreamTimeout(context), metadata: upstreamMetadata(session, from: context))
        let response: RawResponse
        if let router = route.upstream.router {
            // A device's calls go to the instance owning its account's shard; an admin's or an app
            // backend's name no account the gateway knows, and go to any (which names the owner
            // when it is not).
            let device = !session.admin && !session.server
            response = try await router.callRaw(
                path: route.method.path, idempotent: route.method.idempotent, body: body, options: options,
                app: device ? session.claims.app : nil, account: device ? session.claims.account : nil)
        } else {
            response = try await route.upstream.client.callRaw(path: route.method.path, idempotent: route.method.idempotent, body: body, options: options)
        }
        guard response.code == .ok else {
            throw response.error ?? RPCError(response.code, "\(route.method.path) failed")
        }
        if cached && response.attachment == nil { answers.keep(response.body, path: route.method.path, app: session.claims.app, body: body) }
        return RawReply(body: response.body, attachment: response.attachment)
    }

    // MARK: The observer stream

    /// An Observe answer: a message, or callbacks kept as JSON (from doorbells).
    enum ObserveAnswer {
        case message(Storebus_Gateway_V1_ObserveResponse)
        case kept(events: [[UInt8]], headSeq: UInt64)

        func encoded() throws -> [UInt8] {
            switch self {
            case .message(let response): return try JSONCodec.encode(response)
            case .kept(let events, let headSeq): return ObserverEventJSON.response(events: events, headSeq: headSeq)
            }
        }
    }

    func observe(_ request: Storebus_Gateway_V1_ObserveRequest, session: Session, context: ServerContext) async throws -> ObserveAnswer {
        let claims = session.claims
        // The contract bounds credit (500) and waitMs (30,000).
        let credit = request.credit == 0 ? Self.defaultCredit : request.credit
        guard !request.replay || credit >= 2 else {
            throw RPCError.invalidArgument(field: "credit", "a replay answer holds two callbacks (the replayed transactions, then the end of the replay): grant at least 2")
        }
        let queue = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = claims.app
            $0.accountID = claims.account
            $0.deviceID = claims.device
        }
        let metadata = upstreamMetadata(session, from: context)
        if request.replay {
            return .message(try await replay(queue, metadata: metadata, context: context))
        }
        // Hold the call until something arrives, the client's wait ends, or its deadline nears.
        var wait = Duration.milliseconds(Int64(request.waitMs))
        if let remaining = context.timeRemaining { wait = min(wait, remaining - .milliseconds(50)) }
        let waitEnd = ContinuousClock.now + wait
        var first = true
        while true {
            // The ticket comes before any look, so a doorbell that rings after the look wakes the wait.
            let ticket = board.ticket(key: queue.key, beyond: request.afterSeq)
            let events: [Storebus_Gateway_V1_ObserverEvent]
            let head: UInt64
            var readSkipped = false
            switch recent?.lookup(key: queue.key, after: request.afterSeq, limit: Int(credit)) {
            case .events(let known, let newest):
                // What the doorbells brought: committed events, consecutive after the position.
                board.cancel(ticket)
                return .kept(events: known, headSeq: newest)
            case .caughtUp where first && ContinuousClock.now < waitEnd:
                // Nothing newer was announced: wait for a doorbell without reading the log first. A
                // wait that times out reads it (below, on the next turn), as doorbells can be lost.
                events = []
                head = request.afterSeq
                readSkipped = true
            default:
                let page: Storebus_PaymentQueue_V1_QueueEventPage
                do {
                    page = try await readEvents(key: queue.key, after: request.afterSeq, limit: credit, context: context)
                } catch {
                    board.cancel(ticket)
                    throw error
                }
                recent?.check(key: queue.key, logHead: page.headSeq)
                guard request.afterSeq <= page.headSeq else {
                    board.cancel(ticket)
                    throw RPCError(.outOfRange, "afterSeq \(request.afterSeq) is past the queue's newest position \(page.headSeq)")
                }
                events = callbacks(page, after: request.afterSeq)
                head = page.headSeq
            }
            first = false
            let now = ContinuousClock.now
            let full = !events.isEmpty || now >= waitEnd || closing.load(ordering: .acquiring)
            if full || !park(queue.key) {
                board.cancel(ticket)
                // An answer is never given on the doorbells' word alone: read the log first.
                if readSkipped { continue }
                return .message(
                    .with {
                        $0.events = events
                        $0.headSeq = head
                    })
            }
            await board.wait(ticket, timeout: min(now.duration(to: waitEnd), Self.recheckInterval))
            unpark(queue.key)
            try Task.checkCancellation()
        }
    }

    /// Takes a parking slot for a call on the queue `key`; false when the gateway or the queue holds
    /// as many parked calls as it may (the call is then answered at once).
    private func park(_ key: String) -> Bool {
        guard parked.wrappingAdd(1, ordering: .relaxed).newValue <= maxParked else {
            parked.wrappingSubtract(1, ordering: .relaxed)
            return false
        }
        let taken = parkedPerQueue.withLock { counts -> Bool in
            let count = counts[key, default: 0]
            guard count < Self.maxParkedPerQueue else { return false }
            counts[key] = count + 1
            return true
        }
        if !taken { parked.wrappingSubtract(1, ordering: .relaxed) }
        parkedGauge.record(parked.load(ordering: .relaxed))
        return taken
    }

    /// Gives back the slot `park` took.
    private func unpark(_ key: String) {
        parkedPerQueue.withLock { counts in
            let count = counts[key, default: 1] - 1
            counts[key] = count > 0 ? count : nil
        }
        parkedGauge.record(parked.wrappingSubtract(1, ordering: .relaxed).newValue)
    }

    /// An app launch: every unfinished transaction of the queue, then the end of the replay, both at
    /// the position the snapshot reflects.
    private func replay(_ queue: Storebus_PaymentQueue_V1_QueueRef, metadata: Metadata, context: ServerContext) async throws -> Storebus_Gateway_V1_ObserveResponse {
        let snapshot = try await paymentQueue.call(
            Storebus_PaymentQueue_V1_PaymentQueue.snapshotQueue, .with { $0.queue = queue },
            options: CallOptions(timeout: upstreamTimeout(context), metadata: metadata)
        )
        var events: [Storebus_Gateway_V1_ObserverEvent] = []
        if !snapshot.transactions.isEmpty {
            events.append(
                .with {
                    $0.seq = snapshot.keySeq
                    $0.updatedTransactions.transactions = snapshot.transactions
                    $0.replayed = true
                })
        }
        events.append(
            .with {
                $0.seq = snapshot.keySeq
                $0.replayComplete.replayedCount = UInt32(snapshot.transactions.count)
            })
        return .with {
            $0.events = events
            $0.headSeq = snapshot.keySeq
        }
    }

    /// A page of the queue's events, read from the payment queue's log and decoded with typed payloads.
    private func readEvents(key: String, after position: UInt64, limit: UInt32, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_QueueEventPage {
        let body = try JSONCodec.encode(
            Storebus_Eventlog_V1_ReadEventsRequest.with {
                $0.key = key
                $0.afterSeq = position
                $0.limit = limit
            })
        let method = Storebus_Eventlog_V1_EventLog.readEvents
        let response = try await paymentQueue.callRaw(
            path: method.path, idempotent: true, body: body, options: CallOptions(timeout: upstreamTimeout(context))
        )
        guard response.code == .ok else {
            throw response.error ?? RPCError(response.code, "reading the payment queue's log failed")
        }
        return try JSONCodec.decode(Storebus_PaymentQueue_V1_QueueEventPage.self, from: response.body)
    }

    /// The callbacks of a page: its events after `position`, consecutive, one callback each.
    private func callbacks(_ page: Storebus_PaymentQueue_V1_QueueEventPage, after position: UInt64) -> [Storebus_Gateway_V1_ObserverEvent] {
        var next = position + 1
        var events: [Storebus_Gateway_V1_ObserverEvent] = []
        for record in page.events where record.keySeq >= next {
            guard record.keySeq == next else {
                // Never skip: the client gets what is consecutive and asks again for the rest.
                logger.error("Gap in the payment queue's log", metadata: ["queue.key": "\(record.key)", "expected": "\(next)", "got": "\(record.keySeq)"])
                break
            }
            events.append(Self.callback(record))
            next += 1
        }
        return events
    }

    /// The observer callback of one queue event: the callback the contract delivers it as
    /// (`delivered_as` in payment_queue.proto), or none: an event for followers only, or of a kind
    /// newer than this gateway, is still delivered (without a callback), so that the client's
    /// positions stay consecutive.
    static func callback(_ record: Storebus_PaymentQueue_V1_QueueEventRecord) -> Storebus_Gateway_V1_ObserverEvent {
        var event = Storebus_Gateway_V1_ObserverEvent()
        event.seq = record.keySeq
        event.callback = record.payload.deliveredAsObserverEvent
        return event
    }
}

/// Closes the gateway's parked observer calls when the process begins to stop, so that the RPC
/// server's drain does not wait out their holds.
public struct GatewayCloser: Service {
    let gateway: GatewayHandlers

    /// A closer for `gateway`.
    public init(gateway: GatewayHandlers) { self.gateway = gateway }

    public func run() async throws {
        try? await gracefulShutdown()
        await gateway.beginClosing()
    }
}
