import Foundation
import StoreBus
import StoreBusHost

/// The console's own settings: the config file's `service` section for `storebus-console`. Every
/// setting has its default here; a config file names only what it changes.
public struct ConsoleConfiguration: Sendable, Equatable, Decodable {
    /// RPC endpoints of storebus-gateway, through which every page reads and every action acts (as
    /// an admin session, with the key the person logged in with). Default `tcp://127.0.0.1:7300`.
    /// The gateway's CURVE public key is the host's `curve.serverKeys` entry for the endpoint.
    public var gatewayEndpoints = [ServiceRegistry.gateway.rpcEndpoint]
    /// Where the pages are served over HTTP, `host:port`. Default `127.0.0.1:7390`: this host only;
    /// put a TLS proxy in front of it to reach it from elsewhere (and set `secureCookies`).
    public var httpAddress = "127.0.0.1:7390"
    /// How long a login lasts without use, in seconds (60 to 604800). Default 28800 (8 hours).
    public var sessionIdleSeconds = 28_800
    /// Logins kept at once (the oldest goes first). Default 256.
    public var maxSessions = 256
    /// Marks the session cookie `Secure` (sent over HTTPS only): for a console behind a TLS proxy.
    /// Default false (the default address is loopback, plain HTTP).
    public var secureCookies = false
    /// How long one call through the gateway may take, in milliseconds (100 to 60000). Default 10000.
    public var callTimeoutMilliseconds = 10_000
    /// How often a live page's stream asks the payment queue's log for new events when it found
    /// none, in milliseconds (50 to 10000). Default 400.
    public var activityPollMilliseconds = 400
    /// How long one live stream lasts, in seconds (1 to 3600): then it ends, and the browser opens
    /// the next where it stopped (its last event's id), checking the login again. Default 300.
    public var streamSeconds = 300

    /// The host settings of a console started without a config file.
    public static let defaultHost = ServiceRegistry.console.defaultHost

    /// The defaults.
    public init() {}

    enum CodingKeys: String, CodingKey {
        case gatewayEndpoints, httpAddress, sessionIdleSeconds, maxSessions, secureCookies, callTimeoutMilliseconds, activityPollMilliseconds, streamSeconds
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = Self()
        gatewayEndpoints = try container.value(.gatewayEndpoints, default: defaults.gatewayEndpoints)
        httpAddress = try container.value(.httpAddress, default: defaults.httpAddress)
        sessionIdleSeconds = try container.value(.sessionIdleSeconds, default: defaults.sessionIdleSeconds)
        maxSessions = try container.value(.maxSessions, default: defaults.maxSessions)
        secureCookies = try container.value(.secureCookies, default: defaults.secureCookies)
        callTimeoutMilliseconds = try container.value(.callTimeoutMilliseconds, default: defaults.callTimeoutMilliseconds)
        activityPollMilliseconds = try container.value(.activityPollMilliseconds, default: defaults.activityPollMilliseconds)
        streamSeconds = try container.value(.streamSeconds, default: defaults.streamSeconds)
    }

    /// Throws a ``StartupError`` naming the first setting that cannot work.
    public func validate() throws {
        guard !gatewayEndpoints.isEmpty else {
            throw StartupError("service.gatewayEndpoints is an empty list: name at least one endpoint, or leave the key out for the default")
        }
        _ = try HTTPAddress(httpAddress, setting: "service.httpAddress")
        guard (60...604_800).contains(sessionIdleSeconds) else { throw StartupError("service.sessionIdleSeconds must be from 60 to 604800") }
        guard (1...100_000).contains(maxSessions) else { throw StartupError("service.maxSessions must be from 1 to 100000") }
        guard (100...60_000).contains(callTimeoutMilliseconds) else { throw StartupError("service.callTimeoutMilliseconds must be from 100 to 60000") }
        guard (50...10_000).contains(activityPollMilliseconds) else { throw StartupError("service.activityPollMilliseconds must be from 50 to 10000") }
        guard (1...3_600).contains(streamSeconds) else { throw StartupError("service.streamSeconds must be from 1 to 3600") }
    }
}
