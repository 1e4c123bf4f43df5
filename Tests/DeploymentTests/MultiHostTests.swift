import Foundation
import StoreBus
import StoreBusTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Hosts made of Linux network namespaces: one a StoreBus service, one for the clients, one for an
/// intruder, each with an `eth0` joined by a veth pair to a bridge in a namespace of its own (the
/// switch), all on 10.77.0.0/24, finding each other by the names of deploy/multi-host's
/// configurations (`catalog.storebus.internal`...) through `/etc/netns/<namespace>/hosts`, which
/// `ip netns exec` puts in place of `/etc/hosts`.
final class NetworkHosts: Sendable {
    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let tcpdump = ["/usr/bin/tcpdump", "/usr/sbin/tcpdump"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Why hosts cannot be made here; nil when they can (checked once, by making a namespace).
    static let unavailability: String? = {
        guard geteuid() == 0 else { return "not root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN" }
        guard let ip else { return "no ip command (Debian's iproute2; make test installs it)" }
        guard tcpdump != nil else { return "no tcpdump (Debian's tcpdump; make test installs it)" }
        let probe = "sbprobe\(getpid())"
        let add = Process()
        add.executableURL = URL(fileURLWithPath: ip)
        add.arguments = ["netns", "add", probe]
        add.standardError = FileHandle.nullDevice
        guard (try? add.run()) != nil else { return "ip cannot be run" }
        add.waitUntilExit()
        guard add.terminationStatus == 0 else { return "`ip netns add` failed (status \(add.terminationStatus)): no network namespaces here" }
        let remove = Process()
        remove.executableURL = URL(fileURLWithPath: ip)
        remove.arguments = ["netns", "del", probe]
        try? remove.run()
        remove.waitUntilExit()
        return nil
    }()

    static var available: Bool {
        if let reason = unavailability {
            FileHandle.standardError.write(Data("MultiHostTests skipped: \(reason)\n".utf8))
            return false
        }
        return true
    }

    /// A host: its role, its namespace, the switch's end of its link, its address.
    struct Host: Sendable {
        let role: String
        let namespace: String
        let switchPort: String
        let address: String
    }

    let tag: String
    let hosts: [String: Host]
    /// The first three numbers of the hosts' addresses (`10.77.0`).
    let subnet: String
    /// The names every host's /etc/hosts gives (`<name>.storebus.internal`).
    let named: [String]
    var switchNamespace: String { "\(tag)-switch" }

    /// Hosts for `roles`, tagged `tag` (namespaces `<tag>-<role>`), on `<subnet>.0/24`, each of
    /// `named` known by name to all.
    init(
        roles: [String] = ["catalog", "payment-queue", "receipt", "download", "notifications", "gateway", "client", "intruder"],
        named: [String] = ["catalog", "payment-queue", "receipt", "download", "notifications", "gateway"], tag: String = "sb\(getpid() % 100_000)",
        subnet: String = "10.77.0"
    ) {
        self.tag = tag
        self.subnet = subnet
        self.named = named
        var hosts: [String: Host] = [:]
        for (index, role) in roles.enumerated() {
            hosts[role] = Host(role: role, namespace: "\(tag)-\(role)", switchPort: "p\(index)-\(role.prefix(8))", address: "\(subnet).\(index + 1)")
        }
        self.hosts = hosts
    }

    subscript(role: String) -> Host { hosts[role]! }

    /// The names of deploy/multi-host's configurations, as every host's /etc/hosts.
    var hostsFile: String {
        "127.0.0.1 localhost\n" + named.map { "\(self[$0].address) \($0).storebus.internal\n" }.joined()
    }

    /// This process's own address on the switch (`<subnet>.254`), once ``attachTestProcess()`` joined it.
    var testProcessAddress: String { "\(subnet).254" }

    /// Joins the namespace this process runs in to the switch, at ``testProcessAddress``: the test
    /// then reaches every host as a client on the network would. Undone with the switch.
    func attachTestProcess() async throws {
        try await ip(["link", "add", "\(tag)-t", "type", "veth", "peer", "name", "port-test", "netns", switchNamespace])
        try await ip(["addr", "add", "\(testProcessAddress)/24", "dev", "\(tag)-t"])
        try await ip(["link", "set", "\(tag)-t", "up"])
        try await ip(["-n", switchNamespace, "link", "set", "port-test", "master", "bridge0", "up"])
    }

    /// Runs `ip` with `arguments`; throws with its output when it fails.
    func ip(_ arguments: [String]) async throws {
        let result = try await runCommand(Self.ip!, arguments)
        guard result.status == 0 else { throw TestingError("ip \(arguments.joined(separator: " ")) failed: \(result.output)") }
    }

    func create() async throws {
        try await ip(["netns", "add", switchNamespace])
        try await ip(["-n", switchNamespace, "link", "add", "bridge0", "type", "bridge"])
        try await ip(["-n", switchNamespace, "link", "set", "bridge0", "up"])
        for host in hosts.values.sorted(by: { $0.address < $1.address }) {
            try await ip(["netns", "add", host.namespace])
            try await ip(["-n", switchNamespace, "link", "add", host.switchPort, "type", "veth", "peer", "name", "eth0", "netns", host.namespace])
            try await ip(["-n", switchNamespace, "link", "set", host.switchPort, "master", "bridge0", "up"])
            try await ip(["-n", host.namespace, "addr", "add", "\(host.address)/24", "dev", "eth0"])
            try await ip(["-n", host.namespace, "link", "set", "eth0", "up"])
            try await ip(["-n", host.namespace, "link", "set", "lo", "up"])
            let etc = "/etc/netns/\(host.namespace)"
            try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
            try hostsFile.write(toFile: "\(etc)/hosts", atomically: true, encoding: .utf8)
        }
    }

    /// Removes every namespace (and so every link) and the hosts files; safe after a partial create.
    func remove() async {
        for host in hosts.values {
            _ = try? await runCommand(Self.ip!, ["netns", "del", host.namespace])
            try? FileManager.default.removeItem(atPath: "/etc/netns/\(host.namespace)")
        }
        _ = try? await runCommand(Self.ip!, ["netns", "del", switchNamespace])
    }

    /// Takes the link of `role`'s host down or up, at the switch.
    func setLink(_ role: String, up: Bool) async throws {
        try await ip(["-n", switchNamespace, "link", "set", self[role].switchPort, up ? "up" : "down"])
    }

    /// A command in `role`'s host, to its end (at most `limit` seconds).
    func run(in role: String, _ executable: String, _ arguments: [String], environment: [String: String] = [:], log: String, limit: Int = 120) async throws -> (status: Int32, output: String) {
        try await runCommand("/usr/bin/timeout", ["\(limit)", Self.ip!, "netns", "exec", self[role].namespace, executable] + arguments, environment: environment, log: log)
    }
}

@Suite("deploy/multi-host: six services on six hosts (network namespaces), every link CURVE", .serialized)
struct MultiHostTests {
    @Test(
        "purchases, a receipt verification and a download across hosts; a link down and up loses nothing; an intruder is answered by the gateway's client endpoint only; captures between services show nothing in clear",
        .enabled(if: NetworkHosts.available, "needs root, iproute2 and tcpdump to make network namespaces joined by veth pairs; skipped (saying why on standard error) where they cannot be made"),
        .timeLimit(.minutes(10))
    )
    func servicesOnSeparateHosts() async throws {
        let directory = try TemporaryDirectory(prefix: "multi-host")
        defer { directory.remove() }
        let network = NetworkHosts()
        var processes: [ServiceProcess] = []
        var captures: [ServiceProcess] = []
        do {
            try await network.create()
            try await run(network, directory, &processes, &captures)
        } catch {
            for process in captures + processes.reversed() { _ = await process.stop() }
            await network.remove()
            throw error
        }
        for process in captures + processes.reversed() { _ = await process.stop() }
        await network.remove()
    }

