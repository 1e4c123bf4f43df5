import Foundation
import Logging
import StoreBus

/// The settings every StoreBus executable accepts on its command line (parsed by `HostOptions`, in
/// module StoreBusCommandLine), resolved with the environment, the config file and the executable's
/// defaults, in this order: flag, then environment variable, then config file, then default.
///
/// | flag | environment | config file key |
/// |---|---|---|
/// | `--config FILE` | `STOREBUS_CONFIG` | |
/// | `--rpc-endpoint E` (repeatable) | `STOREBUS_RPC_ENDPOINTS` (comma-separated) | `rpcEndpoints` |
/// | `--event-endpoint E` (repeatable) | `STOREBUS_EVENT_ENDPOINTS` | `eventEndpoints` |
/// | `--data-dir DIR` | `STOREBUS_DATA_DIR` | `dataDirectory` |
/// | `--log-level L` | `STOREBUS_LOG_LEVEL` | `logLevel` |
/// | `--log-format F` | `STOREBUS_LOG_FORMAT` | `logFormat` (`text` or `json`) |
/// | `--metrics-address H:P` | `STOREBUS_METRICS_ADDRESS` | `metricsAddress` |
/// | `--curve-key FILE` | `STOREBUS_CURVE_KEY` | `curve.keyFile` |
/// | `--plain-tcp` | `STOREBUS_PLAIN_TCP` (`1`) | `plainTCP` |
/// | | | `curve` (see ``CurveConfiguration``) |
/// | | `STOREBUS_FAILPOINTS` | |
/// | | `STOREBUS_FAST_PATHS` (`off`) | |
public struct HostSettings: Sendable {
    /// `--config`.
    public var configFile: String?
    /// `--rpc-endpoint`, repeated.
    public var rpcEndpoints: [String] = []
    /// `--event-endpoint`, repeated.
    public var eventEndpoints: [String] = []
    /// `--data-dir`.
    public var dataDirectory: String?
    /// `--log-level`.
    public var logLevel: String?
    /// `--log-format`.
    public var logFormat: String?
    /// `--metrics-address`.
    public var metricsAddress: String?
    /// `--curve-key`.
    public var curveKey: String?
    /// `--plain-tcp`.
    public var plainTCP = false

    /// Nothing given on the command line.
    public init() {}

