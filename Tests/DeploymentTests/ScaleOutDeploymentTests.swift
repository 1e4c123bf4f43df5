import Foundation
import StoreBus
import StoreBusTesting
import Testing

/// deploy/scale-out: the configurations of several instances of each service on PostgreSQL, as the
/// install script stages them.
@Suite("deploy/scale-out: the configurations of a deployment of several instances on PostgreSQL")
struct ScaleOutDeploymentTests {
    @Test("install LAYOUT=scale-out stages every service's configuration with its keys; each executable's --check-config finds it valid, and refuses a broken one naming the setting")
    func configurationsCheck() async throws {
        let directory = try TemporaryDirectory(prefix: "scale-out")
        defer { directory.remove() }
        let root = directory.path("root")
        let install = deployDirectory.appendingPathComponent("systemd/install").path
        let staged = try await runCommand(
            "/bin/bash", [install], environment: ["DESTDIR": root, "STOREBUS_BIN_DIR": Executables.directory.path, "LAYOUT": "scale-out"],
            log: directory.path("install.log"))
        #expect(staged.status == 0, "\(staged.output)")
        let etc = "\(root)/etc/storebus"
        // The staged files name /etc/storebus: here, under the staging root.
        for file in ["catalog.json", "payment-queue.json", "receipt.json", "download.json", "notifications.json", "gateway.json"] {
            let path = "\(etc)/\(file)"
            let text = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: "\"/etc/storebus/", with: "\"\(etc)/")
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
        for service in ["catalog", "payment-queue", "receipt", "download", "notifications", "gateway"] {
            let checked = try await runCommand(
                try Executables.url("storebus-\(service)").path, ["--config", "\(etc)/\(service).json", "--check-config"], log: directory.path("check-\(service).log"))
            #expect(checked.status == 0 && checked.output.contains("is valid"), "\(service): \(checked.output)")
        }
        // Every endpoint a service calls has its server's CURVE key named (a connect without one is
        // refused), every instance's included.
        for file in ["payment-queue", "receipt", "download", "notifications", "gateway"] {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(etc)/\(file).json"))) as? [String: Any])
            let service = try #require(object["service"] as? [String: Any])
            let keys = try #require((object["curve"] as? [String: Any])?["serverKeys"] as? [String: String])
            let called = service.values.compactMap { $0 as? [String] }.joined().filter { $0.hasPrefix("tcp://") }
            for endpoint in called { #expect(keys[endpoint] != nil, "\(file): no server key for \(endpoint)") }
            for key in keys.values { #expect(FileManager.default.fileExists(atPath: key), "\(file): \(key)") }
        }
        // Storage on PostgreSQL with no servers named cannot work: the check says which setting.
        let broken = "\(etc)/receipt-broken.json"
        var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(etc)/receipt.json"))) as? [String: Any])
        var service = try #require(object["service"] as? [String: Any])
        service["postgres"] = nil
        object["service"] = service
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: broken))
        let refused = try await runCommand(try Executables.url("storebus-receipt").path, ["--config", broken, "--check-config"], log: directory.path("check-broken.log"))
        #expect(refused.status != 0 && refused.output.contains("service.postgres"), "\(refused.output)")
    }
}
