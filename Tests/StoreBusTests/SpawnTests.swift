import Foundation
import StoreBusTesting
import Testing

@Suite("Spawning test processes")
struct SpawnTests {
    @Test("a child gets /dev/null, its output file and nothing else of the parent's descriptors; its exit code is reported")
    func descriptorsAndStatus() async throws {
        let directory = try TemporaryDirectory(prefix: "spawn")
        defer { directory.remove() }
        // A descriptor of the parent's that is not close-on-exec: the child must not see it.
        let leaky = open("/dev/null", O_RDONLY)
        defer { close(leaky) }
        let log = directory.path("out.log")
        let pid = try Spawn.start(
            executable: "/bin/sh", arguments: ["-c", "ls /proc/$$/fd; exit 3"],
            environment: ["PATH": "/usr/bin:/bin"], output: .file(log)
        )
        let status = await withCheckedContinuation { continuation in
            Spawn.onExit(of: pid) { continuation.resume(returning: $0) }
        }
        #expect(status == 3)
        let descriptors = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").compactMap { Int($0) }
        #expect(!descriptors.contains(Int(leaky)), "inherited \(descriptors)")
        #expect(descriptors.filter { $0 <= 2 } == [0, 1, 2])
    }
}
