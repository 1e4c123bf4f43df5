import Foundation
import StoreBus
import StoreBusCommandLine
import StoreBusHost
import StoreBusTesting
import Testing

@Suite("Host options: flags, environment and config file")
struct HostOptionsTests {
    let defaults = HostConfiguration(rpcEndpoints: ["tcp://127.0.0.1:7390"])

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

    @Test(
        "a config file whose service section is not a JSON object stops the process with a sentence naming the file and the key",
        arguments: [
            "null", "\"x\"", "1", "[]"
        ])
    func serviceSectionNotAnObject(value: String) async throws {
        let directory = try TemporaryDirectory(prefix: "cfg")
        defer { directory.remove() }
        let config = try writeConfig(#"{"service": \#(value)}"#, in: directory)
        let (status, output) = try await exitOf(
            "storebus-testkit-journal",
            [
                "--config", config, "--rpc-endpoint", directory.ipcEndpoint("rpc"), "--event-endpoint", directory.ipcEndpoint("ev"),
                "--data-dir", directory.path("data")
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

    @Test("an empty endpoint list in the config file stops the process with a sentence naming the key")
    func emptyEndpointListInConfigFile() async throws {
        let directory = try TemporaryDirectory(prefix: "cfg")
        defer { directory.remove() }
        let config = try writeConfig(#"{"service": {"catalogEndpoints": []}}"#, in: directory)
        let (status, output) = try await exitOf("storebus-gateway", ["--config", config, "--rpc-endpoint", directory.ipcEndpoint("rpc")], in: directory)
        #expect(status == 1, "\(output)")
        #expect(output.contains("service.catalogEndpoints") && output.contains("empty"), "\(output)")
        #expect(!output.contains("Precondition failed"), "\(output)")
    }

    @Test("a list given as flags wins over the environment variable's; with neither, the configuration's value stands (nil)")
    func listPrecedence() {
        let variable = "STOREBUS_CATALOG_ENDPOINTS"
        #expect(HostSettings.list(flags: [], environment: variable, environment: [:]) == nil)
        #expect(HostSettings.list(flags: [], environment: variable, environment: [variable: "ipc:///tmp/e, ipc:///tmp/f"]) == ["ipc:///tmp/e", "ipc:///tmp/f"])
        #expect(HostSettings.list(flags: [], environment: variable, environment: [variable: " , "]) == nil)
        #expect(HostSettings.list(flags: ["ipc:///tmp/g"], environment: variable, environment: [variable: "ipc:///tmp/e"]) == ["ipc:///tmp/g"])
    }

    @Test("an empty endpoint list in the config file is an error only when no flag replaces it")
    func emptyListReplacedByAFlag() async throws {
        let directory = try TemporaryDirectory(prefix: "cfg")
        defer { directory.remove() }
        let config = try writeConfig(#"{"service": {"catalogEndpoints": []}}"#, in: directory)
        // The catalog endpoint given as a flag: the gateway starts (and is stopped once ready)
        let gateway = ServiceProcess(
            name: "storebus-gateway",
            arguments: ["--config", config, "--rpc-endpoint", directory.ipcEndpoint("rpc"), "--catalog-endpoint", directory.ipcEndpoint("catalog")],
            logFile: directory.url.appendingPathComponent("gateway.log")
        )
        try gateway.start()
        #expect(await waitUntil(timeout: .seconds(20)) { gateway.output.contains("storebus-gateway ready") }, "\(gateway.output)")
        #expect(await gateway.stop() == 0, "\(gateway.output)")
    }

    @Test("the log level comes from the highest-priority source that sets it; only the value used must be valid")
    func logLevelPrecedence() throws {
        let directory = try TemporaryDirectory(prefix: "cfg")
        defer { directory.remove() }
        // A valid flag wins over an invalid environment variable
        let flag = try HostOptions.parse(["--log-level", "debug"])
        #expect(try flag.resolve(defaults: defaults, environment: ["STOREBUS_LOG_LEVEL": "bogus"]).logLevel == .debug)
        // A valid environment variable wins over an invalid config file value
        let config = try writeConfig(#"{"logLevel": "loud"}"#, in: directory)
        let none = try HostOptions.parse([])
        #expect(try none.resolve(defaults: defaults, environment: ["STOREBUS_CONFIG": config, "STOREBUS_LOG_LEVEL": "warning"]).logLevel == .warning)
        // The value used is still checked, and the error names where it came from
        let used = #expect(throws: StartupError.self) {
            _ = try HostOptions.parse(["--log-level", "loud"]).resolve(defaults: defaults, environment: ["STOREBUS_LOG_LEVEL": "debug"])
        }
        #expect(used?.description.contains("--log-level") == true)
        let fromFile = #expect(throws: StartupError.self) {
            _ = try none.resolve(defaults: defaults, environment: ["STOREBUS_CONFIG": config])
        }
        #expect(fromFile?.description.contains(config) == true)
    }
}
