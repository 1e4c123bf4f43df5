import ArgumentParser
import Foundation
import StoreBusHost

/// The command-line options every StoreBus executable accepts (`@OptionGroup var host: HostOptions`):
/// the flags of ``StoreBusHost/HostSettings``, which resolves them with the environment, the config
/// file and the executable's defaults.
public struct HostOptions: ParsableArguments, Sendable {
    @Option(name: .customLong("config"), help: "JSON config file (keys: rpcEndpoints, eventEndpoints, dataDirectory, logLevel, service).")
    public var configFile: String?

    @Option(name: .customLong("rpc-endpoint"), help: "Endpoint to serve RPC on (repeatable), e.g. tcp://127.0.0.1:7301.")
    public var rpcEndpoints: [String] = []

    @Option(name: .customLong("event-endpoint"), help: "Endpoint to publish event doorbells on (repeatable).")
    public var eventEndpoints: [String] = []

    @Option(name: .customLong("data-dir"), help: "Directory for the process's database and files.")
    public var dataDirectory: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    public var logLevel: String?

    @Option(name: .customLong("log-format"), help: "text (default) or json: one JSON object a line, for log shippers.")
    public var logFormat: String?

    @Option(name: .customLong("metrics-address"), help: "host:port to serve Prometheus metrics on (GET /metrics), e.g. 127.0.0.1:9301.")
    public var metricsAddress: String?

    @Option(name: .customLong("curve-key"), help: "The process's CURVE key pair file, in place of the config file's curve.keyFile (systemd hands it over as a credential).")
    public var curveKey: String?

    @Flag(name: .customLong("plain-tcp"), help: "Allow plain TCP off loopback, without CURVE keys (only where the network is trusted).")
    public var plainTCP = false

    @Flag(
        name: .customLong("check-config"),
        help: "Check the settings (flags, environment, config file, keys, the service's own) and exit: 0 and a line saying so when the process could start with them.")
    public var checkConfig = false

    public init() {}

    /// The flags as settings.
    public var settings: HostSettings {
        var settings = HostSettings()
        settings.configFile = configFile
        settings.rpcEndpoints = rpcEndpoints
        settings.eventEndpoints = eventEndpoints
        settings.dataDirectory = dataDirectory
        settings.logLevel = logLevel
        settings.logFormat = logFormat
        settings.metricsAddress = metricsAddress
        settings.curveKey = curveKey
        settings.plainTCP = plainTCP
        return settings
    }

    /// Resolves the configuration from the flags, `environment`, the config file and `defaults`
    /// (``StoreBusHost/HostSettings/resolve(defaults:environment:)``).
    public func resolve(defaults: HostConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> HostConfiguration {
        try settings.resolve(defaults: defaults, environment: environment)
    }

    /// With `--check-config`: says that `process`'s settings are valid and returns true (the command
    /// then ends); false otherwise.
    public func checked(_ process: String, _ host: HostConfiguration) -> Bool {
        guard checkConfig else { return false }
        print("\(process): the configuration\(host.configFile.map { " in \($0)" } ?? "") is valid")
        return true
    }
}
