import ZeroMQ

/// The SUB side of doorbells: one socket on a reactor of its own.
enum DoorbellSubscription {
    /// Connects a SUB socket to `endpoints`, subscribed to `prefix`, registers it on `reactor`, and
    /// starts the reactor. `heard` runs on the reactor thread for each well-formed doorbell; anything
    /// else published on the socket is ignored. The socket closes when the reactor stops.
    static func start(
        endpoints: [String], prefix: [UInt8], context: ZeroMQ.Context, reactor: Reactor,
        heard: @escaping @Sendable (Doorbell) -> Void
    ) throws {
        let socket = try Socket(context: context, type: .sub)
        try socket.set(.subscribe(prefix))
        try socket.set(.receiveHighWaterMark(10_000))
        try socket.set(.reconnect(interval: 100, max: 2000))
        try socket.set(.heartbeat(interval: 2000, timeout: 6000, ttl: 6000))
        for endpoint in endpoints { try socket.connect(endpoint) }
        let box = LoopBound(socket, on: reactor)
        reactor.execute { [reactor, box] in
            let socket = box.value
            reactor.register(socket) {
                while let message = try? socket.receive(dontWait: true) {
                    if let doorbell = Doorbell(frames: message.frames) { heard(doorbell) }
                }
            }
            reactor.onStop { socket.close() }
        }
        reactor.start()
    }
}
