import Testing

@testable import StoreBusSDK

/// The observer stream's state machine, transition by transition.
@Suite("SDK observation state machine")
struct ObservationTests {
    /// One step: an event applied to a state, the actions it asks for and the state after.
    enum Event: CustomStringConvertible {
        case listenerAdded
        case loopPass(listening: Bool)
        case handedOver(seq: UInt64, replayCompleted: Bool)
        case logReplaced
        case closed

        var description: String {
            switch self {
            case .listenerAdded: "listener added"
            case .loopPass(let listening): "loop pass, listening \(listening)"
            case .handedOver(let seq, let completed): "handed over \(seq)\(completed ? ", replay completed" : "")"
            case .logReplaced: "log replaced"
            case .closed: "closed"
            }
        }

        func apply(to observation: inout Observation) -> Observation.Actions {
            switch self {
            case .listenerAdded: return observation.listenerAdded()
            case .loopPass(let listening): return observation.loopPass(listening: listening)
            case .handedOver(let seq, let completed): return observation.handedOver(seq: seq, replayCompleted: completed)
            case .logReplaced:
                observation.logReplaced()
                return []
            case .closed: return observation.closed()
            }
        }
    }

    /// A state reached from a fresh one by `events` (checked to ask for what the table says on the way).
    static func reached(_ events: [Event]) -> Observation {
        var observation = Observation()
        for event in events { _ = event.apply(to: &observation) }
        return observation
    }

    static let fresh: [Event] = []
    static let launching: [Event] = [.listenerAdded]
    static let streaming: [Event] = [.listenerAdded, .handedOver(seq: 3, replayCompleted: true)]
    static let pausedAfterReplay: [Event] = streaming + [.loopPass(listening: false)]
    static let closed: [Event] = streaming + [.closed]

    struct Row: CustomTestStringConvertible, Sendable {
        let from: String
        let history: [Event]
        let event: Event
        let actions: Observation.Actions
        let phase: Observation.Phase
        let position: UInt64
        let asksForReplay: Bool

        var testDescription: String { "\(from) + \(event)" }
    }

    static let table: [Row] = [
        // From paused, never replayed: a listener starts the loop, which asks for the replay.
        Row(from: "fresh", history: fresh, event: .listenerAdded, actions: .startLoop, phase: .launching, position: 0, asksForReplay: true),
        Row(from: "fresh", history: fresh, event: .loopPass(listening: false), actions: .endLoop, phase: .paused, position: 0, asksForReplay: true),
        Row(from: "fresh", history: fresh, event: .closed, actions: [.endLoop, .resumeReplayWaiters], phase: .closed, position: 0, asksForReplay: true),
        // Launching: a second listener changes nothing; the replay's end streams and frees waiters.
        Row(from: "launching", history: launching, event: .listenerAdded, actions: [], phase: .launching, position: 0, asksForReplay: true),
        Row(from: "launching", history: launching, event: .loopPass(listening: true), actions: [], phase: .launching, position: 0, asksForReplay: true),
        Row(from: "launching", history: launching, event: .handedOver(seq: 2, replayCompleted: false), actions: [], phase: .launching, position: 2, asksForReplay: true),
        Row(from: "launching", history: launching, event: .handedOver(seq: 3, replayCompleted: true), actions: .resumeReplayWaiters, phase: .streaming, position: 3, asksForReplay: false),
        // Everybody left before the replay came: pause, and calls waiting for it go ahead.
        Row(from: "launching", history: launching, event: .loopPass(listening: false), actions: [.endLoop, .resumeReplayWaiters], phase: .paused, position: 0, asksForReplay: true),
        Row(from: "launching", history: launching, event: .logReplaced, actions: [], phase: .launching, position: 0, asksForReplay: true),
        // Streaming: callbacks move the position; nobody listening pauses without losing it.
        Row(from: "streaming", history: streaming, event: .handedOver(seq: 4, replayCompleted: false), actions: [], phase: .streaming, position: 4, asksForReplay: false),
        Row(from: "streaming", history: streaming, event: .loopPass(listening: false), actions: .endLoop, phase: .paused, position: 3, asksForReplay: false),
        Row(from: "streaming", history: streaming, event: .listenerAdded, actions: [], phase: .streaming, position: 3, asksForReplay: false),
        // The store's log was replaced: start over as at a launch.
        Row(from: "streaming", history: streaming, event: .logReplaced, actions: [], phase: .launching, position: 0, asksForReplay: true),
        Row(from: "streaming", history: streaming, event: .closed, actions: [.endLoop, .resumeReplayWaiters], phase: .closed, position: 3, asksForReplay: false),
        // Paused after a replay: the next listener goes on from the position, without a replay.
        Row(from: "paused after replay", history: pausedAfterReplay, event: .listenerAdded, actions: .startLoop, phase: .streaming, position: 3, asksForReplay: false),
        Row(from: "paused after replay", history: pausedAfterReplay, event: .loopPass(listening: true), actions: .endLoop, phase: .paused, position: 3, asksForReplay: false),
        Row(from: "paused after replay", history: pausedAfterReplay, event: .logReplaced, actions: [], phase: .paused, position: 0, asksForReplay: true),
        // Closed is final: nothing starts, nothing moves.
        Row(from: "closed", history: closed, event: .listenerAdded, actions: [], phase: .closed, position: 3, asksForReplay: false),
        Row(from: "closed", history: closed, event: .loopPass(listening: true), actions: .endLoop, phase: .closed, position: 3, asksForReplay: false),
        Row(from: "closed", history: closed, event: .handedOver(seq: 9, replayCompleted: false), actions: [], phase: .closed, position: 3, asksForReplay: false),
        Row(from: "closed", history: closed, event: .logReplaced, actions: [], phase: .closed, position: 3, asksForReplay: false),
        Row(from: "closed", history: closed, event: .closed, actions: [], phase: .closed, position: 3, asksForReplay: false)
    ]

    @Test("each event from each phase asks for its actions and leaves the phase, position and replay as the table says", arguments: table)
    func transition(_ row: Row) {
        var observation = Self.reached(row.history)
        let actions = row.event.apply(to: &observation)
        #expect(actions == row.actions)
        #expect(observation.phase == row.phase)
        #expect(observation.position == row.position)
        #expect(observation.asksForReplay == row.asksForReplay)
    }

    @Test("calls wait for the launch replay only while one is on its way to a listener; held callbacks go only after it")
    func waitsAndHeldCallbacks() {
        var observation = Observation()
        #expect(!observation.replayAwaited(listening: false))
        _ = observation.listenerAdded()
        #expect(observation.replayAwaited(listening: true))
        #expect(!observation.replayAwaited(listening: false))
        #expect(!observation.mayHandOverHeld(listening: true))
        _ = observation.handedOver(seq: 1, replayCompleted: true)
        #expect(!observation.replayAwaited(listening: true))
        #expect(observation.mayHandOverHeld(listening: true))
        #expect(!observation.mayHandOverHeld(listening: false))
        _ = observation.closed()
        #expect(!observation.mayHandOverHeld(listening: true))
    }
}
