import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import Testing

/// deploy/examples/python_backend.py, as a backend writer would run it: pyzmq through a CURVE
/// gateway, the app's server key, Apple's library verifying.
@Suite(.serialized)
struct PythonBackendTests {
    @Test("the Python example follows the app's notifications through a CURVE gateway, verifies each with Apple's library, and resumes from the position it kept")
    func pythonBackend() async throws {
        let python = deployDirectory.deletingLastPathComponent().appendingPathComponent(".build/python-tools/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "make test-deps installs Apple's library and pyzmq into .build/python-tools")
        let script = deployDirectory.appendingPathComponent("examples/python_backend.py").path
        try await StoreCluster(gatewayCount: 1, gatewaysOnTCP: true, gatewayKeys: true).running { cluster in
            let queue = try PaymentQueue(configuration: cluster.configuration(account: "py"))
            var bought: [String] = []
            func buy() async throws {
                guard case .success(let transaction) = try await queue.purchase(Payment(productIdentifier: coins)) else { throw ClusterFailure(description: "not purchased") }
                try await queue.finish(transaction)
                bought.append(transaction.id)
            }
            try await buy()
            try await buy()
            let position = cluster.directory.path("backend-position.json")
            let arguments = [
                script, "--gateway", cluster.gatewayEndpoints[0], "--gateway-key", try #require(cluster.gatewayPublicKeyFile), "--server-key", serverKey,
                "--position-file", position
            ]
            let first = try await runCommand(python, arguments + ["--count", "2"])
            #expect(first.status == 0, "\(first.output)")
            let lines = first.output.split(separator: "\n").filter { $0.contains("ONE_TIME_CHARGE") }
            #expect(lines.count == 2 && lines[0].hasPrefix("1 ONE_TIME_CHARGE - ") && lines[1].hasPrefix("2 ONE_TIME_CHARGE - "), "\(first.output)")
            #expect(lines.allSatisfy { $0.hasSuffix(" \(coins)") }, "\(first.output)")

            // Run again after another purchase: it starts after the position it kept.
            try await buy()
            let second = try await runCommand(python, arguments + ["--count", "1"])
            #expect(second.status == 0, "\(second.output)")
            let again = second.output.split(separator: "\n").filter { $0.contains("ONE_TIME_CHARGE") }
            #expect(again.count == 1 && again[0].hasPrefix("3 ONE_TIME_CHARGE - "), "\(second.output)")
            await queue.close()
        }
    }
}
