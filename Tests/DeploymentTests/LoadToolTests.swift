import Foundation
import StoreBus
import StoreBusTesting
import Testing

/// `storebus-bench load` against a running deployment (real processes, a CURVE gateway).
@Suite("storebus-bench load: a mix of flows against a running deployment, a live line, the table, JSON and an HTML report")
struct LoadToolTests {
    @Test(
        "at a fixed rate through a CURVE gateway every flow kind completes, an app backend following the notifications beside them; the live line, the table, results.json and report.html with its three charts come out"
    )
    func loadAtFixedRate() async throws {
        try await StoreCluster(gatewayCount: 1, gatewaysOnTCP: true, gatewayKeys: true).running { cluster in
            let report = cluster.directory.path("load-report")
            let load = ServiceProcess(
                name: "storebus-bench",
                arguments: [
                    "load", "--gateway", cluster.gatewayEndpoints[0], "--gateway-key", cluster.gatewayPublicKeyFile!,
                    "--rate", "8", "--duration", "6", "--devices", "4", "--live-interval", "1", "--report", report, "--backend", "--server-key", serverKey
                ],
                logFile: cluster.directory.url.appendingPathComponent("load.log")
            )
            try load.start(environment: ["STOREBUS_API_KEY": appKey, "STOREBUS_ADMIN_KEY": adminKey, "STOREBUS_SHARED_SECRET": puzzleSharedSecret])
            let status = await load.waitForExit(timeout: .seconds(180))
            let output = load.output
            #expect(status == 0, "\(output)")
            // The live line, once a second
            #expect(output.components(separatedBy: " flows ").count >= 4 && output.contains("/s, last second"), "\(output)")
            // The table: every flow kind of the default mix and their steps, no errors
            for row in [
                "all flows", "purchase ", "download ", "ask-to-buy ", "restore ", "subscribe ", "purchase/verify-receipt", "download/download", "ask-to-buy/approve", "subscribe/status",
                "subscribe/renew"
            ] {
                #expect(output.contains(row), "\(row) missing:\n\(output)")
            }
            #expect(output.contains("errors: none"), "\(output)")
            // The JSON: every scheduled flow completed (8 a second for 6 s)
            let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(report)/results.json"))) as? [String: Any])
            #expect(document["completed"] as? Int == 48 && document["failed"] as? Int == 0, "\(document)")
            #expect((document["seconds"] as? [Any])?.count ?? 0 >= 5)
            // The backend heard the flows' notifications: every purchase's charge at least, each
            // with its lag
            let backend = try #require(document["backend"] as? [String: Any], "\(document)")
            let byType = backend["byType"] as? [String: Int] ?? [:]
            #expect((byType["ONE_TIME_CHARGE"] ?? 0) >= 8 && (byType["SUBSCRIBED"] ?? 0) >= 1, "\(backend)")
            #expect(((backend["lag"] as? [String: Any])?["count"] as? Int ?? 0) >= 9, "\(backend)")
            #expect(output.contains("backend notifications"), "\(output)")
            // The report: one page, three charts drawn with their lines, no script
            let html = try String(contentsOfFile: "\(report)/report.html", encoding: .utf8)
            #expect(html.components(separatedBy: "<svg ").count == 4 && html.components(separatedBy: "<polyline ").count >= 5, "\(html.prefix(2000))")
            #expect(!html.contains("<script"))
        }
    }
}
