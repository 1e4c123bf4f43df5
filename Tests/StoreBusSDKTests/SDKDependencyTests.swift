import Foundation
import StoreBusTesting
import Testing

/// What an app that adopts the SDK builds: no server, process hosting or command-line parsing.
struct SDKDependencyTests {
    @Test("StoreBusSDK's dependency graph, as SwiftPM describes it, holds no server code, ArgumentParser, ServiceLifecycle, GRDB or Hummingbird")
    func noServerCodeInTheSDK() async throws {
        let root = deployDirectory.deletingLastPathComponent()
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("storebus-describe-\(getpid()).json").path
        defer { try? FileManager.default.removeItem(atPath: log) }
        let describe = try await runCommand(
            "/bin/sh", ["-c", #"cd "$0" && exec swift package describe --type json 2>/dev/null"#, root.path], log: log
        )
        try #require(describe.status == 0, "swift package describe failed: \(describe.output.prefix(2000))")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(describe.output.utf8)) as? [String: Any])
        let targets = try #require(json["targets"] as? [[String: Any]])
        let byName = Dictionary(uniqueKeysWithValues: targets.compactMap { target in (target["name"] as? String).map { ($0, target) } })
        // Every target and product the SDK reaches, through its targets' dependencies.
        var targetsReached: Set<String> = []
        var productsReached: Set<String> = []
        var queue = ["StoreBusSDK"]
        while let name = queue.popLast() {
            guard targetsReached.insert(name).inserted, let target = byName[name] else { continue }
            queue += target["target_dependencies"] as? [String] ?? []
            productsReached.formUnion(target["product_dependencies"] as? [String] ?? [])
        }
        #expect(targetsReached.contains("StoreBus") && targetsReached.contains("ReceiptFormat"), "\(targetsReached.sorted())")
        for server in ["StoreBusServer", "StoreBusHost", "StoreBusStorage", "Catalog", "PaymentQueue", "Receipt", "Download", "Gateway"] {
            #expect(!targetsReached.contains(server), "the SDK reaches \(server): \(targetsReached.sorted())")
        }
        for product in ["ArgumentParser", "ServiceLifecycle", "UnixSignals", "GRDB", "Hummingbird"] {
            #expect(!productsReached.contains(product), "the SDK reaches \(product): \(productsReached.sorted())")
        }
    }
}
