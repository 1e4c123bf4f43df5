import Foundation
import StoreBusTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `make run`'s launcher, deploy/run-local, as it is: in a network namespace of its own (its fixed
/// ports collide with nothing) and a mount namespace where a tmpfs stands in for the checkout's
/// data/ (a developer's own `make run` data is not touched).
@Suite(.serialized)
struct MakeRunTests {
    static var available: Bool {
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"), FileManager.default.isExecutableFile(atPath: "/usr/bin/nsenter") else {
            FileHandle.standardError.write(Data("MakeRunTests skipped: needs root, unshare and nsenter (util-linux)\n".utf8))
            return false
        }
        return true
    }

    @Test(
        "run-local makes its keys, prints storebus ready, serves storectl demo, starts a killed service again saying so, and stops every process on SIGTERM",
        .enabled(if: MakeRunTests.available, "needs root, unshare and nsenter; skipped (saying why on standard error) otherwise"),
        .timeLimit(.minutes(5))
    )
    func launcher() async throws {
        let root = deployDirectory.deletingLastPathComponent()
        let data = root.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let logs = try TemporaryDirectory(prefix: "make-run")
        defer { logs.remove() }
        let script = """
            set -e
            ip link set lo up
            mount -t tmpfs -o size=512m tmpfs '\(data.path)'
            exec '\(root.appendingPathComponent("deploy/run-local").path)'
            """
        let launcher = ServiceProcess(
            name: "/usr/bin/unshare", arguments: ["--mount", "--propagation", "private", "--net", "/bin/bash", "-c", script],
            logFile: logs.url.appendingPathComponent("run-local.log")
        )
        try launcher.start(environment: ["STOREBUS_BIN_DIR": Executables.directory.path])
        defer { launcher.signal(SIGKILL) }
        let pid = try #require(launcher.pid)

        // It prints one ready line with the gateway and its key once every service answers
        #expect(
            await waitUntil(timeout: .seconds(120)) { launcher.output.contains("storebus ready gateway=tcp://127.0.0.1:7300 gateway-key=data/keys/gateway.pub") || !launcher.isRunning },
            "\(launcher.output)")
        try #require(launcher.isRunning, "\(launcher.output)")
        // Its network namespace (its own by now), to find every process of it at the end.
        let namespace = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/ns/net")
        let ours = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/net")
        try #require(namespace != ours, "run-local is not in a network namespace of its own")

        /// A command inside the launcher's namespaces, from the checkout (as a developer runs it).
        func inside(_ arguments: [String], _ name: String) async throws -> (status: Int32, output: String) {
            // The directory is entered once inside the mount namespace, where data/ is the tmpfs.
            let command = "cd '\(root.path)' && exec " + arguments.map { "'\($0)'" }.joined(separator: " ")
            return try await runCommand(
                "/usr/bin/timeout", ["120", "/usr/bin/nsenter", "-t", "\(pid)", "-m", "-n", "/bin/sh", "-c", command],
                log: logs.path("\(name).log")
            )
        }
        let storectl = Executables.directory.appendingPathComponent("storectl").path
        // storectl demo completes against it, finding the gateway's key in data/keys
        let demo = try await inside([storectl, "demo", "--directory", logs.path("downloads")], "demo")
        #expect(demo.status == 0 && demo.output.contains("   status 0 (Sandbox)") && demo.output.contains("finished "), "\(demo.output)")
        // The App Store Server API answers Apple's own client signing with the demo key it made
        // (data/keys/server-api.p8): a TEST notification, verified against the store's root
        let rootPEM = try await inside([storectl, "receipt", "root-certificate"], "root")
        let rootBase64 = rootPEM.output.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        try Data(try #require(Data(base64Encoded: rootBase64), "\(rootPEM.output)")).write(to: URL(fileURLWithPath: logs.path("root.der")))
        #expect(launcher.output.contains("App Store Server API: http://127.0.0.1:7385"), "\(launcher.output)")
        let api = try await inside(
            [
                root.appendingPathComponent(".build/python-tools/bin/python").path, root.appendingPathComponent("scripts/apple-server-api-check.py").path,
                "http://127.0.0.1:7385", "data/keys/server-api.p8", "STOREBUSDEMO", "storebus-local-demo", "com.storebus.demo.puzzle", logs.path("root.der"),
                "test="
            ], "server-api")
        #expect(api.status == 0 && api.output.contains("\"ok\": true") && api.output.contains("\"notificationType\": \"TEST\""), "\(api.output)")
        // The keys were made 0600 in data/keys
        let key = try await inside(["/usr/bin/stat", "-c", "%a", "data/keys/catalog.key"], "key-mode")
        #expect(key.output.trimmingCharacters(in: .whitespacesAndNewlines) == "600", "\(key.output)")

        // When a service is killed, it is started again, and says so
        let catalogLine = try #require(launcher.output.split(separator: "\n").first { $0.hasPrefix("started storebus-catalog (pid ") })
        let catalog = try #require(pid_t(catalogLine.split(separator: " ")[3].filter(\.isNumber)))
        kill(catalog, SIGKILL)
        #expect(await waitUntil(timeout: .seconds(30)) { launcher.output.contains("storebus: storebus-catalog stopped (status") }, "\(launcher.output)")
        var health: (status: Int32, output: String) = (1, "")
        for _ in 0..<30 {
            health = try await inside([storectl, "health"], "health")
            if health.status == 0 { break }
            try await Task.sleep(for: .seconds(1))
        }
        #expect(health.status == 0 && health.output.contains("catalog behind it serving"), "\(health.output)")

        // When it gets SIGTERM (Ctrl-C's SIGINT does the same), every process stops, without an error
        launcher.signal(SIGTERM)
        let status = await launcher.waitForExit(timeout: .seconds(60))
        #expect(status == 0, "\(launcher.output)")
        #expect(launcher.output.contains("stopping StoreBus...") && launcher.output.hasSuffix("stopped.\n"), "\(launcher.output)")
        #expect(!launcher.output.lowercased().contains("error"), "\(launcher.output)")
        var left: [String] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let other = pid_t(entry), other != getpid(),
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(other)/ns/net")) == namespace
            else { continue }
            left.append((try? String(contentsOfFile: "/proc/\(other)/comm", encoding: .utf8)) ?? entry)
        }
        #expect(left.isEmpty, "left running: \(left)")
    }
}