    private func run(_ network: NetworkHosts, _ directory: TemporaryDirectory, _ processes: inout [ServiceProcess], _ captures: inout [ServiceProcess]) async throws {
        // deploy/multi-host's configurations as they are, but for where /etc/storebus is and the
        // gateway's secrets, with the keys, catalog and content an install puts beside them.
        let etc = directory.path("etc")
        try FileManager.default.createDirectory(atPath: "\(etc)/catalog", withIntermediateDirectories: true)
        let appKey = "multi-host-app-key-\(network.tag)-\(UUID().uuidString.prefix(8))"
        let adminKey = "multi-host-admin-key-\(network.tag)-\(UUID().uuidString.prefix(8))"
        for file in ["catalog.json", "payment-queue.json", "receipt.json", "download.json", "notifications.json", "gateway.json.in"] {
            var text = try String(contentsOf: deployDirectory.appendingPathComponent("multi-host/\(file)"), encoding: .utf8)
            text = text.replacingOccurrences(of: "\"/etc/storebus/", with: "\"\(etc)/")
                .replacingOccurrences(of: "@SESSION_SECRET@", with: "multi-host-session-secret-\(UUID().uuidString)")
                .replacingOccurrences(of: "@APP_KEY@", with: appKey).replacingOccurrences(of: "@ADMIN_KEY@", with: adminKey)
            try text.write(toFile: "\(etc)/\(file.replacingOccurrences(of: ".in", with: ""))", atomically: true, encoding: .utf8)
        }
        try FileManager.default.copyItem(at: deployDirectory.appendingPathComponent("catalog/catalog.json"), to: URL(fileURLWithPath: "\(etc)/catalog/catalog.json"))
        try FileManager.default.copyItem(at: deployDirectory.appendingPathComponent("content"), to: URL(fileURLWithPath: "\(etc)/content"))
        let services = ["catalog", "payment-queue", "receipt", "download", "notifications", "gateway"]
        for service in services { try CurveKeyFile.make(name: service, in: URL(fileURLWithPath: "\(etc)/keys")) }
        // The intruder holds a key pair of its own, and the public keys anyone may know.
        let intruderKeys = URL(fileURLWithPath: directory.path("intruder"))
        try CurveKeyFile.make(name: "intruder", in: intruderKeys)

        // Captures on the links of the payment queue's host and of the gateway's host, at the switch.
        for role in ["payment-queue", "gateway"] {
            let capture = ServiceProcess(
                name: NetworkHosts.ip!,
                arguments: ["netns", "exec", network.switchNamespace, NetworkHosts.tcpdump!, "-i", network[role].switchPort, "-U", "-s", "0", "-w", directory.path("\(role).pcap"), "tcp"],
                logFile: directory.url.appendingPathComponent("tcpdump-\(role).log")
            )
            try capture.start()
            captures.append(capture)
        }
        for capture in captures {
            // tcpdump says "listening on" once it captures.
            let deadline = ContinuousClock.now + .seconds(20)
            while !capture.output.contains("listening on"), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            #expect(capture.output.contains("listening on"), "\(capture.output)")
        }

        // When each service starts on its own host
        for service in services {
            let executable = try Executables.url("storebus-\(service)").path
            var arguments = ["netns", "exec", network[service].namespace, executable, "--config", "\(etc)/\(service).json"]
            if service != "catalog" && service != "gateway" { arguments += ["--data-dir", directory.path("data/\(service)")] }
            let process = ServiceProcess(name: NetworkHosts.ip!, arguments: arguments, logFile: directory.url.appendingPathComponent("\(service).log"))
            try process.start()
            processes.append(process)
            try await process.waitUntilReady()
        }
        let gateway = "tcp://gateway.storebus.internal:7300"
        let clientEnvironment = ["STOREBUS_API_KEY": appKey, "STOREBUS_ADMIN_KEY": adminKey, "STOREBUS_GATEWAY_KEY": "\(etc)/keys/gateway.pub", "STOREBUS_GATEWAY": gateway]
        let storectl = try Executables.url("storectl").path

        // Then from the clients' host the gateway, and through it every service, answers
        var health: (status: Int32, output: String) = (1, "")
        for _ in 0..<30 {
            health = try await network.run(in: "client", storectl, ["health", "--gateway", gateway, "--timeout", "5"], environment: clientEnvironment, log: directory.path("health.log"))
            if health.status == 0 { break }
            try await Task.sleep(for: .seconds(1))
        }
        #expect(health.status == 0, "\(health.output)\n\(processes.map(\.output).joined(separator: "\n"))")
        for upstream in ["catalog", "payment-queue", "receipt", "download", "notifications"] {
            #expect(health.output.contains("\(upstream) behind it serving"), "\(health.output)")
        }

        // And a purchase, a receipt the store verifies and a download of the sample content go
        // through, across the hosts
        let account = "multihost-buyer-\(network.tag)"
        let downloads = directory.path("downloads")
        let demo = try await network.run(
            in: "client", storectl, ["demo", "--account", account, "--directory", downloads],
            environment: clientEnvironment, log: directory.path("demo.log")
        )
        #expect(demo.status == 0, "\(demo.output)")
        #expect(demo.output.contains(" purchased") && demo.output.contains("   status 0 (Sandbox)"), "\(demo.output)")
        let pack = try FileManager.default.contentsOfDirectory(atPath: downloads).first { $0.hasSuffix("-com.storebus.demo.puzzle.levelpack1") }
        #expect(FileManager.default.fileExists(atPath: "\(downloads)/\(pack ?? "")/Contents/levels.json"), "\(demo.output)")

        // When the receipt service's host is cut off while a product is bought, then joined again
        try await network.setLink("receipt", up: false)
        let bought = try await network.run(
            in: "client", storectl, ["buy", "com.storebus.demo.puzzle.removeads", "--account", account, "--finish"],
            environment: clientEnvironment, log: directory.path("buy-while-cut-off.log")
        )
        #expect(bought.status == 0 && bought.output.contains(" purchased"), "\(bought.output)")
        // Long enough for the heartbeats to give the links up (3 s)
        try await Task.sleep(for: .seconds(5))
        try await network.setLink("receipt", up: true)
        // Then nothing is lost: the receipt, refreshed from the receipt service, lists both purchases
        var verified: (status: Int32, output: String) = (1, "")
        for _ in 0..<60 {
            let refreshed = try await network.run(in: "client", storectl, ["receipt", "refresh", "--account", account], environment: clientEnvironment, log: directory.path("refresh.log"))
            verified = try await network.run(in: "client", storectl, ["receipt", "verify", "--account", account], environment: clientEnvironment, log: directory.path("verify.log"))
            verified.output = refreshed.output + verified.output
            if verified.status == 0, verified.output.contains("com.storebus.demo.puzzle.removeads") { break }
            try await Task.sleep(for: .seconds(1))
        }
        #expect(verified.status == 0, "\(verified.output)")
        #expect(verified.output.contains("com.storebus.demo.puzzle.removeads") && verified.output.contains("com.storebus.demo.puzzle.levelpack1"), "\(verified.output)")

        // The intruder reaches every port, but without an allowed key gets no answer from any
        // service: neither over plain TCP nor over CURVE with the servers' public keys and a key
        // pair of its own
        let probe = try Executables.url("storebus-testkit-probe").path
        let behindGateway = [("catalog", 7301), ("payment-queue", 7302), ("receipt", 7303), ("download", 7304), ("notifications", 7305)]
        for (service, port) in behindGateway {
            let endpoint = "tcp://\(service).storebus.internal:\(port)"
            let plain = try await network.run(in: "intruder", probe, [endpoint], log: directory.path("intruder-plain-\(service).log"))
            #expect(plain.status == 3 && plain.output.contains("no answer"), "\(service), plain: \(plain.output)")
            let curve = try await network.run(
                in: "intruder", probe, [endpoint, "--server-key", "\(etc)/keys/\(service).pub", "--key-file", intruderKeys.appendingPathComponent("intruder.key").path],
                log: directory.path("intruder-curve-\(service).log")
            )
            #expect(curve.status == 3 && curve.output.contains("no answer"), "\(service), CURVE: \(curve.output)")
        }
        // And each service says on its log that it refused the intruder's address at the handshake
        let intruderAddress = network["intruder"].address
        for (service, _) in behindGateway {
            let log = processes[services.firstIndex(of: service)!].output
            #expect(log.contains("Refused a connection at the CURVE handshake") && log.contains(intruderAddress), "\(service): \(log.suffix(2000))")
        }
        // Only the gateway's client endpoint answers it, over CURVE with the gateway's public key
        // (an API key would then say who it is); not over plain TCP
        let gatewayCurve = try await network.run(in: "intruder", probe, [gateway, "--server-key", "\(etc)/keys/gateway.pub"], log: directory.path("intruder-gateway.log"))
        #expect(gatewayCurve.status == 0 && gatewayCurve.output.contains("answered serving by storebus-gateway"), "\(gatewayCurve.output)")
        let gatewayPlain = try await network.run(in: "intruder", probe, [gateway], log: directory.path("intruder-gateway-plain.log"))
        #expect(gatewayPlain.status == 3, "\(gatewayPlain.output)")

        // The captures between services hold their traffic, and none of the product identifiers,
        // the account, or the API keys in clear
        for capture in captures { _ = await capture.stop() }
        captures.removeAll()
        for role in ["payment-queue", "gateway"] {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: directory.path("\(role).pcap")))
            #expect(bytes.count > 50_000, "\(role): only \(bytes.count) bytes captured")
            for secret in [account, appKey, adminKey, "com.storebus.demo.puzzle.coins100", "com.storebus.demo.puzzle.levelpack1", "com.storebus.demo.puzzle.removeads", "levels.json"] {
                #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(role)'s link carries \"\(secret)\" in clear")
            }
        }
        // (the checks above find what they look for: the same bytes are in a file the demo wrote)
        let receiptLog = try Data(contentsOf: URL(fileURLWithPath: directory.path("verify.log")))
        #expect(receiptLog.range(of: Data("com.storebus.demo.puzzle.removeads".utf8)) != nil)
    }
}
