import Logging
import ServiceLifecycle
import StoreBus
import StoreSchema
import ZeroMQ

/// A StoreBus RPC server: a ROUTER socket on a reactor thread, dispatching each request to its
/// handler in a task of its own, started on the reactor for loop-safe methods and on Swift's global
/// executor for the others (``RPCRouter/Placement``).
///
/// Requests are matched to answers by the caller's request id, so callers pipeline freely. Each
/// request carries the caller's timeout; when it passes, the handler's task is cancelled, its work
/// dropped and DEADLINE_EXCEEDED sent. A cancel message from the caller does the same without an
/// answer. Anything that is not a valid request gets an error status and never stops the server.
public final class RPCServer: Service, Sendable {
    /// The endpoints actually bound (wildcard ports resolved), in configuration order.
    public let boundEndpoints: [String]
    /// The server's counters.
    public let statistics: ServerStatistics

    private let reactor: Reactor
    private let loop: LoopBound<ServerLoop>

    /// Creates the socket and binds every endpoint; throws ``StartupError`` naming the endpoint that
    /// could not be bound. The server answers nothing until ``run()`` or ``start()``.
    ///
    /// With a `reactor`, the server runs on it and starts and stops it: other components of the
    /// process (RPC clients, doorbell sockets) can live on the same thread as the handlers, which
    /// then reach them without a thread hop. Without one, the server makes its own.
    public init(
        configuration: ServerConfiguration,
        router: RPCRouter,
        context: ZeroMQ.Context,
        reactor: Reactor? = nil,
        statistics: ServerStatistics = ServerStatistics(),
        logger: Logger
    ) throws {
        let socket: Socket
        var bound: [String] = []
        do {
            socket = try Socket(context: context, type: .router)
            try socket.set(.routerMandatory(true))
            try socket.applyRPCLimits(
                maxMessageBytes: configuration.maxMessageBytes, highWaterMark: configuration.highWaterMark,
                heartbeatInterval: configuration.heartbeatInterval, heartbeatTimeout: configuration.heartbeatTimeout
            )
        } catch {
            throw StartupError("cannot create the RPC socket: \(error.message)")
        }
        for endpoint in configuration.endpoints {
            do {
                try socket.bind(endpoint)
                bound.append(socket.lastEndpoint)
            } catch {
                socket.close()
                throw StartupError("cannot listen on \(endpoint): \(error.message)")
            }
        }
        self.boundEndpoints = bound
        self.statistics = statistics
        let reactor = reactor ?? Reactor(name: "sb-rpc-server", context: context)
        self.reactor = reactor
        let state = ServerLoop(
            socket: socket, router: router, reactor: reactor, statistics: statistics,
            configuration: configuration, logger: logger
        )
        self.loop = LoopBound(state, on: reactor)
        state.box = loop
        reactor.execute { [loop] in loop.value.attach() }
    }

    /// Starts answering requests on the reactor thread.
    public func start() {
        reactor.start()
    }

    /// Serves until a graceful shutdown (from ServiceLifecycle or ``beginGracefulShutdown()``) has
    /// drained running requests.
    public func run() async {
        start()
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await reactor.join()
            } onGracefulShutdown: { [self] in
                beginGracefulShutdown()
            }
        } onCancel: { [reactor] in
            // The service group cancels its services when one of them ends: stop at once.
            reactor.stop()
        }
    }

    /// Stops accepting requests (new ones get UNAVAILABLE), lets running ones finish within the grace
    /// period, then closes the socket.
    public func beginGracefulShutdown() {
        reactor.execute { [loop] in loop.value.beginDraining() }
    }

    /// Shuts down gracefully and waits for the socket to be closed.
    public func shutdown() async {
        beginGracefulShutdown()
        await reactor.join()
    }
}

/// The server's loop-confined state.
final class ServerLoop {
    struct Key: Hashable {
        let envelope: Envelope
        let requestID: [UInt8]

        // Hash the bytes in bulk: the synthesized conformance hashes arrays element by element.
        func hash(into hasher: inout Hasher) {
            requestID.withUnsafeBytes { hasher.combine(bytes: $0) }
            for frame in envelope.routing {
                frame.withUnsafeBytes { hasher.combine(bytes: $0) }
            }
        }
    }

