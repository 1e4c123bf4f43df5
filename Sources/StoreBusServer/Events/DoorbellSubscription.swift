import StoreBus
import ZeroMQ

/// The SUB side of doorbells: one socket on a reactor, its own or one shared with an RPC server.
enum DoorbellSubscription {
    /// Connects a SUB socket to `endpoints`, subscribed to each of `prefixes`, registers it on
    /// `reactor`, and starts the reactor (unless `startReactor` is false: a shared reactor, started
    /// by its owner). `heard` runs on the reactor thread for each well-formed doorbell; anything
    /// else published on the socket is ignored. `disconnected`, when given, runs there too each time
    /// a publisher's connection ends (it stopped or restarted; what it publishes next may belong to
    /// another log). The socket closes when the reactor stops, or earlier through the returned
    /// closer (on the loop thread), whichever comes first.
    @discardableResult
    static func start(
        endpoints: [String], prefixes: [[UInt8]], context: ZeroMQ.Context, reactor: Reactor, startReactor: Bool = true,
        heard: @escaping @Sendable (Doorbell) -> Void,
        disconnected: (@Sendable () -> Void)? = nil
    ) throws -> LoopBound<() -> Void> {
        let socket = try Socket(context: context, type: .sub)
        for prefix in prefixes { try socket.set(.subscribe(prefix)) }
        try socket.set(.receiveHighWaterMark(10_000))
        try socket.set(.reconnect(interval: 100, max: 2000))
        try socket.set(.heartbeat(interval: 2000, timeout: 6000, ttl: 6000))
        let monitor = disconnected == nil ? nil : try socket.openMonitor(context: context, events: [.disconnected])
        for endpoint in endpoints { try socket.connect(endpoint) }
        let sockets = LoopBound(SubscriptionSockets(socket: socket, monitor: monitor), on: reactor)
        let closer = LoopBound<() -> Void>({ [reactor, sockets] in sockets.value.close(reactor) }, on: reactor)
        let accepted = reactor.execute { [reactor, sockets] in
            let owned = sockets.value
            // Closed before this job ran (shut down at once, on a shared reactor): nothing to register.
            guard !owned.socket.isClosed else { return }
            let socket = owned.socket
            reactor.register(socket) {
                while let message = try? socket.receive(dontWait: true) {
                    if let doorbell = Doorbell(frames: message.frames) { heard(doorbell) }
                }
            }
            if let monitor = owned.monitor, let disconnected {
                reactor.register(monitor) {
                    while let message = try? monitor.receive(dontWait: true) {
                        if SocketEvent(message)?.event == .disconnected { disconnected() }
                    }
                }
            }
            owned.stopAction = reactor.onStop { owned.close(reactor) }
        }
        guard accepted else {
            if let monitor {
                socket.stopMonitor()
                monitor.close()
            }
            socket.close()
            throw StartupError("cannot subscribe to doorbells at \(endpoints.joined(separator: ", ")): the reactor has stopped")
        }
        if startReactor { reactor.start() }
        return closer
    }
}

/// A subscription's sockets, used on its reactor's thread only.
private final class SubscriptionSockets {
    let socket: Socket
    let monitor: Socket?
    var stopAction: StopActionID?

    init(socket: Socket, monitor: Socket?) {
        self.socket = socket
        self.monitor = monitor
    }

    /// Stops polling and closes the sockets; runs once (at the reactor's stop or earlier).
    func close(_ reactor: Reactor) {
        guard !socket.isClosed else { return }
        reactor.unregister(socket)
        if let monitor {
            reactor.unregister(monitor)
            socket.stopMonitor()
            monitor.close()
        }
        socket.close()
        if let stopAction { reactor.removeStopAction(stopAction) }
        stopAction = nil
    }
}
