import Foundation
import StoreBusTesting
import Testing

@Suite("Loopback ports for tests")
struct PortsTests {
    /// Whether another process can lock `port`'s byte of the shared claims file (python3's lockf,
    /// the same POSIX record lock).
    private func lockableElsewhere(_ port: Int) throws -> Bool {
        let script = """
            import fcntl, os, sys
            fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, int(sys.argv[2]))
            except OSError:
                sys.exit(3)
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", script, portClaimsPath, String(port)]
        try process.run()
        process.waitUntilExit()
        #expect([0, 3].contains(process.terminationStatus), "python3 exited \(process.terminationStatus)")
        return process.terminationStatus == 0
    }

    @Test("a port handed out is claimed against other processes for this process's life, and only it")
    func claimedAcrossProcesses() throws {
        let ports = try (0..<5).map { _ in try unusedLoopbackPort() }
        #expect(Set(ports).count == ports.count)
        for port in ports { #expect(try !lockableElsewhere(port), "port \(port)") }
        // Ports below the range are never handed out, so their bytes are free to another process.
        #expect(try lockableElsewhere(9_999))
    }
}