    /// Resolves the configuration from flags, `environment`, the config file and `defaults`.
    public func resolve(defaults: HostConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> HostConfiguration {
        var configuration = defaults
        // The log level is checked only once the source that wins is known: an invalid value that a
        // higher-priority source overrides does no harm and must not stop the process.
        var level: (text: String, source: String)?
        var format: (text: String, source: String)?
        if let path = configFile ?? environment["STOREBUS_CONFIG"], !path.isEmpty {
            let data: Data
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                throw StartupError("cannot read the config file \(path): \(error.localizedDescription)")
            }
            let file: ConfigFile
            do {
                let decoder = JSONDecoder()
                decoder.userInfo[.storeBusConfigDirectory] = URL(fileURLWithPath: path).deletingLastPathComponent()
                file = try decoder.decode(ConfigFile.self, from: data)
            } catch {
                throw StartupError("the config file \(path) is not valid: \(Self.describe(error))")
            }
            if let value = file.rpcEndpoints { configuration.rpcEndpoints = value }
            if let value = file.eventEndpoints { configuration.eventEndpoints = value }
            if let value = file.dataDirectory {
                // Relative paths in a config file are relative to the file.
                configuration.dataDirectory = value.hasPrefix("/") ? value : URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(value).path
            }
            if let value = file.logLevel { level = (value, path) }
            if let value = file.curve { configuration.curve = value }
            if let value = file.logFormat { format = (value, path) }
            if let value = file.metricsAddress { configuration.metricsAddress = value.isEmpty ? nil : value }
            if let value = file.plainTCP { configuration.plainTCP = value }
            configuration.configFile = path
            configuration.configDirectory = URL(fileURLWithPath: path).deletingLastPathComponent()
            if let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let service = object["service"] {
                // Every service reads its settings from an object; and JSONSerialization traps, rather
                // than throws, when asked to write a bare value such as null.
                guard let settings = service as? [String: Any] else {
                    throw StartupError("the config file \(path) is not valid: \"service\" must be a JSON object holding the service's own settings")
                }
                configuration.serviceSection = try JSONSerialization.data(withJSONObject: settings)
            }
        }
        if let value = Self.list(environment["STOREBUS_RPC_ENDPOINTS"]) { configuration.rpcEndpoints = value }
        if let value = Self.list(environment["STOREBUS_EVENT_ENDPOINTS"]) { configuration.eventEndpoints = value }
        if let value = environment["STOREBUS_DATA_DIR"], !value.isEmpty { configuration.dataDirectory = value }
        if let value = environment["STOREBUS_LOG_LEVEL"], !value.isEmpty { level = (value, "STOREBUS_LOG_LEVEL") }
        if environment["STOREBUS_PLAIN_TCP"] == "1" { configuration.plainTCP = true }
        if let value = environment["STOREBUS_LOG_FORMAT"], !value.isEmpty { format = (value, "STOREBUS_LOG_FORMAT") }
        if let value = environment["STOREBUS_METRICS_ADDRESS"], !value.isEmpty { configuration.metricsAddress = value }
        if let value = environment["STOREBUS_FAILPOINTS"] { configuration.failPoints = value }
        configuration.fastPaths = FastPaths.enabled(environmentValue: environment["STOREBUS_FAST_PATHS"])
        if !rpcEndpoints.isEmpty { configuration.rpcEndpoints = rpcEndpoints }
        if !eventEndpoints.isEmpty { configuration.eventEndpoints = eventEndpoints }
        if let dataDirectory { configuration.dataDirectory = dataDirectory }
        if let logLevel { level = (logLevel, "--log-level") }
        if plainTCP { configuration.plainTCP = true }
        if let path = curveKey ?? environment["STOREBUS_CURVE_KEY"].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard configuration.curve != nil else {
                throw StartupError(
                    "a CURVE key file is given (\(curveKey != nil ? "--curve-key" : "STOREBUS_CURVE_KEY")) but the config file has no curve section naming the keys of the other services")
            }
            configuration.curve?.keyFile = path
        }
        if let level { configuration.logLevel = try Self.level(level.text, source: level.source) }
        if let logFormat { format = (logFormat, "--log-format") }
        if let format {
            guard let value = LogFormat(rawValue: format.text.lowercased()) else {
                throw StartupError("\(format.source): unknown log format \"\(format.text)\" (use text or json)")
            }
            configuration.logFormat = value
        }
        if let metricsAddress { configuration.metricsAddress = metricsAddress }
        if let address = configuration.metricsAddress { _ = try HTTPAddress(address, setting: "the metrics address") }
        guard !configuration.rpcEndpoints.isEmpty else { throw StartupError("no RPC endpoint configured") }
        return configuration
    }

    static func level(_ text: String, source: String) throws -> Logger.Level {
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw StartupError("\(source): unknown log level \"\(text)\" (use trace, debug, info, notice, warning, error or critical)")
        }
        return level
    }

    /// A decoding error as `path: reason`, the path starting with `prefix` when one is given.
    static func describe(_ error: any Error, under prefix: String? = nil) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.keyNotFound(_, let context), DecodingError.dataCorrupted(let context):
            let path = ((prefix.map { [$0] } ?? []) + context.codingPath.map(\.stringValue)).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
        default:
            return "\(error)"
        }
    }

    /// The items of a comma-separated list (an environment variable), trimmed, empty ones dropped;
    /// nil when the list is unset or has no items (an empty variable counts as unset).
    public static func list(_ value: String?) -> [String]? {
        guard let value else { return nil }
        let items = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return items.isEmpty ? nil : items
    }

    /// A list given as flags, else as the comma-separated environment variable `environment`; nil
    /// when neither gives one (the configuration's value then stands).
    public static func list(flags: [String], environment variable: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> [String]? {
        flags.isEmpty ? list(environment[variable]) : flags
    }

    /// An endpoint list for a process without a config file (storectl): the flags, then the
    /// environment variable, then the default.
    public static func endpoints(
        flags: [String], environmentVariable: String, default fallback: [String],
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> [String] {
        list(flags: flags, environment: environmentVariable, environment: environment) ?? fallback
    }
}
