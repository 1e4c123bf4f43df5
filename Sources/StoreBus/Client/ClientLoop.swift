import Logging
import ZeroMQ

/// The client's loop-confined state: one DEALER and one monitor per endpoint, and the pending calls.
///
/// Its socket handlers and timers hold it strongly, so it lives as long as the reactor may still call
/// it, whatever becomes of the ``RPCClient``; the reactor lets them go when it stops.
final class ClientLoop {
    struct Endpoint {
        let address: String
        /// Replaced after a disconnect that left calls in flight (see ``replaceSocket(_:)``).
        var socket: Socket
        var monitor: Socket
        var connected = false
        var inFlight = 0
        /// Until when calls go elsewhere when they can: the server refused a call with retry advice
        /// (draining, overloaded), so it would most likely refuse the next one too.
        var restingUntil: ContinuousClock.Instant?
    }

    let configuration: ClientConfiguration
    let reactor: Reactor
    let logger: Logger
    /// Whether the reactor carries other components' sockets too (the client then unregisters its
    /// own before closing them).
    let shared: Bool
    private var endpoints: [Endpoint] = []
    private var pending: [UInt64: PendingCall] = [:]
    /// Calls waiting for a connected endpoint with room, in arrival order.
    private var waiting: [UInt64] = []
    private var retryTimerArmed = false
    private var rotation = 0
    /// Set when the reactor stops: calls that still arrive are cancelled at once.
    private var closed = false
    /// The reactor's stop action that closes this client, forgotten when the client closes first.
    private var stopAction: StopActionID?
    /// Call deadlines, earliest first. Entries of finished calls are skipped when they surface and
    /// dropped in bulk when they outnumber live calls; one reactor timer is armed for the earliest.
    private var deadlines = DeadlineHeap()
    private var deadlineTimer: (at: ContinuousClock.Instant, id: TimerID)?

    init(configuration: ClientConfiguration, reactor: Reactor, shared: Bool, logger: Logger) throws {
        self.configuration = configuration
        self.reactor = reactor
        self.shared = shared
        self.logger = logger
        for address in configuration.endpoints {
            let (socket, monitor) = try Self.connect(address, configuration: configuration, context: reactor.context)
            endpoints.append(Endpoint(address: address, socket: socket, monitor: monitor))
        }
    }

    /// A DEALER connecting to `address`, with the monitor that reports its connections.
    ///
    /// Not ZMQ_IMMEDIATE: with it, libzmq drops the answers a connection delivered just before it
    /// closed whenever the socket had already read everything before they came (a server answering
    /// as it shuts down lost its last answers so: 17 of 200 in a plain C test). Without it a request
    /// can wait in the socket for a connection; calls are sent only on connected endpoints, and the
    /// few left waiting when a connection drops go with the socket (see ``replaceSocket(_:)``).
    private static func connect(_ address: String, configuration: ClientConfiguration, context: ZeroMQ.Context) throws -> (socket: Socket, monitor: Socket) {
        let socket = try Socket(context: context, type: .dealer)
        do {
            try socket.applyRPCLimits(
                maxMessageBytes: configuration.maxMessageBytes, highWaterMark: configuration.highWaterMark,
                heartbeatInterval: configuration.heartbeatInterval, heartbeatTimeout: configuration.heartbeatTimeout
            )
            try socket.set(
                .reconnect(
                    interval: configuration.reconnectInterval.socketMilliseconds,
                    max: configuration.reconnectIntervalMax.socketMilliseconds
                ))
            if let serverKey = configuration.serverPublicKey {
                let own = try CurveKeyPair.generate()
                try socket.set(.curveClient(serverKey: serverKey, publicKey: own.publicKey, secretKey: own.secretKey))
            }
            let monitor = try socket.openMonitor(context: context, events: [.handshakeSucceeded, .disconnected])
            do {
                try socket.connect(address)
            } catch {
                socket.stopMonitor()
                monitor.close()
                throw error
            }
            return (socket, monitor)
        } catch {
            socket.close()
            throw error
        }
    }

    func attach() {
        // Closed before this job ran (shut down at once, on a shared reactor): nothing to register.
        guard !closed else { return }
        for index in endpoints.indices { register(index) }
        stopAction = reactor.onStop { [self] in self.close() }
    }

    // MARK: Calls

