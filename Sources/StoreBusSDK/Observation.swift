/// Where a payment queue's observer stream stands: a value kept under the queue's lock and changed
/// only by the events below, each of which says what the queue must do next. Pure (no tasks, no
/// clocks), so that every transition is a line of a table test (ObservationTests).
///
/// The stream runs while someone listens (an observer or a callbacks sequence). It opens with the
/// launch replay (the queue's unfinished transactions as a snapshot, then its end), and from then
/// on carries every callback after the last position handed over. When the last listener leaves,
/// it pauses: nothing more is acknowledged, and the next listener continues where it stopped,
/// without a second replay. A store whose log is behind the position (its database was replaced)
/// makes it start over as at a launch.
struct Observation: Equatable {
    enum Phase: Equatable {
        /// Nobody listens: no observing loop runs.
        case paused
        /// The loop runs; the launch replay has not been handed over yet.
        case launching
        /// The loop runs; the launch replay was handed over.
        case streaming
        /// The queue is closed, or its connection was: nothing is observed again.
        case closed
    }

    /// What the queue does after an event.
    struct Actions: OptionSet, Equatable {
        let rawValue: Int
        /// Start an observing loop (none runs).
        static let startLoop = Actions(rawValue: 1)
        /// End the observing loop that asked (nobody listens, or the queue closed).
        static let endLoop = Actions(rawValue: 2)
        /// Resume whoever waits for the launch replay (it was handed over, or will not come).
        static let resumeReplayWaiters = Actions(rawValue: 4)
    }

    private(set) var phase: Phase = .paused
    /// Whether the launch replay was handed over (kept across a pause).
    private(set) var replayed = false
    /// The position of the last store callback handed over: what the next Observe acknowledges.
    private(set) var position: UInt64 = 0

    /// Someone started listening.
    mutating func listenerAdded() -> Actions {
        guard phase == .paused else { return [] }
        phase = replayed ? .streaming : .launching
        return .startLoop
    }

    /// The loop's check before each call: with nobody listening it pauses (and the loop ends).
    mutating func loopPass(listening: Bool) -> Actions {
        switch phase {
        case .closed, .paused:
            return .endLoop
        case .launching, .streaming:
            guard !listening else { return [] }
            let wasLaunching = phase == .launching
            phase = .paused
            // Nobody listens, so no replay will come: calls waiting for one go ahead.
            return wasLaunching ? [.endLoop, .resumeReplayWaiters] : .endLoop
        }
    }

    /// Whether the next Observe call asks for the launch replay.
    var asksForReplay: Bool { !replayed }

    /// A store callback at `seq` was handed over; `replayCompleted` when it ended the launch replay.
    mutating func handedOver(seq: UInt64, replayCompleted: Bool) -> Actions {
        guard phase != .closed else { return [] }
        position = seq
        guard replayCompleted else { return [] }
        replayed = true
        if phase == .launching { phase = .streaming }
        return .resumeReplayWaiters
    }

    /// The store's log is behind the position: start over as at a launch.
    mutating func logReplaced() {
        guard phase != .closed else { return }
        position = 0
        replayed = false
        if phase == .streaming { phase = .launching }
    }

    /// The queue (or its connection) closed.
    mutating func closed() -> Actions {
        guard phase != .closed else { return [] }
        phase = .closed
        return [.endLoop, .resumeReplayWaiters]
    }

    /// Whether a payment, finish or restore must wait for the launch replay first: one is on its
    /// way (someone listens) and has not been handed over.
    func replayAwaited(listening: Bool) -> Bool { phase == .launching && listening }

    /// Whether the SDK's own callbacks (held while nobody listened, or before the replay) may be
    /// handed over now.
    func mayHandOverHeld(listening: Bool) -> Bool {
        listening && replayed && phase != .closed
    }
}
