import Foundation
import Logging

/// What every StoreBus process needs to know, whatever its service: where to listen, where to keep
/// its data, how much to log. Executables build it from defaults, a config file, the environment and
/// flags (see ``HostOptions``); libraries never read the environment themselves.
public struct HostConfiguration: Sendable, Equatable {
    /// Endpoints of the RPC server (ROUTER).
    public var rpcEndpoints: [String]
    /// Endpoints of the event doorbell (PUB); empty for processes with no event log.
    public var eventEndpoints: [String]
    /// The process's data directory; nil for stateless processes.
    public var dataDirectory: String?
    /// Log level: trace, debug, info, notice, warning, error or critical.
    public var logLevel: Logger.Level
    /// Fail points for crash tests (see ``FailPoints``); empty in normal runs.
    public var failPoints: String
    /// The `service` section of the config file, for the service's own settings (JSON object).
    public var serviceSection: Data?
    /// The path of the config file, when there is one.
    public var configFile: String?
    /// The directory of the config file, when there is one: relative paths in it resolve from there.
    public var configDirectory: URL?

    /// A configuration with the given defaults.
    public init(
        rpcEndpoints: [String],
        eventEndpoints: [String] = [],
        dataDirectory: String? = nil,
        logLevel: Logger.Level = .info,
        failPoints: String = "",
        serviceSection: Data? = nil
    ) {
        self.rpcEndpoints = rpcEndpoints
        self.eventEndpoints = eventEndpoints
        self.dataDirectory = dataDirectory
        self.logLevel = logLevel
        self.failPoints = failPoints
        self.serviceSection = serviceSection
    }

    /// The config file's `service` section decoded as `Settings`; nil when there is none. A setting of
    /// the wrong type is a ``StartupError`` naming the file and the key (`service.catalogFile`).
    public func serviceSettings<Settings: Decodable>(_ type: Settings.Type) throws -> Settings? {
        guard let serviceSection else { return nil }
        do {
            return try JSONDecoder().decode(Settings.self, from: serviceSection)
        } catch {
            throw StartupError("the config file \(configFile ?? "") is not valid: \(HostOptions.describe(error, under: "service"))")
        }
    }

    /// A path from the config file's `service` section, made absolute against the config file's
    /// directory (paths given as flags or environment are used as they are).
    public func resolvingConfigPath(_ path: String) -> String {
        guard !path.hasPrefix("/"), let configDirectory else { return path }
        return configDirectory.appendingPathComponent(path).standardizedFileURL.path
    }
}

/// The config file's shape: every key optional.
///
/// ```json
/// {
///   "rpcEndpoints": ["tcp://127.0.0.1:7301"],
///   "eventEndpoints": ["tcp://127.0.0.1:7311"],
///   "dataDirectory": "data/payment-queue",
///   "logLevel": "info",
///   "service": { "...": "settings of the service itself" }
/// }
/// ```
struct ConfigFile: Decodable {
    var rpcEndpoints: [String]?
    var eventEndpoints: [String]?
    var dataDirectory: String?
    var logLevel: String?
}
