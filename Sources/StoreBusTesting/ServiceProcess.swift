import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A StoreBus executable running as a real OS process, for end-to-end tests.
///
/// Output goes to a log file that tests print when something fails. Every exit path of a test should
/// end with ``stop()`` (or ``kill()``); a process still running when the object is released is
/// killed then (unless a signal is ending this process: see ``Leftovers``).
public final class ServiceProcess: Sendable {
    /// The executable's name, such as `storebus-catalog`.
    public let name: String
    /// Arguments given to it.
    public let arguments: [String]
    /// Where its standard output and error go.
    public let logFile: URL

    private let state = Mutex<State>(State())

    private struct State {
        var pid: pid_t?
        var exitStatus: Int32?
        var waiters: [CheckedContinuation<Int32, Never>] = []
    }

    /// Describes a process; ``start()`` launches it.
    public init(name: String, arguments: [String], logFile: URL) {
        self.name = name
        self.arguments = arguments
        self.logFile = logFile
    }

    deinit {
        // While a signal ends this process, its handler stops the children gracefully; a SIGKILL
        // from here (the bench's flow releasing its services as its calls fail) would cut that short.
        guard !Leftovers.isEnding else { return }
        state.withLock { state in
            if let pid = state.pid, state.exitStatus == nil { Glibc.kill(pid, SIGKILL) }
        }
    }

    /// Launches the process (again, after an exit: the log is appended to).
    public func start(environment: [String: String] = [:]) throws {
        let pid = try launch(environment: environment, output: .file(logFile.path))
        watch(pid)
    }

    /// Launches the process with its output read through a pipe, and calls `onReady` with its
    /// process id from the reading thread the moment the process prints its ready line (`<name>
    /// ready rpc=...`). For tests of what happens right after a process says it is ready, such as a
    /// signal sent at that instant: polling the log file would come milliseconds too late. The
    /// output still goes to ``logFile``.
    public func start(environment: [String: String] = [:], onReady: @escaping @Sendable (pid_t) -> Void) throws {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            throw TestingError("cannot make a pipe for \(name): \(String(cString: strerror(errno)))")
        }
        let (readEnd, writeEnd) = (ends[0], ends[1])
        // Glibc's pipe2 is not imported; Spawn closes every other descriptor in the child anyway.
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        let pid: pid_t
        do {
            pid = try launch(environment: environment, output: .descriptor(writeEnd))
        } catch {
            close(readEnd)
            close(writeEnd)
            throw error
        }
        // Only the child writes now: the read end sees end-of-file when it exits.
        close(writeEnd)
        let logPath = logFile.path
        let reader = Thread {
            // Appended to, as the child itself does in start(environment:).
            let file = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            var pending = [UInt8]()
            var ready = false
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                let chunk = buffer[..<count]
                if !ready {
                    pending += chunk
                    if String(decoding: pending, as: UTF8.self).contains(" ready rpc=") {
                        ready = true
                        onReady(pid)
                    }
                }
                if file >= 0 { _ = chunk.withUnsafeBytes { write(file, $0.baseAddress, $0.count) } }
            }
            if file >= 0 { close(file) }
            close(readEnd)
        }
        reader.name = "output-\(pid)"
        reader.start()
        watch(pid)
    }

    private func launch(environment: [String: String], output: Spawn.Output) throws -> pid_t {
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { _, new in new }
        state.withLock {
            $0.pid = nil
            $0.exitStatus = nil
        }
        let pid = try Spawn.start(executable: try Executables.url(name).path, arguments: arguments, environment: env, output: output)
        state.withLock { $0.pid = pid }
        return pid
    }

    /// Reaps the child when it exits, and keeps it in ``Leftovers`` until then.
    private func watch(_ pid: pid_t) {
        Leftovers.started(pid, name: name)
        Spawn.onExit(of: pid) { [weak self] status in
            Leftovers.exited(pid)
            self?.exited(status: status)
        }
    }

    private func exited(status: Int32) {
        let waiters = state.withLock { state -> [CheckedContinuation<Int32, Never>] in
            state.exitStatus = status
            let waiters = state.waiters
            state.waiters.removeAll()
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    /// The process id, while it runs.
    public var pid: Int32? {
        state.withLock { state in state.exitStatus == nil ? state.pid : nil }
    }

    /// Whether the process is running.
    public var isRunning: Bool { pid != nil }

    /// Sends a signal.
    public func signal(_ signal: Int32) {
        if let pid { Glibc.kill(pid, signal) }
    }

    /// Kills the process with SIGKILL and waits for it to be gone.
    public func kill() async {
        signal(SIGKILL)
        _ = await waitForExit()
    }

    /// Asks the process to stop with SIGTERM; after `grace`, kills it. Returns the exit status.
    @discardableResult
    public func stop(grace: Duration = .seconds(10)) async -> Int32 {
        guard isRunning else { return state.withLock { $0.exitStatus ?? 0 } }
        signal(SIGTERM)
        if let status = await waitForExit(timeout: grace) { return status }
        signal(SIGKILL)
        return await waitForExit() ?? -1
    }

    /// Waits for the process to exit, at most `timeout` (nil: no limit). Returns its exit status, or
    /// nil on time-out.
    public func waitForExit(timeout: Duration? = nil) async -> Int32? {
        if let status = state.withLock({ $0.exitStatus }) { return status }
        guard let timeout else {
            return await withCheckedContinuation { continuation in
                let done = state.withLock { state -> Int32? in
                    if let status = state.exitStatus { return status }
                    state.waiters.append(continuation)
                    return nil
                }
                if let done { continuation.resume(returning: done) }
            }
        }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = state.withLock({ $0.exitStatus }) { return status }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return state.withLock { $0.exitStatus }
    }

    /// Everything the process has written so far.
    public var output: String {
        (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
    }
}