    func start(_ call: PendingCall) {
        if closed {
            call.finish(.failure(RPCError(.cancelled, "\(call.path): the client was shut down")))
            return
        }
        if call.cancelRequested.load(ordering: .acquiring) {
            call.finish(.failure(RPCError(.cancelled, "the call was cancelled")))
            return
        }
        pending[call.id] = call
        deadlines.push(call.deadline, call.id)
        if deadlines.count > 1024 && deadlines.count > 3 * pending.count {
            deadlines.removeAll { pending[$0] == nil }
        }
        // The timer only moves for an earlier deadline. Entries of answered calls stay in the heap
        // until the timer fires or the bulk removal above: popping them call by call cost a tenth of
        // the loop's time, and most calls share one timeout, so their deadlines arrive in order.
        if deadlineTimer.map({ call.deadline < $0.at }) ?? true { armDeadlineTimer() }
        dispatch(call)
    }

    func cancel(_ id: UInt64) {
        guard let call = pending.removeValue(forKey: id) else { return }
        abandon(call, tellServer: true)
        call.finish(.failure(RPCError(.cancelled, "the call was cancelled")))
    }

    /// Keeps one reactor timer armed at the earliest deadline of a live call.
    private func armDeadlineTimer() {
        while let top = deadlines.peek(), pending[top.id] == nil { deadlines.pop() }
        guard let top = deadlines.peek() else { return }
        if let armed = deadlineTimer {
            if armed.at <= top.deadline { return }
            reactor.cancel(armed.id)
        }
        let id = reactor.schedule(at: top.deadline) { [self] in
            self.deadlineTimer = nil
            let now = ContinuousClock.now
            while let top = self.deadlines.peek(), top.deadline <= now {
                self.deadlines.pop()
                if let call = self.pending[top.id], call.deadline <= now { self.expire(top.id) }
            }
            self.armDeadlineTimer()
        }
        deadlineTimer = (top.deadline, id)
    }

    private func expire(_ id: UInt64) {
        guard let call = pending.removeValue(forKey: id) else { return }
        let sent = call.endpoint != nil
        // The server knows the deadline too and drops the work itself; no cancel message is needed.
        abandon(call, tellServer: false)
        if sent || call.attempts > 0 {
            call.finish(.failure(RPCError(.deadlineExceeded, "\(call.path): the deadline passed before the server answered")))
        } else {
            call.finish(.failure(notSent(call, "before the deadline")))
        }
    }

    /// The error of a call that was never sent, so certainly did not run: `retry` says so (§8 of the
    /// protocol), also to the caller of a forwarder (the gateway) that passes this error on, for whom
    /// an UNAVAILABLE without it would mean "may have run".
    private func notSent(_ call: PendingCall, _ when: String) -> RPCError {
        let addresses = endpoints.map(\.address).joined(separator: ", ")
        let error = RPCError(
            .unavailable, "\(call.path): no StoreBus server was reachable at \(addresses) \(when)",
            details: .with { $0.retry.retryDelayMs = Int64(configuration.reconnectIntervalMax.wireMilliseconds) }
        )
        return error.withReason(RPCError.notSentReason, domain: "storebus.rpc")
    }

    /// Fails a call still waiting, never sent, after ``ClientConfiguration/connectionWait`` with no
    /// instance connected.
    private func giveUpWaiting(_ id: UInt64) {
        guard let call = pending[id], call.endpoint == nil, call.attempts == 0,
            !endpoints.contains(where: \.connected)
        else { return }
        pending[id] = nil
        call.finish(.failure(notSent(call, "(none is connected)")))
    }

    /// Forgets a call that will not be answered: stops its timer and, if asked, tells its server to
    /// drop the work.
    private func abandon(_ call: PendingCall, tellServer: Bool) {
        if let index = call.endpoint {
            endpoints[index].inFlight -= 1
            call.endpoint = nil
            if tellServer {
                try? endpoints[index].socket.send(frames: Frames.cancel(requestID: Frames.decimal(call.id)), dontWait: true)
            }
        }
    }

    /// Sends a call to the least busy connected endpoint, or parks it until one can take it.
    private func dispatch(_ call: PendingCall) {
        if trySend(call) { return }
        // Calls that expired or were cancelled while parked leave their ids here; drop them in bulk
        // before they outnumber the live calls (an outage of all endpoints would grow the list).
        if waiting.count > 1024 && waiting.count > 2 * pending.count {
            waiting.removeAll { pending[$0] == nil }
        }
        waiting.append(call.id)
        armRetryTimer()
        if let wait = configuration.connectionWait, call.attempts == 0, !endpoints.contains(where: \.connected) {
            let id = call.id
            reactor.schedule(at: min(.now + wait, call.deadline)) { [self] in self.giveUpWaiting(id) }
        }
    }

