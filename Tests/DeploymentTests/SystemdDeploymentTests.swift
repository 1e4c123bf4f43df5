import Foundation
import StoreBus
import StoreBusTesting
import Testing

/// The `[Service]` settings of a unit file that the test plays systemd's part for: every value of
/// each key, in order (systemd takes the last for most, all of them for LoadCredential).
private func serviceSettings(_ unit: String) -> [String: [String]] {
    var settings: [String: [String]] = [:]
    var inService = false
    for line in unit.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
        if line.hasPrefix("[") { inService = line == "[Service]"; continue }
        guard inService, !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
        settings[String(line[..<equals]), default: []].append(String(line[line.index(after: equals)...]))
    }
    return settings
}

/// The value of the series `series` (its name and labels as Prometheus's text format writes them)
/// in a metrics page; nil when the page has none.
func metricValue(_ page: String, _ series: String) -> Double? {
    for line in page.split(separator: "\n") where line.hasPrefix(series + " ") {
        return Double(line.dropFirst(series.count + 1).trimmingCharacters(in: .whitespaces))
    }
    return nil
}

@Suite("deploy/systemd: a systemd deployment's install script, configurations and units")
struct SystemdDeploymentTests {
    @Test("install stages the executables, configurations with keys of their own and units systemd accepts; started as the units say, the services sell a product")
    func installAndStart() async throws {
        let directory = try TemporaryDirectory(prefix: "systemd")
        defer { directory.remove() }
        let root = directory.path("root")
        let install = deployDirectory.appendingPathComponent("systemd/install").path
        let environment = ["DESTDIR": root, "STOREBUS_BIN_DIR": Executables.directory.path]

        // When the install script stages a deployment from the built executables
        let first = try await runCommand("/bin/bash", [install], environment: environment, log: directory.path("install.log"))
        #expect(first.status == 0, "\(first.output)")
        // Then the executables, configurations and units are in place
        for product in [
            "storebus-catalog", "storebus-payment-queue", "storebus-receipt", "storebus-download", "storebus-notifications", "storebus-gateway", "storebus-console",
            "storectl"
        ] {
            #expect(FileManager.default.isExecutableFile(atPath: "\(root)/usr/local/bin/\(product)"), "\(product)")
        }
        for file in [
            "catalog.json", "catalog/catalog.json", "payment-queue.json", "receipt.json", "download.json", "notifications.json", "console.json",
            "content/puzzle-levelpack1/levels.json"
        ] {
            #expect(FileManager.default.fileExists(atPath: "\(root)/etc/storebus/\(file)"), "\(file)")
        }
        // And the gateway's secrets were made for this host, readable by root alone
        let gatewayConfig = "\(root)/etc/storebus/gateway.json"
        let permissions = try FileManager.default.attributesOfItem(atPath: gatewayConfig)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        let config = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: gatewayConfig))) as? [String: Any])
        let settings = try #require(config["service"] as? [String: Any])
        let secret = try #require(settings["sessionSecret"] as? String)
        #expect(secret.count == 64 && secret.allSatisfy(\.isHexDigit), "\(secret)")
        let keys = try #require(settings["apiKeys"] as? [[String: Any]])
        let appKey = try #require(keys.first { $0["admin"] as? Bool != true }?["key"] as? String)
        let adminKey = try #require(keys.first { $0["admin"] as? Bool == true }?["key"] as? String)
        #expect(appKey.count == 48 && adminKey.count == 48 && appKey != adminKey && !secret.contains(appKey))
        // And each service's CURVE key pair, the key pair root's alone, its public key for the others
        for service in ["catalog", "payment-queue", "receipt", "download", "notifications", "gateway", "console"] {
            let keyPair = "\(root)/etc/storebus/keys/\(service).key"
            let mode = try FileManager.default.attributesOfItem(atPath: keyPair)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(service).key")
            let pair = try CurveKeyFile.readKeyPair(at: keyPair)
            #expect(try CurveKeyFile.readPublicKey(at: "\(root)/etc/storebus/keys/\(service).pub") == pair.publicKey)
        }

        // When it runs again (an upgrade), from elsewhere with DESTDIR relative to there, the
        // configurations are the operator's and are kept
        let installed = try Data(contentsOf: URL(fileURLWithPath: gatewayConfig))
        let catalogKey = try Data(contentsOf: URL(fileURLWithPath: "\(root)/etc/storebus/keys/catalog.key"))
        let again = try await runCommand(
            "/bin/bash", ["-c", #"cd "$0" && exec /bin/bash "$1""#, directory.url.path, install],
            environment: environment.merging(["DESTDIR": "root"]) { _, new in new }, log: directory.path("install-again.log")
        )
        #expect(again.status == 0 && again.output.contains("kept \(gatewayConfig)"), "\(again.output)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: gatewayConfig)) == installed)
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(root)/etc/storebus/keys/catalog.key")) == catalogKey)

        // systemd accepts the units as they are, their executables where they were staged
        let verifyDirectory = directory.url.appendingPathComponent("verify")
        try FileManager.default.createDirectory(at: verifyDirectory, withIntermediateDirectories: true)
        let unitDirectory = "\(root)/etc/systemd/system"
        let unitNames = try FileManager.default.contentsOfDirectory(atPath: unitDirectory).sorted()
        #expect(
            unitNames == [
                "storebus-catalog.service", "storebus-console.service", "storebus-download.service", "storebus-download@.service", "storebus-gateway.service",
                "storebus-notifications.service", "storebus-notifications@.service", "storebus-payment-queue.service", "storebus-payment-queue@.service",
                "storebus-receipt.service", "storebus-receipt@.service", "storebus.target"
            ])
        // An instance of each template reads its own configuration and keeps its own data.
        for service in ["payment-queue", "receipt", "download", "notifications"] {
            let template = try String(contentsOfFile: "\(unitDirectory)/storebus-\(service)@.service", encoding: .utf8)
            #expect(template.contains("--config /etc/storebus/\(service)-%i.json") && template.contains("StateDirectory=storebus/\(service)-%i"), "\(template)")
        }
        var units: [String: String] = [:]
        for name in unitNames {
            let text = try String(contentsOfFile: "\(unitDirectory)/\(name)", encoding: .utf8)
            units[name] = text
            try text.replacingOccurrences(of: "/usr/local/bin/", with: "\(root)/usr/local/bin/")
                .write(to: verifyDirectory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        let analyze = "/usr/bin/systemd-analyze"
        try #require(FileManager.default.isExecutableFile(atPath: analyze), "systemd-analyze (Debian's systemd; make test installs it) checks the units")
        // A template is checked as an instance of it (instance 2).
        let verify = try await runCommand(
            analyze, ["verify"] + unitNames.map { verifyDirectory.appendingPathComponent($0.replacingOccurrences(of: "@.", with: "@2.")).path },
            log: directory.path("verify.log"))
        #expect(verify.status == 0 && verify.output.isEmpty, "\(verify.output)")

        // When the services start as their units say (systemd's part played here: the state
        // directory, the credential, the variables, the address families), on free ports
        var ports: [String: String] = [:]
        let fixed = ["7300", "7301", "7302", "7303", "7304", "7305", "7306", "7312", "7383", "7390", "9300", "9301", "9302", "9303", "9304", "9305", "9306"]
        for port in fixed { ports["127.0.0.1:\(port)"] = "127.0.0.1:\(try unusedLoopbackPort())" }
        try #require(Set(ports.values).count == fixed.count, "different free ports: \(ports)")
        for file in ["catalog.json", "payment-queue.json", "receipt.json", "download.json", "notifications.json", "gateway.json", "console.json"] {
            let path = "\(root)/etc/storebus/\(file)"
            var text = try String(contentsOfFile: path, encoding: .utf8)
            for (from, to) in ports { text = text.replacingOccurrences(of: from, with: to) }
            text = text.replacingOccurrences(of: "\"/etc/storebus/", with: "\"\(root)/etc/storebus/")
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let gatewayKey = try CurveKeyFile.readPublicKey(at: "\(root)/etc/storebus/keys/gateway.pub")
        var processes: [ServiceProcess] = []
        for (unit, port) in [
            ("storebus-catalog", "7301"), ("storebus-payment-queue", "7302"), ("storebus-receipt", "7303"), ("storebus-download", "7304"), ("storebus-notifications", "7305"),
            ("storebus-gateway", "7300"), ("storebus-console", "7306")
        ] {
            let service = serviceSettings(units["\(unit).service"]!)
            var commandLine = try #require(service["ExecStart"]?.last)
            if let state = service["StateDirectory"]?.last {
                let path = directory.path("var/lib/\(state)")
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
                commandLine = commandLine.replacingOccurrences(of: "${STATE_DIRECTORY}", with: path)
            }
            // Every service has its key pair as a credential; the gateway its configuration too.
            let loaded = service["LoadCredential"] ?? []
            #expect(loaded.contains("\(unit.dropFirst("storebus-".count)).key:/etc/storebus/keys/\(unit.dropFirst("storebus-".count)).key"), "\(loaded)")
            let credentials = directory.path("credentials/\(unit)")
            try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
            for credential in loaded {
                let parts = credential.split(separator: ":", maxSplits: 1).map(String.init)
                try FileManager.default.copyItem(atPath: root + parts[1], toPath: "\(credentials)/\(parts[0])")
                commandLine = commandLine.replacingOccurrences(of: "${CREDENTIALS_DIRECTORY}", with: credentials)
            }
            commandLine = commandLine.replacingOccurrences(of: "/etc/storebus/", with: "\(root)/etc/storebus/")
            let words = commandLine.split(separator: " ").map(String.init)
            #expect(words[0] == "/usr/local/bin/\(unit)")
            // The installed executable, with socket(2) limited to the unit's address families as
            // systemd limits it (a seccomp filter): libzmq aborts when one it needs is refused.
            let families = try #require(service["RestrictAddressFamilies"]?.last)
            let process = ServiceProcess(
                name: "storebus-testkit-restrict-families", arguments: [families, root + words[0]] + words.dropFirst(),
                logFile: directory.url.appendingPathComponent("\(unit).log")
            )
            processes.append(process)
            try process.start()
            // Only the other services' keys may ask the services behind the gateway: their ready
            // line says they serve; the gateway's Health/Check asks them below.
            if unit == "storebus-gateway" {
                try await process.waitUntilServing(endpoint: "tcp://\(ports["127.0.0.1:\(port)"]!)", serverPublicKey: gatewayKey)
            } else {
                try await process.waitUntilReady()
            }
        }
        let gateway = "tcp://\(ports["127.0.0.1:7300"]!)"
        // The console serves its login page where its configuration says.
        let login = try await runCommand("/usr/bin/curl", ["-sS", "--max-time", "10", "-w", "\n%{http_code}", "http://\(ports["127.0.0.1:7390"]!)/login"])
        #expect(login.output.hasSuffix("\n200") && login.output.contains("Admin key"), "\(login.output)")

        // Each serves its metrics on the port its configuration names (curl, as Prometheus would scrape)
        let metricsPorts = [
            "gateway": "9300", "catalog": "9301", "payment-queue": "9302", "receipt": "9303", "download": "9304", "notifications": "9305", "console": "9306"
        ]
        func scrape() async throws -> [String: String] {
            var pages: [String: String] = [:]
            for (service, port) in metricsPorts {
                let page = try await runCommand("/usr/bin/curl", ["-sS", "--max-time", "10", "http://\(ports["127.0.0.1:\(port)"]!)/metrics"])
                #expect(page.status == 0, "\(service): \(page.output)")
                pages[service] = page.output
            }
            return pages
        }
        let before = try await scrape()

        // Then health through the gateway finds every service, and a purchase goes through with the
        // keys the install made
        let credentials = ["STOREBUS_API_KEY": appKey, "STOREBUS_ADMIN_KEY": adminKey, "STOREBUS_GATEWAY_KEY": "\(root)/etc/storebus/keys/gateway.pub"]
        let health = ServiceProcess(name: "storectl", arguments: ["health", "--gateway", gateway], logFile: directory.url.appendingPathComponent("health.log"))
        try health.start(environment: credentials)
        #expect(await health.waitForExit(timeout: .seconds(60)) == 0, "\(health.output)")
        for upstream in ["catalog", "payment-queue", "receipt", "download", "notifications"] {
            #expect(health.output.contains("\(upstream) behind it serving"), "\(health.output)")
        }
        let demo = ServiceProcess(
            name: "storectl", arguments: ["demo", "--gateway", gateway, "--account", "systemd", "--directory", directory.path("downloads")],
            logFile: directory.url.appendingPathComponent("demo.log")
        )
        try demo.start(environment: credentials)
        #expect(await demo.waitForExit(timeout: .seconds(60)) == 0, "\(demo.output)")
        #expect(demo.output.contains(" purchased") && demo.output.contains("removedTransactions: "), "\(demo.output)")
        // With a receipt the store verifies, and the sample pack downloaded and unpacked
        #expect(demo.output.contains("   status 0 (Sandbox)"), "\(demo.output)")
        let pack = try FileManager.default.contentsOfDirectory(atPath: directory.path("downloads")).first { $0.hasSuffix("-com.storebus.demo.puzzle.levelpack1") }
        #expect(FileManager.default.fileExists(atPath: directory.path("downloads/\(pack ?? "")/Contents/levels.json")), "\(demo.output)")
        // And the payment queue keeps its data in the state directory systemd gives it
        #expect(FileManager.default.fileExists(atPath: directory.path("var/lib/storebus/payment-queue/payment-queue.sqlite")))
        // And the receipt service its database and keys, the private ones readable by it alone
        #expect(FileManager.default.fileExists(atPath: directory.path("var/lib/storebus/receipt/receipt.sqlite")))
        let rootKey = try FileManager.default.attributesOfItem(atPath: directory.path("var/lib/storebus/receipt/keys/root-key.pem"))
        #expect((rootKey[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        // And the download service its database and the package it made of the sample content
        #expect(FileManager.default.fileExists(atPath: directory.path("var/lib/storebus/download/download.sqlite")))
        let packages = try FileManager.default.contentsOfDirectory(atPath: directory.path("var/lib/storebus/download/packages"))
        #expect(packages.contains { $0.hasPrefix("com.storebus.demo.puzzle.levelpack1-1.0-") && $0.hasSuffix(".tar") }, "\(packages)")

        // And the metrics moved with the work: calls by method and code, the log's head and group
        // commits, receipts signed, bytes downloaded, Observe calls parked
        let after = try await scrape()
        let moved: [(String, String)] = [
            ("gateway", #"storebus_rpc_calls_total{method="/storebus.payment_queue.v1.PaymentQueue/AddPayment",code="OK"}"#),
            ("gateway", "storebus_gateway_observe_parked"),
            ("catalog", #"storebus_rpc_calls_total{method="/storebus.catalog.v1.Catalog/FetchProducts",code="OK"}"#),
            ("payment-queue", #"storebus_rpc_calls_total{method="/storebus.payment_queue.v1.PaymentQueue/AddPayment",code="OK"}"#),
            ("payment-queue", #"storebus_event_log_head{log="payment-queue"}"#),
            ("payment-queue", #"storebus_group_commit_writes_count{log="payment-queue"}"#),
            ("payment-queue", "storebus_wal_sync_seconds_count"),
            ("receipt", "storebus_receipts_signed_total"),
            ("receipt", #"storebus_event_follower_lag{log="payment-queue",follower="storebus-receipt"}"#),
            ("download", "storebus_download_bytes_total"),
            ("download", #"storebus_rpc_call_duration_seconds_count{method="/storebus.download.v1.Download/ReadChunk"}"#)
        ]
        for (service, series) in moved {
            let was = metricValue(before[service] ?? "", series) ?? 0
            let now = metricValue(after[service] ?? "", series)
            #expect(now != nil, "\(service) has no \(series):\n\(after[service] ?? "")")
            if !series.contains("parked") && !series.contains("lag") { #expect((now ?? 0) > was, "\(service): \(series) \(was) → \(now ?? -1)") }
        }

        for process in processes.reversed() { _ = await process.stop() }
    }
}
