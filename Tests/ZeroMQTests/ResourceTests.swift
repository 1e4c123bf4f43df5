import Foundation
import StoreBusTesting
import Testing

private enum SoakError: Error { case pipe }

/// Runs `storebus-bench soak` in a process of its own (so that no other test moves its memory
/// figures) and returns its `name value` lines.
private func runSoak(_ arguments: [String]) throws -> [String: Int] {
    let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("storebus-bench")
    // posix_spawn, not Foundation's Process (see StoreBusTesting.Spawn for why).
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw SoakError.pipe }
    let pid = try Spawn.start(executable: binary.path, arguments: ["soak"] + arguments, environment: ProcessInfo.processInfo.environment, output: .descriptor(fds[1]))
    close(fds[1])
    let data = FileHandle(fileDescriptor: fds[0], closeOnDealloc: true).readDataToEndOfFile()
    var raw: Int32 = 0
    while waitpid(pid, &raw, 0) == -1 && errno == EINTR {}
    #expect(Spawn.status(fromWait: raw) == 0)
    var values: [String: Int] = [:]
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
        let parts = line.split(separator: " ")
        if parts.count == 2, let value = Int(parts[1]) { values[String(parts[0])] = value }
    }
    return values
}

@Suite("ZeroMQ resources")
struct ResourceTests {
    @Test("10,000 sockets opened and closed, and 1,000,000 messages sent, leave memory flat")
    func soak() async throws {
        // The soak runs for seconds: wait for it off the cooperative pool.
        let values = try await onThread("soak") { try runSoak(["--sockets", "10000", "--messages", "1000000"]) }
        let sockets = try #require(values["soak_sockets_rss_growth_bytes"])
        let messages = try #require(values["soak_messages_rss_growth_bytes"])
        #expect(values["soak_sockets"] == 10_000)
        #expect(values["soak_messages"] == 1_000_000)
        // A leak of even 100 bytes per socket or 10 bytes per message would exceed 1 MiB / 10 MiB.
        #expect(sockets < 1 << 20, "resident memory grew by \(sockets) bytes over 10,000 sockets")
        #expect(messages < 4 << 20, "resident memory grew by \(messages) bytes over 1,000,000 messages")
    }
}
