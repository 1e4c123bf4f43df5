import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP port on 127.0.0.1 that nothing listens on, for a server a test starts at once. It is picked
/// at random below the kernel's ephemeral range (`ip_local_port_range`) and checked by binding it:
/// a port the kernel picked for a socket bound to port 0 came from that range, where any other
/// socket bound to port 0 (another test's `tcp://127.0.0.1:*` server) or any outgoing connection
/// could take it before the caller bound it (seen: a benchmark's gateway port answered by another
/// test's server). Test targets run as concurrent processes, and a service binds its port a while
/// after the check: each port handed out is also claimed for the life of this process with a POSIX
/// record lock on its byte of one shared file, which no other process's `unusedLoopbackPort` takes
/// (seen before the claim: two test processes drew the same port, and the second cluster's service
/// failed to bind it). The kernel drops the claims when the process ends, however it ends.
public func unusedLoopbackPort() throws -> Int {
    let ephemeralStart =
        (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))
        .flatMap { $0.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } } ?? 32768
    let range = 10_000..<max(10_001, min(ephemeralStart, 65_536))
    for _ in 0..<200 {
        let port = Int.random(in: range)
        // Never the same port twice in one process: a test that draws several before binding
        // any of them (a deployment's fourteen) would otherwise get one twice now and then
        guard handedOut.withLock({ !$0.contains(port) }), try claim(port), try isFree(port) else { continue }
        if handedOut.withLock({ $0.insert(port).inserted }) { return port }
    }
    throw TestingError("no free TCP port on 127.0.0.1 from \(range.lowerBound) to \(range.upperBound - 1) after 200 tries")
}

/// The ports `unusedLoopbackPort` has given in this process.
private let handedOut = Mutex<Set<Int>>([])

/// The shared file whose byte at each port's offset a process locks to claim the port.
public let portClaimsPath = (NSTemporaryDirectory() as NSString).appendingPathComponent("storebus-test-ports.lock")

/// ``portClaimsPath``, opened once.
private let claims: Result<Int32, TestingError> = {
    let path = portClaimsPath
    let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o666)
    guard descriptor >= 0 else { return .failure(TestingError("cannot open \(path): \(String(cString: strerror(errno)))")) }
    return .success(descriptor)
}()

/// Claims `port` for this process unless another process holds it. POSIX record locks belong to
/// the process, so a port this process claimed before is its own again (`handedOut` keeps those out).
private func claim(_ port: Int) throws -> Bool {
    let descriptor = try claims.get()
    var lock = flock()
    lock.l_type = Int16(F_WRLCK)
    lock.l_whence = Int16(SEEK_SET)
    lock.l_start = off_t(port)
    lock.l_len = 1
    if fcntl(descriptor, F_SETLK, &lock) == 0 { return true }
    guard errno == EACCES || errno == EAGAIN else {
        throw TestingError("cannot lock port \(port)'s byte: \(String(cString: strerror(errno)))")
    }
    return false
}

/// Whether a socket can be bound to 127.0.0.1:`port` now.
private func isFree(_ port: Int) throws -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw TestingError("cannot make a socket: \(String(cString: strerror(errno)))") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let length = socklen_t(MemoryLayout<sockaddr_in>.size)
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 }
    }
}