    struct Entry {
        let token: UInt64
        let method: String
        let started: ContinuousClock.Instant
        var task: Task<Void, Never>?
        var timer: TimerID? = nil
    }

    let socket: Socket
    let router: RPCRouter
    let reactor: Reactor
    let statistics: ServerStatistics
    let configuration: ServerConfiguration
    let logger: Logger
    weak var box: LoopBound<ServerLoop>?
    /// Handlers' tasks prefer the loop thread (see ``ReactorExecutor``).
    let executor: ReactorExecutor

    private var inFlight: [Key: Entry] = [:]
    private let callMetrics: RPCCallMetrics
    private var nextToken: UInt64 = 1
    /// The token of the loop-placed call being started inline (0 when none), and its outcome if it
    /// finished before its first suspension.
    private var startingInline: UInt64 = 0
    private var inlineOutcome: Result<RawReply, any Error>?
    private var draining = false

    init(socket: Socket, router: RPCRouter, reactor: Reactor, statistics: ServerStatistics, configuration: ServerConfiguration, logger: Logger) {
        self.socket = socket
        self.router = router
        callMetrics = RPCCallMetrics(router: router)
        self.reactor = reactor
        self.statistics = statistics
        self.configuration = configuration
        self.logger = logger
        self.executor = ReactorExecutor(reactor: reactor)
    }

    func attach() {
        reactor.register(socket) { [unowned self] in self.readAvailable() }
        reactor.onStop { [socket] in
            // Give replies sent just before the stop (the last ones of a drain) a second to leave.
            try? socket.set(.linger(1000))
            socket.close()
        }
    }

    /// Handles the messages waiting (at most 256, so that other sockets get their turn); false when
    /// it took them all.
    @discardableResult
    private func readAvailable() -> Bool {
        for _ in 0..<256 {
            let message: Message
            do {
                message = try socket.receive(dontWait: true)
            } catch {
                return false
            }
            handle(message.frames)
        }
        return true
    }

    private func handle(_ frames: [[UInt8]]) {
        switch Frames.parseAtServer(frames) {
        case .malformed(let envelope, let requestID, let reason, let answerable):
            ServerStatistics.bump(statistics.malformedMessages)
            logger.debug("Malformed message", metadata: ["reason": "\(reason)"])
            guard !envelope.routing.isEmpty, answerable else { return }
            let error = RPCError(.invalidArgument, "malformed message: \(reason)").withReason("MALFORMED_MESSAGE", domain: "storebus.rpc")
            // With the id of a call still running on the connection, the answer goes without it: the
            // running call's answer stays the only one carrying it.
            let running = !requestID.isEmpty && inFlight[Key(envelope: envelope, requestID: requestID)] != nil
            send(envelope: envelope, requestID: running ? [] : requestID, error: error)
        case .cancel(let envelope, let requestID):
            // A cancel is never answered, whether or not the call is still running.
            let key = Key(envelope: envelope, requestID: requestID)
            guard let entry = inFlight.removeValue(forKey: key) else { return }
            entry.task?.cancel()
            if let timer = entry.timer { reactor.cancel(timer) }
            ServerStatistics.bump(statistics.cancelled)
            callMetrics.record(method: entry.method, code: .cancelled, since: entry.started)
            finishIfDrained()
        case .request(let request):
            start(request)
        }
    }

