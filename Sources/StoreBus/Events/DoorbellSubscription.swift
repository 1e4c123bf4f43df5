import ZeroMQ

/// The SUB side of doorbells: one socket on a reactor of its own.
enum DoorbellSubscription {
    /// Connects a SUB socket to `endpoints`, subscribed to `prefix`, registers it on `reactor`, and
    /// starts the reactor (unless `startReactor` is false: a shared reactor, started by its owner).
    /// `heard` runs on the reactor thread for each well-formed doorbell; anything
    /// else published on the socket is ignored. `disconnected`, when given, runs there too each time
    /// a publisher's connection ends (it stopped or restarted; what it publishes next may belong to
    /// another log). The socket closes when the reactor stops, or earlier through the returned
    /// closer (on the loop thread), whichever comes first.
    @discardableResult
    static func start(
        endpoints: [String], prefix: [UInt8], context: ZeroMQ.Context, reactor: Reactor, startReactor: Bool = true,
        heard: @escaping @Sendable (Doorbell) -> Void,
        disconnected: (@Sendable () -> Void)? = nil
    ) throws -> LoopBound<() -> Void> {
        let socket = try Socket(context: context, type: .sub)
        try socket.set(.subscribe(prefix))
        try socket.set(.receiveHighWaterMark(10_000))
        try socket.set(.reconnect(interval: 100, max: 2000))
        try socket.set(.heartbeat(interval: 2000, timeout: 6000, ttl: 6000))
        let monitor = disconnected == nil ? nil : try socket.openMonitor(context: context, events: [.disconnected])
        for endpoint in endpoints { try socket.connect(endpoint) }
        let box = LoopBound((socket, monitor), on: reactor)
        let closer = LoopBound<() -> Void>({ [reactor, box] in
            let (socket, monitor) = box.value
            guard !socket.isClosed else { return }
            reactor.unregister(socket)
            if let monitor {
                reactor.unregister(monitor)
                socket.stopMonitor()
                monitor.close()
            }
            socket.close()
        }, on: reactor)
        reactor.execute { [reactor, box, closer] in
            let (socket, monitor) = box.value
            reactor.register(socket) {
                while let message = try? socket.receive(dontWait: true) {
                    if let doorbell = Doorbell(frames: message.frames) { heard(doorbell) }
                }
            }
            if let monitor, let disconnected {
                reactor.register(monitor) {
                    while let message = try? monitor.receive(dontWait: true) {
                        if SocketEvent(message)?.event == .disconnected { disconnected() }
                    }
                }
            }
            reactor.onStop { closer.value() }
        }
        if startReactor { reactor.start() }
        return closer
    }
}
