import ArgumentParser
import Foundation
import StoreBusTesting
import ZeroMQ

/// The bare floor of the paced flow figures: the purchase flow's messages, hop for hop, over plain
/// libzmq between three processes shaped as the flow's are, with nothing else done.
///
/// A *relay* process stands for the gateway: a ROUTER its clients connect to over TCP, a DEALER to
/// the *back* process over IPC, and a SUB to the back's PUB. It answers fetches itself, forwards adds
/// and finishes to the back, and answers observe calls with the events the back published (or keeps
/// the call until one comes). The back stands for the payment queue: it answers each add and publishes
/// two events (purchasing, purchased), and each finish with one (removed). This process drives the
/// same number of devices at the same paced schedule as ``FlowBench`` does, each flow fetch, add,
/// observe until purchased, finish, observe until removed, and counts each flow's latency from its
/// scheduled start.
///
/// The flow figures run on a machine shared with other guests: a thread ready to run may wait
/// milliseconds for its CPU. Measured right after each paced run, this flow's percentiles show how
/// much of the paced figures' tail the machine sets, whatever runs on it.
struct FlowFloor {
    /// Body sizes, about those of the flow's JSON: requests, answers, and events.
    static let requestBytes = 150
    static let answerBytes = 600
    static let eventBytes = 600

    /// What a message is: the first byte of its header frame (then the device, two bytes).
    enum Kind: UInt8 {
        case fetch = 0x46, add = 0x41, finish = 0x4E, observe = 0x4F, ping = 0x48
        /// Events: purchasing, purchased, removed.
        case purchasing = 0x70, purchased = 0x50, removed = 0x52
    }

    let relay: ServiceProcess
    let back: ServiceProcess
    let front: String

    /// Starts the two processes (this executable's hidden `flow-floor-part` command) in `directory`.
    static func start(in directory: TemporaryDirectory) throws -> FlowFloor {
        let rpc = directory.ipcEndpoint("floor-rpc")
        let events = directory.ipcEndpoint("floor-events")
        let front = "tcp://127.0.0.1:\(try unusedLoopbackPort())"
        let back = ServiceProcess(
            name: "storebus-bench", arguments: ["flow-floor-part", "back", "--rpc", rpc, "--events", events],
            logFile: directory.url.appendingPathComponent("floor-back.log")
        )
        let relay = ServiceProcess(
            name: "storebus-bench", arguments: ["flow-floor-part", "relay", "--front", front, "--rpc", rpc, "--events", events],
            logFile: directory.url.appendingPathComponent("floor-relay.log")
        )
        try back.start()
        try relay.start()
        return FlowFloor(relay: relay, back: back, front: front)
    }

    func stop() async {
        _ = await relay.stop()
        _ = await back.stop()
    }

