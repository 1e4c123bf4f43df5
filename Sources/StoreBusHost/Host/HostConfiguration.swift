import Foundation
import Logging
import StoreBus
import ZeroMQ

/// What every StoreBus process needs to know, whatever its service: where to listen, where to keep
/// its data, how much to log. Executables build it from defaults, a config file, the environment and
/// flags (see ``HostSettings``); libraries never read the environment themselves.
public struct HostConfiguration: Sendable, Equatable {
    /// Endpoints of the RPC server (ROUTER).
    public var rpcEndpoints: [String]
    /// Endpoints of the event doorbell (PUB); empty for processes with no event log.
    public var eventEndpoints: [String]
    /// The process's data directory; nil for stateless processes.
    public var dataDirectory: String?
    /// Log level: trace, debug, info, notice, warning, error or critical.
    public var logLevel: Logger.Level
    /// How log lines are written: text (swift-log's standard lines) or json (one object a line).
    public var logFormat: LogFormat = .text
    /// `host:port` where the process serves its Prometheus metrics (`GET /metrics`); nil: none.
    public var metricsAddress: String?
    /// Fail points for crash tests (see ``FailPoints``); empty in normal runs.
    public var failPoints: String
    /// Whether the process takes StoreBus's hand-written shortcuts (``FastPaths``); false runs the
    /// plain implementations everywhere. Default true; `STOREBUS_FAST_PATHS=off` sets it false.
    public var fastPaths = true
    /// CURVE keys for the process's TCP links; nil: none (see ``plainTCP``).
    public var curve: CurveConfiguration?
    /// Whether plain TCP may be used off loopback without keys: true only when said explicitly
    /// (`"plainTCP": true`, `--plain-tcp`, `STOREBUS_PLAIN_TCP=1`). Without keys and without it, a
    /// process binds and connects TCP on loopback addresses only.
    public var plainTCP = false
    /// The `service` section of the config file, for the service's own settings (JSON object).
    public var serviceSection: Data?
    /// The path of the config file, when there is one.
    public var configFile: String?
    /// The directory of the config file, when there is one: relative paths in it resolve from there.
    public var configDirectory: URL?
    /// Whether SIGINT and SIGTERM stop the service gracefully, and it prints its ready line: true in
    /// its own executable; false for a service run inside another program (a test), which stops it
    /// through its ServiceGroup's graceful shutdown.
    public var handlesSignals = true

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
    /// How the process's ZeroMQ context secures TCP: CURVE with ``curve``'s keys; plain TCP
    /// when ``plainTCP`` says so; else plain TCP on loopback only.
    public func tcpSecurity() throws -> (security: TCPSecurity, allowedKeys: [String]) {
        if let curve {
            let (links, allowed) = try curve.load()
            return (.curve(links), allowed)
        }
        return (plainTCP ? .plain : .plainOnLoopback, [])
    }

    public func serviceSettings<Settings: Decodable>(_ type: Settings.Type) throws -> Settings? {
        guard let serviceSection else { return nil }
        do {
            let decoder = JSONDecoder()
            // Relative paths in the file resolve from its directory (see `Decoder.configPath(_:)`).
            if let configDirectory { decoder.userInfo[.storeBusConfigDirectory] = configDirectory }
            return try decoder.decode(Settings.self, from: serviceSection)
        } catch let error as StartupError {
            throw StartupError("the config file \(configFile ?? "") is not valid: \(error.description)")
        } catch {
            throw StartupError("the config file \(configFile ?? "") is not valid: \(HostSettings.describe(error, under: "service"))")
        }
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
    var curve: CurveConfiguration?
    var plainTCP: Bool?
    var logFormat: String?
    var metricsAddress: String?
}

/// How a process writes its log lines.
public enum LogFormat: String, Sendable, CaseIterable {
    /// swift-log's standard lines on standard error.
    case text
    /// One JSON object a line on standard error, for log shippers.
    case json
}

extension CodingUserInfoKey {
    /// The directory of the config file being decoded (see ``HostConfiguration/serviceSettings(_:)``).
    static let storeBusConfigDirectory = CodingUserInfoKey(rawValue: "storebus.configDirectory")!
}

extension Decoder {
    /// A path read from the config file made absolute against the file's directory; as it is when
    /// absolute or when no file is being read.
    public func configPath(_ path: String) -> String {
        guard !path.hasPrefix("/"), let directory = userInfo[.storeBusConfigDirectory] as? URL else { return path }
        return directory.appendingPathComponent(path).standardizedFileURL.path
    }
}

extension KeyedDecodingContainer {
    /// The value at `key`, or `fallback` when the key is left out: a configuration's defaults stay
    /// in the configuration type, and a config file names only what it changes.
    public func value<Value: Decodable>(_ key: Key, default fallback: Value) throws -> Value {
        try decodeIfPresent(Value.self, forKey: key) ?? fallback
    }
}