    private func start(_ request: InboundRequest) {
        let started = ContinuousClock.now
        ServerStatistics.bump(statistics.requestsReceived)
        let key = Key(envelope: request.envelope, requestID: request.requestID)
        // Checked first, so that no refusal below (shutting down, unknown method) carries the id.
        guard inFlight[key] == nil else {
            // Answered without the id: the running call with that id keeps the only answer carrying it.
            ServerStatistics.bump(statistics.requestsFailed)
            let error = RPCError(.invalidArgument, "request id \(String(decoding: request.requestID, as: UTF8.self)) is already in use on this connection")
            return send(envelope: request.envelope, requestID: [], error: error.withReason("DUPLICATE_REQUEST_ID", domain: "storebus.rpc"))
        }
        if draining {
            return reject(request, RPCError(.unavailable, "the server is shutting down", details: .with { $0.retry.retryDelayMs = 100 }))
        }
        guard let entry = router.entry(for: request.method) else {
            return reject(request, RPCError(.unimplemented, "unknown method \(RPCError.echo(request.method))").withReason("UNKNOWN_METHOD", domain: "storebus.rpc"))
        }
        guard inFlight.count < configuration.maxInFlight else {
            return reject(request, RPCError(.resourceExhausted, "the server is handling \(inFlight.count) requests; try again shortly", details: .with { $0.retry.retryDelayMs = 50 }))
        }
        var deadline: ContinuousClock.Instant?
        if let timeout = request.timeoutMilliseconds {
            guard timeout > 0 else {
                ServerStatistics.bump(statistics.deadlineExceeded)
                callMetrics.record(method: request.method, code: .deadlineExceeded, since: started)
                return send(envelope: request.envelope, requestID: request.requestID, error: RPCError(.deadlineExceeded, "the deadline had passed when the request arrived"))
            }
            deadline = .now + .milliseconds(Int64(timeout))
        }
        let idText = String(decoding: request.requestID, as: UTF8.self)
        // With a forwarder's caller-request-id, a caller's call can be followed from the gateway's
        // log to the service's.
        logger.debug(
            "Request",
            metadata: [
                "request.id": "\(idText)", "rpc.method": "\(request.method)",
                "caller.request.id": "\(request.metadata[WireProtocol.callerRequestIDMetadata] ?? "")"
            ])
        let context = ServerContext(method: request.method, requestID: idText, deadline: deadline, metadata: request.metadata, logger: logger)
        let body = request.body
        let handler = entry.handler
        let token = nextToken
        nextToken += 1
        guard let box else { return }
        let statistics = self.statistics
        let reactor = self.reactor
        let operation: @Sendable () async -> Void = {
            statistics.handlersRunning.wrappingAdd(1, ordering: .relaxed)
            let outcome: Result<RawReply, any Error>
            do {
                outcome = .success(try await handler(body, context))
            } catch {
                outcome = .failure(error)
            }
            statistics.handlersRunning.wrappingSubtract(1, ordering: .relaxed)
            if reactor.isInLoop {
                box.value.complete(key, token: token, outcome: outcome)
            } else {
                reactor.execute { box.value.complete(key, token: token, outcome: outcome) }
            }
        }
        let task: Task<Void, Never>
        switch entry.placement {
        case .loop:
            // Runs here until its first suspension: a handler that answers from memory has answered
            // when this returns (``complete(_:token:outcome:)`` sends it at once), with no entry in
            // the table, no timer set and no thread hop.
            startingInline = token
            task = Task.immediate(executorPreference: executor, operation: operation)
            startingInline = 0
            if let outcome = inlineOutcome {
                inlineOutcome = nil
                return answer(key, method: request.method, started: started, outcome: outcome)
            }
        case .pool:
            task = Task(executorPreference: globalConcurrentExecutor, operation: operation)
        }
        inFlight[key] = Entry(token: token, method: request.method, started: started, task: task)
        if let deadline {
            inFlight[key]?.timer = reactor.schedule(at: deadline) { [unowned self] in self.expire(key, token: token) }
        }
    }

    private func reject(_ request: InboundRequest, _ error: RPCError) {
        ServerStatistics.bump(statistics.requestsFailed)
        callMetrics.record(method: request.method, code: error.code, since: .now)
        send(envelope: request.envelope, requestID: request.requestID, error: error)
    }

    private func complete(_ key: Key, token: UInt64, outcome: Result<RawReply, any Error>) {
        if token == startingInline {
            // Finished inside `start`, before it made an entry: it answers.
            inlineOutcome = outcome
            return
        }
        guard let entry = inFlight[key], entry.token == token else { return } // dropped: deadline or cancel
        inFlight[key] = nil
        if let timer = entry.timer { reactor.cancel(timer) }
        answer(key, method: entry.method, started: entry.started, outcome: outcome)
        finishIfDrained()
    }

    private func answer(_ key: Key, method: String, started: ContinuousClock.Instant, outcome: Result<RawReply, any Error>) {
        switch outcome {
        case .success(let reply):
            ServerStatistics.bump(statistics.requestsSucceeded)
            callMetrics.record(method: method, code: .ok, since: started)
            send(envelope: key.envelope, requestID: key.requestID, code: .ok, body: reply.body, attachment: reply.attachment)
        case .failure(let error):
            complete(key.envelope, key.requestID, method: method, started: started, failure: error)
        }
    }

