import Foundation
import Synchronization
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// What this process has started and must not leave behind when it ends: the service processes it
/// launched (``ServiceProcess``) and the temporary directories it made (``TemporaryDirectory``).
///
/// A process killed by a signal runs none of its `defer` blocks, and its children, reparented to
/// init, go on running: a load test stopped with `kill` or by a CI time-out would leave three
/// services behind, holding their ports and data. A tool that starts services (storebus-bench)
/// calls ``endWithSignals(grace:)`` first thing, and such a signal then ends the children too.
public enum Leftovers {
    private struct State {
        var children: [pid_t: String] = [:]
        var directories: Set<String> = []
        /// Set when a signal is ending the process: a child started from then on is asked to stop
        /// at once.
        var ending = false
    }

    private static let state = Mutex(State())

    /// The process ids of the running children, with their executables' names.
    public static var runningChildren: [pid_t: String] {
        state.withLock { $0.children }
    }

    /// The temporary directories made and not yet removed.
    public static var liveDirectories: Set<String> {
        state.withLock { $0.directories }
    }

    /// Whether a signal is ending the process (see ``endWithSignals(grace:)``): its children are
    /// being stopped, and the process ends once they are.
    public static var isEnding: Bool { state.withLock { $0.ending } }

    /// Returns at once unless a signal is ending the process; then never, so that a path that
    /// would end the process sooner (main's error exit, as the calls to the stopping services fail)
    /// leaves the children's stop to finish. The signal's handler ends the process itself.
    public static func holdIfEnding() async {
        while isEnding { try? await Task.sleep(for: .seconds(1)) }
    }

    static func started(_ pid: pid_t, name: String) {
        let ending = state.withLock { state in
            state.children[pid] = name
            return state.ending
        }
        if ending { kill(pid, SIGTERM) }
    }

    static func exited(_ pid: pid_t) {
        state.withLock { _ = $0.children.removeValue(forKey: pid) }
    }

    static func made(_ path: String) {
        state.withLock { _ = $0.directories.insert(path) }
    }

    static func removed(_ path: String) {
        state.withLock { _ = $0.directories.remove(path) }
    }

    /// From now on, the first SIGTERM, SIGINT or SIGHUP asks every running child to stop (SIGTERM),
    /// waits up to `grace` for them to exit, kills those still running, removes the temporary
    /// directories, and then ends the process by that signal's default action, so that whoever
    /// waits for it sees it killed by the signal (a shell loop stops on Ctrl-C). A signal that was
    /// ignored when the process started (SIGHUP under `nohup`) stays ignored. Further signals during
    /// the stop are ignored; it takes `grace` and a second at most.
    public static func endWithSignals(grace: Duration = .seconds(5)) async {
        let trapped = [UnixSignal.sigterm, .sigint, .sighup].filter { !isIgnored($0.rawValue) }
        let signals = await UnixSignalsSequence(trapping: trapped)
        Task.detached {
            var iterator = signals.makeAsyncIterator()
            guard let signal = await iterator.next() else { return }
            state.withLock { $0.ending = true }
            stopChildren(grace: grace)
            for path in liveDirectories { try? FileManager.default.removeItem(atPath: path) }
            end(by: signal.rawValue)
        }
    }

    /// SIGTERM to every running child (and to any started meanwhile, see `started`), SIGKILL to
    /// those still running after `grace`; returns once they have all been reaped, or a second after
    /// the SIGKILL.
    static func stopChildren(grace: Duration) {
        for pid in runningChildren.keys { kill(pid, SIGTERM) }
        let deadline = ContinuousClock.now + grace
        while !runningChildren.isEmpty && ContinuousClock.now < deadline { usleep(20_000) }
        guard !runningChildren.isEmpty else { return }
        for pid in runningChildren.keys { kill(pid, SIGKILL) }
        let reaped = ContinuousClock.now + .seconds(1)
        while !runningChildren.isEmpty && ContinuousClock.now < reaped { usleep(20_000) }
    }

    /// Whether `signal`'s disposition is SIG_IGN.
    static func isIgnored(_ signal: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(signal, nil, &current) == 0 else { return false }
        // SIG_IGN is the handler address 1 (a C macro, not imported).
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == 1
    }

    /// Ends the process by `signal`'s default action; exits with 128 plus its number should the
    /// process survive it.
    static func end(by signal: Int32) -> Never {
        Glibc.signal(signal, SIG_DFL)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(signal)
        exit(128 + signal)
    }
}