    /// Sends to the connected endpoint with the fewest of this client's calls in flight, passing over
    /// those resting after a refusal while another is connected (a draining server answers at once,
    /// so it always looks the least busy).
    private func trySend(_ call: PendingCall) -> Bool {
        let count = endpoints.count
        let now = ContinuousClock.now
        var best: Int?
        var bestResting: Int?
        for offset in 0..<count {
            let index = (rotation + offset) % count
            guard endpoints[index].connected else { continue }
            if let until = endpoints[index].restingUntil, until > now {
                if bestResting == nil || endpoints[index].inFlight < endpoints[bestResting!].inFlight { bestResting = index }
                continue
            }
            if best == nil || endpoints[index].inFlight < endpoints[best!].inFlight { best = index }
        }
        guard let first = best ?? bestResting else { return false }
        rotation = (rotation + 1) % max(count, 1)
        let frames = call.frames(now: .now)
        if send(frames, call, to: first) { return true }
        // The least busy one is full (EAGAIN): try any other connected endpoint.
        for index in endpoints.indices where index != first && endpoints[index].connected {
            if send(frames, call, to: index) { return true }
        }
        return false
    }

    private func send(_ frames: [[UInt8]], _ call: PendingCall, to index: Int) -> Bool {
        do {
            try endpoints[index].socket.send(frames: frames, dontWait: true)
        } catch {
            return false
        }
        call.endpoint = index
        call.attempts += 1
        endpoints[index].inFlight += 1
        return true
    }

    /// Parked calls are retried when an endpoint connects, and every few milliseconds while any
    /// endpoint is connected (an endpoint whose queue was full drains on its own).
    private func armRetryTimer() {
        guard !retryTimerArmed, endpoints.contains(where: \.connected) else { return }
        retryTimerArmed = true
        reactor.schedule(at: .now + .milliseconds(2)) { [self] in
            self.retryTimerArmed = false
            self.flushWaiting()
        }
    }

    private func flushWaiting() {
        guard !waiting.isEmpty else { return }
        let ids = waiting
        waiting.removeAll(keepingCapacity: true)
        for (position, id) in ids.enumerated() {
            guard let call = pending[id], call.endpoint == nil else { continue }
            if !trySend(call) {
                waiting.append(contentsOf: ids[position...].filter { pending[$0] != nil })
                armRetryTimer()
                return
            }
        }
    }

    // MARK: Socket events

    /// Answers read before the callers they resumed on this loop (see ``RPCClient/executor``) run.
    private static let answersPerTurn = 16

    /// Reads the answers waiting on an endpoint's socket, 256 at most; returns whether it stopped at
    /// that limit (more may be waiting).
    private func readResponses(_ index: Int) -> Bool {
        for count in 0..<256 {
            // Callers resumed on this loop by the answers so far continue now, and their next requests
            // leave while the server is still busy, rather than after the whole batch has been read.
            // Every answer would cost a wake-up of libzmq's I/O thread per request; every 16 measured
            // about 10% more calls per second than once per batch.
            if count > 0 && count % ClientLoop.answersPerTurn == 0 { reactor.runLocalJobs() }
            let message: (frames: [[UInt8]], attachment: HeldFrame?)
            do {
                message = try endpoints[index].socket.receiveResponse(dontWait: true)
            } catch {
                return false
            }
            guard let response = Frames.parseAtClient(message.frames, attachment: message.attachment) else {
                logger.debug("Unreadable response dropped", metadata: ["peer.endpoint": "\(endpoints[index].address)"])
                continue
            }
            guard let id = Frames.parseDecimal(response.requestID), let call = pending[id], call.endpoint == index else {
                continue // an answer to a call that timed out, was cancelled, or was retried elsewhere
            }
            endpoints[index].inFlight -= 1
            call.endpoint = nil
            let raw = RawResponse(code: response.code, body: response.body, attachment: response.attachment)
            if response.code == .unavailable || response.code == .resourceExhausted {
                rest(index, after: raw)
            }
            if response.code == .unavailable, call.retryable, call.attempts < configuration.maxAttempts,
                ContinuousClock.now + configuration.retryBackoff < call.deadline
            {
                reactor.schedule(at: .now + configuration.retryBackoff) { [self] in
                    if let call = self.pending[id], call.endpoint == nil { self.dispatch(call) }
                }
                continue
            }
            pending[id] = nil
            call.finish(.success(raw))
        }
        return true
    }

    /// Shortest and longest rest of an endpoint that refused a call with retry advice.
    static let restBounds: ClosedRange<Duration> = .milliseconds(250)...(.seconds(5))

