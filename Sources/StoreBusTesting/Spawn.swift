import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Starting child processes with `posix_spawn`, without Foundation's `Process`.
///
/// Foundation's `Process.run()` in Swift 6.3 on Linux crashes now and then while it looks for the
/// highest open file descriptor (an over-read of `struct dirent`, fixed upstream in
/// swift-corelibs-foundation#5472 but not in this toolchain). Test suites that start hundreds of
/// processes hit it; this does the same job with the C API: the child gets `/dev/null` as input, its
/// output and errors appended to a file (or a pipe), every other descriptor closed, default signal
/// handling and an empty signal mask.
public enum Spawn {
    /// A child process's way out: its exit code, or the signal that ended it (as Foundation reports
    /// `terminationStatus`).
    public static func status(fromWait raw: Int32) -> Int32 {
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : signal
    }

    /// Where the child's standard output and error go.
    public enum Output {
        /// Appended to the file at this path (created if missing).
        case file(String)
        /// Written to this descriptor (for example a pipe's write end).
        case descriptor(Int32)
    }

    /// Starts `executable` and returns its process id.
    public static func start(executable: String, arguments: [String], environment: [String: String], output: Output) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        switch output {
        case .file(let path):
            posix_spawn_file_actions_addopen(&actions, 1, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        case .descriptor(let descriptor):
            posix_spawn_file_actions_adddup2(&actions, descriptor, 1)
        }
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of the parent's (sockets, pipes, log files) reaches the child.
        if let closeFrom = Self.addCloseFrom { _ = closeFrom(&actions, 3) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw TestingError("cannot start \(executable): \(String(cString: strerror(result)))")
        }
        return pid
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc module
    /// does not import; looked up once. Without it, descriptors the parent did not mark close-on-exec
    /// reach the child.
    private static let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    /// Waits, on a thread of its own, for `pid` to end, then calls `exited` with its status.
    public static func onExit(of pid: pid_t, _ exited: @escaping @Sendable (Int32) -> Void) {
        let thread = Thread {
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
            exited(status(fromWait: raw))
        }
        thread.name = "spawn-wait-\(pid)"
        thread.start()
    }
}
