import Foundation
import StoreBus
import StoreBusTesting
import Testing

@Suite("Host options: flags, environment and config file")
struct HostOptionsTests {
    /// Writes `json` as a config file in `directory` and returns its path.
    func writeConfig(_ json: String, in directory: TemporaryDirectory) throws -> String {
        let path = directory.path("config.json")
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Runs `executable` with `arguments` until it exits (killing it after 20 s); returns its exit
    /// status (a signal number when a signal ended it) and its output.
    func exitOf(_ executable: String, _ arguments: [String], in directory: TemporaryDirectory) async throws -> (status: Int32?, output: String) {
        let process = ServiceProcess(name: executable, arguments: arguments, logFile: directory.url.appendingPathComponent("\(executable).log"))
        try process.start()
        let status = await process.waitForExit(timeout: .seconds(20))
        if status == nil { await process.kill() }
        return (status, process.output)
    }

    @Test("a config file whose service section is not a JSON object stops the process with a sentence naming the file and the key", arguments: [
        "null", "\"x\"", "1", "[]",
    ])
    func serviceSectionNotAnObject(value: String) async throws {
        let directory = try TemporaryDirectory(prefix: "cfg")
        defer { directory.remove() }
        let config = try writeConfig(#"{"service": \#(value)}"#, in: directory)
        let (status, output) = try await exitOf("storebus-testkit-journal", [
            "--config", config, "--rpc-endpoint", directory.ipcEndpoint("rpc"), "--event-endpoint", directory.ipcEndpoint("ev"),
            "--data-dir", directory.path("data"),
        ], in: directory)
        // 1 is the exit status of a thrown error; a trap would end the process with a signal instead.
        #expect(status == 1, "\(output)")
        #expect(output.contains(config) && output.contains("\"service\" must be a JSON object"), "\(output)")
        #expect(!output.contains("Fatal error"), "\(output)")
    }

    @Test("a service setting of the wrong type names the file and the key, not a decoding dump")
    func serviceSettingOfTheWrongType() async throws {
        let directory = try TemporaryDirectory(prefix: "cfg")
        defer { directory.remove() }
        let config = try writeConfig(#"{"service": {"catalogFile": 3}}"#, in: directory)
        let (status, output) = try await exitOf("storebus-catalog", ["--config", config, "--rpc-endpoint", directory.ipcEndpoint("rpc")], in: directory)
        #expect(status == 1, "\(output)")
        #expect(output.contains(config) && output.contains("service.catalogFile"), "\(output)")
        #expect(!output.contains("typeMismatch"), "\(output)")
    }
}