    /// Answers a request whose handler threw: its RPCError as is, anything else as INTERNAL (logged,
    /// never shown to the caller).
    private func complete(_ envelope: Envelope, _ requestID: [UInt8], method: String, started: ContinuousClock.Instant, failure error: any Error) {
        ServerStatistics.bump(statistics.requestsFailed)
        switch error {
        case let error as RPCError:
            callMetrics.record(method: method, code: error.code, since: started)
            send(envelope: envelope, requestID: requestID, error: error)
        case let error as CancellationError:
            callMetrics.record(method: method, code: .cancelled, since: started)
            send(envelope: envelope, requestID: requestID, error: RPCError(.cancelled, "the request was cancelled", cause: error))
        default:
            callMetrics.record(method: method, code: .internalError, since: started)
            logger.error(
                "Handler failed",
                metadata: [
                    "request.id": "\(String(decoding: requestID, as: UTF8.self))", "error": "\(String(reflecting: error))"
                ])
            send(envelope: envelope, requestID: requestID, error: RPCError(.internalError, "internal error"))
        }
    }

    private func expire(_ key: Key, token: UInt64) {
        guard let entry = inFlight[key], entry.token == token else { return }
        inFlight[key] = nil
        entry.task?.cancel()
        ServerStatistics.bump(statistics.deadlineExceeded)
        callMetrics.record(method: entry.method, code: .deadlineExceeded, since: entry.started)
        send(envelope: key.envelope, requestID: key.requestID, error: RPCError(.deadlineExceeded, "the deadline passed before the request completed"))
        finishIfDrained()
    }

    private func send(envelope: Envelope, requestID: [UInt8], error: RPCError) {
        let status = error.status
        var body = (try? JSONCodec.encode(status)) ?? []
        if body.count > ErrorStatusBounds.maxBodyBytes { body = (try? JSONCodec.encode(ErrorStatusBounds.compact(status))) ?? [] }
        send(envelope: envelope, requestID: requestID, code: error.code, body: body)
    }

    private func send(envelope: Envelope, requestID: [UInt8], code: StatusCode, body: [UInt8], attachment: HeldFrame? = nil) {
        // The caller's socket has the same MAXMSGSIZE as ours: a larger answer would make it drop the
        // connection, failing every other call in flight on it. The caller hears why instead.
        let largest = max(body.count, attachment?.count ?? 0)
        guard Int64(largest) <= configuration.maxMessageBytes else {
            logger.warning(
                "Answer over the message limit replaced by RESOURCE_EXHAUSTED",
                metadata: [
                    "request.id": "\(String(decoding: requestID, as: UTF8.self))", "bytes": "\(largest)"
                ])
            let error = RPCError(.resourceExhausted, "the answer (\(largest) bytes) is larger than the message limit (\(configuration.maxMessageBytes) bytes)")
            return send(envelope: envelope, requestID: requestID, error: error)
        }
        do {
            try socket.send(frames: Frames.response(envelope: envelope, requestID: requestID, code: code, body: body), last: attachment, dontWait: true)
        } catch {
            // The peer is gone (EHOSTUNREACH) or its queue is full (EAGAIN): the caller will time out.
            ServerStatistics.bump(statistics.repliesDropped)
            logger.debug("Reply dropped", metadata: ["error": "\(error)"])
        }
    }

    func beginDraining() {
        guard !draining else { return }
        draining = true
        // Requests already waiting are answered now (UNAVAILABLE with retry advice: they did not
        // run), not left to their callers' deadlines when the socket closes.
        var batches = 0
        while readAvailable() && batches < 64 { batches += 1 }
        if inFlight.isEmpty {
            reactor.stop()
            return
        }
        reactor.schedule(at: .now + configuration.shutdownGracePeriod) { [unowned self] in
            // Calls still running at the end of the grace period are answered before the socket
            // closes: UNAVAILABLE without retry advice, as they may have run.
            for (key, entry) in self.inFlight {
                entry.task?.cancel()
                if let timer = entry.timer { self.reactor.cancel(timer) }
                self.send(envelope: key.envelope, requestID: key.requestID, error: RPCError(.unavailable, "the server stopped before the call completed; it may have run"))
            }
            self.inFlight.removeAll()
            self.reactor.stop()
        }
    }

    private func finishIfDrained() {
        if draining && inFlight.isEmpty { reactor.stop() }
    }
}