    /// The floor's CPU: its two processes and this one, which drives the devices (nothing else runs
    /// in it while the floor does). Nil when a process has not started.
    func meter() -> CPUMeter? {
        guard let relayPID = relay.pid, let backPID = back.pid else { return nil }
        return CPUMeter(processes: [("bench", getpid()), ("relay", relayPID), ("back", backPID)])
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func header(_ kind: Kind, device: Int) -> [UInt8] {
        [kind.rawValue, UInt8(device >> 8), UInt8(device & 0xFF)]
    }

    /// The next message on `socket`, or nil when none is queued.
    static func receiveIfAny(_ socket: Socket) throws -> Message? {
        do {
            return try socket.receive(dontWait: true)
        } catch {
            if error.isAgain { return nil }
            throw error
        }
    }

    /// Runs `flows` flows over `devices` devices paced at `rate` flows a second (`.infinity`: each
    /// device starts its next flow as soon as one ends, a closed loop), on the calling thread; each
    /// flow's latency in nanoseconds.
    func run(context: ZeroMQ.Context, devices: Int, flows: Int, rate: Double) throws -> [UInt64] {
        precondition(devices > 0 && devices <= 0xFFFF)
        let dealer = try Socket(context: context, type: .dealer)
        defer { dealer.close() }
        try dealer.set(.linger(0))
        try dealer.connect(front)
        var poller = Poller()
        poller.add(dealer)
        // The relay binds its front once the back answers it and its events reach it: the first
        // fetch answered, the floor is up.
        try dealer.send(frames: [[], Self.header(.fetch, device: 0), Array(repeating: 0x61, count: Self.requestBytes)])
        guard try poller.poll(timeoutMilliseconds: 30_000) > 0 else { throw Failure(description: "the flow floor's relay did not answer within 30 s") }
        _ = try dealer.receive()

        enum Step { case idle, fetch, add, observePurchased, finish, observeRemoved }
        var steps = Array(repeating: Step.idle, count: devices)
        var started = Array(repeating: 0, count: devices)
        var begins = Array(repeating: UInt64(0), count: devices)
        let request = Array(repeating: UInt8(0x61), count: Self.requestBytes)
        func send(_ kind: Kind, _ device: Int) throws {
            try dealer.send(frames: [[], Self.header(kind, device: device), request])
        }
        var latencies: [UInt64] = []
        latencies.reserveCapacity(flows)
        let interval = UInt64(Double(devices) / rate * 1e9)
        let start = DispatchTime.now().uptimeNanoseconds
        while latencies.count < flows {
            // Start the flows that are due; wait until the next one is, or an answer comes.
            let now = DispatchTime.now().uptimeNanoseconds
            var next: UInt64?
            for device in 0..<devices where steps[device] == .idle {
                let share = flows / devices + (device < flows % devices ? 1 : 0)
                guard started[device] < share else { continue }
                let scheduled = start + interval * UInt64(device) / UInt64(devices) + interval * UInt64(started[device])
                if scheduled <= now {
                    // Paced, a latency counts from the flow's scheduled start; in a closed loop
                    // (every start due at once), from when it starts.
                    begins[device] = interval == 0 ? now : scheduled
                    started[device] += 1
                    steps[device] = .fetch
                    try send(.fetch, device)
                } else {
                    next = min(next ?? .max, scheduled)
                }
            }
            let wait = next.map { Int(($0 - min($0, DispatchTime.now().uptimeNanoseconds) + 999_999) / 1_000_000) } ?? 1_000
            guard try poller.poll(timeoutMilliseconds: wait) > 0 else { continue }
            while let message = try Self.receiveIfAny(dealer) {
                // ["", header, body]
                guard message.frames.count == 3, message.frames[1].count >= 3, let kind = Kind(rawValue: message.frames[1][0]) else {
                    throw Failure(description: "the flow floor's relay sent an unexpected message")
                }
                let device = Int(message.frames[1][1]) << 8 | Int(message.frames[1][2])
                guard device < devices else { throw Failure(description: "the flow floor's relay answered for device \(device)") }
                let events = message.frames[1].dropFirst(3)
                switch (steps[device], kind) {
                case (.fetch, .fetch):
                    steps[device] = .add
                    try send(.add, device)
                case (.add, .add):
                    steps[device] = .observePurchased
                    try send(.observe, device)
                case (.observePurchased, .observe):
                    if events.contains(Kind.purchased.rawValue) {
                        steps[device] = .finish
                        try send(.finish, device)
                    } else {
                        try send(.observe, device)
                    }
                case (.finish, .finish):
                    steps[device] = .observeRemoved
                    try send(.observe, device)
                case (.observeRemoved, .observe):
                    if events.contains(Kind.removed.rawValue) {
                        steps[device] = .idle
                        latencies.append(DispatchTime.now().uptimeNanoseconds - begins[device])
                    } else {
                        try send(.observe, device)
                    }
                default:
                    throw Failure(description: "the flow floor's relay answered out of turn")
                }
            }
        }
        return latencies
    }
}

/// One process of ``FlowFloor`` (not for use on its own). Stops at SIGTERM.
struct FlowFloorPart: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flow-floor-part", abstract: "A process of the flow figures' bare floor (started by the bench).", shouldDisplay: false
    )

    enum Role: String, ExpressibleByArgument { case relay, back }

    @Argument(help: "relay or back.")
    var role: Role

    @Option(help: "The relay's ROUTER endpoint (relay only).")
    var front: String?

    @Option(help: "The back's ROUTER endpoint.")
    var rpc: String

    @Option(help: "The back's PUB endpoint.")
    var events: String

    func run() throws {
        let context = try ZeroMQ.Context()
        switch role {
        case .back: try back(context)
        case .relay:
            guard let front else { throw ValidationError("the relay needs --front") }
            try relay(context, front: front)
        }
    }

    /// Answers each request with its routing frames, its header and an answer body; publishes the
    /// events an add or a finish causes (a ping's too, which tells the relay its SUB is connected).
    func back(_ context: ZeroMQ.Context) throws {
        let router = try Socket(context: context, type: .router)
        let publisher = try Socket(context: context, type: .pub)
        try router.bind(rpc)
        try publisher.bind(events)
        let answer = Array(repeating: UInt8(0x62), count: FlowFloor.answerBytes)
        let event = Array(repeating: UInt8(0x63), count: FlowFloor.eventBytes)
        while true {
            // [relay, client, "", header, body] (a ping has no client)
            var frames = try router.receive().frames
            guard frames.count >= 3, let header = frames.dropLast().last, header.count >= 3, let kind = FlowFloor.Kind(rawValue: header[0]) else { continue }
            frames[frames.count - 1] = answer
            try router.send(frames: frames)
            let caused: [FlowFloor.Kind] =
                switch kind {
                case .add: [.purchasing, .purchased]
                case .finish: [.removed]
                case .ping: [.ping]
                default: []
                }
            for happened in caused {
                // [topic, header, event], as a doorbell carrying its event.
                try publisher.send(frames: [[0x66], [happened.rawValue, header[1], header[2]], event])
            }
        }
    }

    /// The gateway's part: see ``FlowFloor``.
    func relay(_ context: ZeroMQ.Context, front endpoint: String) throws {
        let dealer = try Socket(context: context, type: .dealer)
        let subscriber = try Socket(context: context, type: .sub)
        try dealer.connect(rpc)
        try subscriber.set(.subscribe([]))
        try subscriber.connect(events)
        // Ping the back until an event comes back: from then on none is lost for want of a
        // subscription.
        var ready = Poller()
        ready.add(subscriber)
        repeat {
            try dealer.send(frames: [[], FlowFloor.header(.ping, device: 0), []])
        } while try ready.poll(timeoutMilliseconds: 100) == 0
        let router = try Socket(context: context, type: .router)
        try router.bind(endpoint)

        var parked: [Int: [[UInt8]]] = [:]
        var pending: [Int: [(kind: UInt8, event: [UInt8])]] = [:]
        let answer = Array(repeating: UInt8(0x62), count: FlowFloor.answerBytes)
        func deliver(_ routing: [[UInt8]], device: Int) throws {
            let events = pending.removeValue(forKey: device) ?? []
            var header = FlowFloor.header(.observe, device: device)
            header += events.map(\.kind)
            try router.send(frames: routing + [header, events.flatMap(\.event)])
        }
        var poller = Poller()
        poller.add(router)
        poller.add(dealer)
        poller.add(subscriber)
        while true {
            _ = try poller.poll(timeoutMilliseconds: -1)
            while let message = try FlowFloor.receiveIfAny(router) {
                // [client, "", header, body]
                let frames = message.frames
                guard frames.count >= 3, frames[frames.count - 2].count >= 3, let kind = FlowFloor.Kind(rawValue: frames[frames.count - 2][0]) else { continue }
                let header = frames[frames.count - 2]
                let device = Int(header[1]) << 8 | Int(header[2])
                let routing = Array(frames.dropLast(2))
                switch kind {
                case .fetch:
                    try router.send(frames: routing + [header, answer])
                case .observe:
                    if pending[device]?.isEmpty == false {
                        try deliver(routing, device: device)
                    } else {
                        parked[device] = routing
                    }
                default:
                    try dealer.send(frames: frames)
                }
            }
            while let message = try FlowFloor.receiveIfAny(dealer) {
                // [client, "", header, answer], or a ping's ["", header, answer]
                guard message.frames.count > 3 else { continue }
                try router.send(message)
            }
            while let message = try FlowFloor.receiveIfAny(subscriber) {
                let frames = message.frames
                guard frames.count == 3, frames[1].count == 3, frames[1][0] != FlowFloor.Kind.ping.rawValue else { continue }
                let device = Int(frames[1][1]) << 8 | Int(frames[1][2])
                pending[device, default: []].append((frames[1][0], frames[2]))
                if let routing = parked.removeValue(forKey: device) {
                    try deliver(routing, device: device)
                }
            }
        }
    }
}
