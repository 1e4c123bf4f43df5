import Foundation
import StoreBusTesting
import Testing

/// `--log-format json`: one JSON object a line, for log shippers.
struct JSONLogTests {
    @Test("with --log-format json every log line is one JSON object with time, level, label, message and metadata; an unknown format stops the process, saying so")
    func jsonLines() async throws {
        let directory = try TemporaryDirectory(prefix: "json-log")
        defer { directory.remove() }
        let process = ServiceProcess(
            name: "storebus-testkit-journal",
            arguments: ["--rpc-endpoint", directory.ipcEndpoint("rpc"), "--data-dir", directory.path("data"), "--log-format", "json", "--log-level", "debug"],
            logFile: directory.url.appendingPathComponent("journal.log")
        )
        try process.start()
        try await process.waitUntilServing(endpoint: directory.ipcEndpoint("rpc"))
        #expect(await process.stop() == 0)
        let lines = process.output.split(separator: "\n").filter { !$0.contains(" ready rpc=") }
        #expect(lines.count >= 3, "\(process.output)")
        for line in lines {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object != nil, "not one JSON object: \(line)")
            #expect(object?["level"] is String && object?["message"] is String && object?["label"] as? String == "storebus-testkit-journal", "\(line)")
            #expect((object?["time"] as? String)?.hasSuffix("Z") == true, "\(line)")
        }
        #expect(lines.contains { $0.contains(#""message":"Serving""#) && $0.contains(#""rpc.endpoints":"#) }, "\(process.output)")

        let wrong = ServiceProcess(
            name: "storebus-testkit-journal",
            arguments: ["--rpc-endpoint", directory.ipcEndpoint("rpc2"), "--data-dir", directory.path("data2"), "--log-format", "xml"],
            logFile: directory.url.appendingPathComponent("wrong.log")
        )
        try wrong.start()
        #expect(await wrong.waitForExit(timeout: .seconds(30)) != 0)
        #expect(wrong.output.contains("unknown log format \"xml\" (use text or json)"), "\(wrong.output)")
    }
}
