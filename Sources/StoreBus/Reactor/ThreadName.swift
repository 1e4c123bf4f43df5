#if canImport(Glibc)
import Glibc
#endif

/// Names the calling OS thread, as top, perf and gdb show it.
///
/// Foundation's `Thread.name` does not reach the OS thread on Linux, and `pthread_setname_np` is not
/// imported into Swift, so the name is written where the kernel keeps it. Linux keeps at most 15
/// bytes; a longer name is cut. Failure is ignored: the name is only for people reading tools.
public func nameCurrentThread(_ name: String) {
    #if os(Linux)
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    #endif
}