    /// Lets an endpoint rest when its answer refused the call with retry advice (it did not run the
    /// call and asks for time): for the advised delay, held to ``restBounds``.
    private func rest(_ index: Int, after response: RawResponse) {
        guard let advised = response.error?.details.retry.retryDelayMs, advised > 0 else { return }
        let delay = min(max(Duration.milliseconds(advised), Self.restBounds.lowerBound), Self.restBounds.upperBound)
        endpoints[index].restingUntil = .now + delay
    }

    private func readMonitor(_ index: Int) {
        while let message = try? endpoints[index].monitor.receive(dontWait: true) {
            guard let event = SocketEvent(message) else { continue }
            if event.event == .handshakeSucceeded {
                endpoints[index].connected = true
                endpoints[index].restingUntil = nil // a new connection: perhaps a restarted server
                logger.debug("Connected", metadata: ["peer.endpoint": "\(endpoints[index].address)"])
                flushWaiting()
            } else if event.event == .disconnected {
                endpoints[index].connected = false
                logger.debug("Disconnected", metadata: ["peer.endpoint": "\(endpoints[index].address)"])
                // Answers that arrived before the connection closed are still in the socket (a server
                // that answers as it shuts down, say): the monitor's event can be read first. They
                // are taken before the calls still waiting are failed over.
                while readResponses(index) {}
                let sent = endpoints[index].inFlight > 0
                failOver(from: index)
                if sent {
                    replaceSocket(index)
                    return // the old monitor is closed; the new one reports from here on
                }
            }
        }
    }

    private func register(_ index: Int) {
        reactor.register(endpoints[index].socket) { [self] in _ = self.readResponses(index) }
        reactor.register(endpoints[index].monitor) { [self] in self.readMonitor(index) }
    }

    /// Closes an endpoint's socket after its connection dropped with calls in flight, and connects a
    /// new one. Requests still waiting in the old socket for a connection (sent as it dropped) are
    /// discarded with it: their calls were failed over, so a reconnection must not deliver them
    /// later. A socket that cannot be replaced is kept, and logged.
    private func replaceSocket(_ index: Int) {
        let replacement: (socket: Socket, monitor: Socket)
        do {
            replacement = try Self.connect(endpoints[index].address, configuration: configuration, context: reactor.context)
        } catch {
            logger.error("Cannot replace the socket of a dropped connection", metadata: ["peer.endpoint": "\(endpoints[index].address)", "error": "\(error)"])
            return
        }
        reactor.unregister(endpoints[index].socket)
        reactor.unregister(endpoints[index].monitor)
        endpoints[index].socket.stopMonitor()
        endpoints[index].monitor.close()
        endpoints[index].socket.close()
        endpoints[index].socket = replacement.socket
        endpoints[index].monitor = replacement.monitor
        register(index)
    }

    /// The calls sent to an endpoint that went away: retry the retryable, fail the rest.
    private func failOver(from index: Int) {
        endpoints[index].inFlight = 0
        for call in pending.values where call.endpoint == index {
            call.endpoint = nil
            if call.retryable && call.attempts < configuration.maxAttempts {
                dispatch(call)
            } else {
                pending[call.id] = nil
                call.finish(.failure(RPCError(.unavailable, "\(call.path): the connection to \(endpoints[index].address) was lost before it answered")))
            }
        }
    }

    /// Closes the sockets of a client that never reached its reactor (it had stopped): off the loop,
    /// before anything else can hold them.
    func closeUnattached() {
        closed = true
        for endpoint in endpoints {
            endpoint.socket.stopMonitor()
            endpoint.monitor.close()
            endpoint.socket.close()
        }
    }

    /// Fails the pending calls and closes the sockets; runs once (at ``RPCClient/shutdown()`` or when
    /// the reactor stops, whichever comes first).
    func close() {
        guard !closed else { return }
        closed = true
        for call in pending.values {
            call.finish(.failure(RPCError(.cancelled, "\(call.path): the client was shut down")))
        }
        pending.removeAll()
        if let timer = deadlineTimer {
            reactor.cancel(timer.id)
            deadlineTimer = nil
        }
        if let stopAction {
            reactor.removeStopAction(stopAction)
            self.stopAction = nil
        }
        for endpoint in endpoints {
            if shared {
                reactor.unregister(endpoint.socket)
                reactor.unregister(endpoint.monitor)
            }
            endpoint.socket.stopMonitor()
            endpoint.monitor.close()
            endpoint.socket.close()
        }
    }
}
