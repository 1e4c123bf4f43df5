import Foundation
import Logging
import ServiceLifecycle
import StoreBus
import StoreBusServer
import StoreSchema
import Synchronization
import ZeroMQ

/// Runs a StoreBus process: the RPC server with the built-in Health and Diagnostics services, an
/// optional doorbell publisher, the process's own background services, and a graceful shutdown on
/// SIGINT or SIGTERM (running requests finish, sockets close, the database closes, the ZeroMQ
/// context terminates).
///
/// Executables stay thin: parse options, build the service's router and state with the host's
/// context, and call ``serve(router:services:background:onShutdown:)``.
public final class ServiceHost: Sendable {
    /// The executable's name, such as `storebus-catalog`.
    public let process: String
    /// The resolved configuration.
    public let configuration: HostConfiguration
    /// The process's logger.
    public let logger: Logger
    /// The process's one ZeroMQ context.
    public let context: ZeroMQ.Context
    /// Fail points for crash tests.
    public let failPoints: FailPoints
    /// Counters of the RPC server.
    public let statistics = ServerStatistics()
    /// The loop thread of the RPC server, where its handlers run. The process's RPC clients and
    /// doorbell sockets can be put on it too (`RPCClient(configuration:reactor:)`,
    /// ``makePublisher()``, `DoorbellBoard(..., reactor:)`): a handler that calls another service, or
    /// a commit that rings a doorbell, then reaches the socket without waking another thread. The
    /// server starts it in ``serve(router:services:background:publisher:diagnostics:maxInFlight:upstreams:onShutdown:)``
    /// and stops it at shutdown, closing every socket on it.
    public let reactor: Reactor
    /// The ZAP handler admitting allowed CURVE keys, when the process has keys.
    let authenticator: CurveAuthenticator?
    /// The process's HTTP listeners, bound before its ready line is printed.
    public let listeners = Listeners()

    /// Creates the host: checks fail points, makes the ZeroMQ context.
    public init(process: String, configuration: HostConfiguration) throws {
        self.process = process
        self.configuration = configuration
        var logger = Logger(label: process)
        logger.logLevel = configuration.logLevel
        self.logger = logger
        failPoints = try FailPoints(specification: configuration.failPoints)
        // Set before the process's first socket, database or message (one switch for the process:
        // services run together in one process share it).
        FastPaths.enabled = configuration.fastPaths
        let (security, allowedKeys) = try configuration.tcpSecurity()
        context = try ZeroMQ.Context(tcpSecurity: security)
        if case .curve(let links) = security {
            do {
                let refusals = RefusalLog(logger: logger)
                authenticator = try CurveAuthenticator(
                    context: context, allowedPublicKeys: allowedKeys, openDomains: [CurveLinks.clientDomain],
                    onRefusal: { refusals.refused(address: $0, reason: $1) }
                )
            } catch {
                throw StartupError("cannot start the CURVE authenticator: \(error)")
            }
            logger.info(
                "TCP links use CURVE",
                metadata: [
                    "public.key": "\(links.keyPair.publicKey)", "allowed.keys": "\(allowedKeys.count)",
                    "open.endpoints": "\(links.openEndpoints.sorted().joined(separator: ","))",
                    "plain.endpoints": "\(links.plainEndpoints.sorted().joined(separator: ","))"
                ])
        } else {
            authenticator = nil
        }
        reactor = Reactor(name: "sb-rpc-server", context: context)
    }

    /// Sets up swift-log once per process: lines on standard error at `level`, as text or JSON.
    public static func bootstrapLogging(level: Logger.Level, format: LogFormat = .text) {
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            case .json:
                var handler = JSONLogHandler(label: label)
                handler.logLevel = level
                return handler
            }
        }
    }

    /// What an executable sets up once, before it makes its host: logging as `configuration` says,
    /// swift-metrics into the Prometheus registry when it serves metrics, and with fast paths
    /// malloc's thresholds (``MallocTuning``).
    public static func bootstrap(_ configuration: HostConfiguration) {
        if configuration.fastPaths { MallocTuning.apply() }
        bootstrapLogging(level: configuration.logLevel, format: configuration.logFormat)
        if configuration.metricsAddress != nil { MetricsEndpoint.bootstrap() }
    }

    /// The data directory, created if missing; throws ``StartupError`` when it is not configured or
    /// cannot be written.
    public func dataDirectory() throws -> URL {
        guard let path = configuration.dataDirectory, !path.isEmpty else {
            throw StartupError("\(process) needs a data directory (--data-dir or STOREBUS_DATA_DIR)")
        }
        let url = URL(fileURLWithPath: path, isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            let probe = url.appendingPathComponent(".write-probe-\(getpid())")
            try Data("ok".utf8).write(to: probe)
            try FileManager.default.removeItem(at: probe)
        } catch {
            throw StartupError("the data directory \(path) cannot be written: \(error.localizedDescription)")
        }
        return url
    }

    /// The doorbell publisher on the configured event endpoints (nil when there are none).
    public func makePublisher() throws -> DoorbellPublisher? {
        guard !configuration.eventEndpoints.isEmpty else { return nil }
        return try DoorbellPublisher(endpoints: configuration.eventEndpoints, context: context, reactor: reactor)
    }

    /// Serves until SIGINT or SIGTERM, then returns. The line `<process> ready rpc=... events=...`
    /// goes to standard output once the services run and those signals are handled; a process that
    /// handles another signal (the catalog's SIGHUP) traps it before calling this, so that the
    /// signal cannot meet its default action after the line. When a service fails (throws, or ends before a
    /// shutdown was asked for), the others are stopped and cleaned up the same way, then this throws
    /// ``ServiceFailure`` so that the executable exits with a non-zero status.
    ///
    /// - Parameters:
    ///   - router: the process's own methods; Health and Diagnostics are added.
    ///   - services: fully qualified names of the services the router answers (Health/Check lists them).
    ///   - background: other long-running pieces (followers, workers), run and shut down with the server.
    ///   - publisher: the doorbell publisher to close after the server.
    ///   - onShutdown: last step before the ZeroMQ context ends, such as closing the database.
    ///   - diagnostics: whether to answer Diagnostics (Echo, GetServerStats); a process facing clients
    ///     leaves it out.
    ///   - maxInFlight: most requests handled at once (see ``ServerConfiguration/maxInFlight``).
    ///   - upstreams: the services the process forwards calls to, asked in turn by its Health/Check.
    public func serve(
        router: RPCRouter,
        services: [String],
        background: [any Service] = [],
        publisher: DoorbellPublisher? = nil,
        diagnostics: Bool = true,
        maxInFlight: Int? = nil,
        upstreams: [HealthUpstream] = [],
        onShutdown: @Sendable () async -> Void = {}
    ) async throws {
        var full = BuiltinServices.router(process: process, services: services, statistics: statistics, diagnostics: diagnostics, upstreams: upstreams)
        full.merge(router)
        var serverConfiguration = ServerConfiguration(endpoints: configuration.rpcEndpoints)
        if let maxInFlight { serverConfiguration.maxInFlight = maxInFlight }
        let server = try RPCServer(
            configuration: serverConfiguration,
            router: full, context: context, reactor: reactor, statistics: statistics, logger: logger
        )
        logger.info(
            "Serving",
            metadata: [
                "rpc.endpoints": "\(server.boundEndpoints.joined(separator: ","))",
                "event.endpoints": "\(publisher?.boundEndpoints.joined(separator: ",") ?? "")",
                "data.directory": "\(configuration.dataDirectory ?? "")"
            ])
        // A line tests and launchers can wait for, with the resolved endpoints.
        let ready = "\(process) ready rpc=\(server.boundEndpoints.joined(separator: ",")) events=\(publisher?.boundEndpoints.joined(separator: ",") ?? "")"
        let signals = configuration.handlesSignals
        var background = background
        if let address = configuration.metricsAddress {
            background.append(
                MetricsEndpoint.server(address: try HTTPAddress(address, setting: "the metrics address"), process: process, logger: logger, bound: listeners.expect()))
        }
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: server)] + background.map { .init(service: $0) }
                    + (signals ? [.init(service: ReadyLine(text: ready, listeners: listeners), successTerminationBehavior: .ignore)] : []),
                gracefulShutdownSignals: signals ? [.sigterm, .sigint] : [],
                logger: logger
            ))
        var failure: (any Error)?
        do {
            // Run as a service of another group (a test's), the process's group stops with that one.
            try await withGracefulShutdownHandler {
                try await group.run()
            } onGracefulShutdown: {
                Task { await group.triggerGracefulShutdown() }
            }
        } catch {
            logger.error("Stopped with an error", metadata: ["error": "\(error)"])
            failure = error
        }
        await server.shutdown()
        await publisher?.shutdown()
        await onShutdown()
        context.shutdown()
        authenticator?.stop()
        context.terminate()
        // Rethrown after the clean-up: a supervisor must see that the process did not end by choice.
        if let failure { throw ServiceFailure(process: process, cause: failure) }
        logger.info("Stopped")
    }
}

/// Prints the ready line from inside the service group. ServiceGroup.run installs its SIGTERM and
/// SIGINT handling before it starts any service, so once the line is out those signals always mean
/// a graceful shutdown; printed before run(), a launcher's SIGTERM could still meet the default
/// action and kill the process. It waits for the process's HTTP listeners to bind (``Listeners``),
/// and is not printed when the group stops first.
struct ReadyLine: Service {
    let text: String
    let listeners: Listeners

    func run() async {
        await listeners.allBound()
        guard !Task.isCancelled else { return }
        print(text)
        fflush(nil)
    }
}

/// A process stopped because one of its services failed: it threw, or it ended while the process
/// was still meant to serve. Thrown by ``ServiceHost/serve(router:services:background:publisher:diagnostics:maxInFlight:upstreams:onShutdown:)``
/// after the clean-up, so that the executable exits with a non-zero status.
public struct ServiceFailure: Error, CustomStringConvertible, Sendable {
    /// The executable's name.
    public let process: String
    /// What the service group reported: the service's error, or that a service finished unexpectedly.
    public let cause: any Error

    /// Creates the error.
    public init(process: String, cause: any Error) {
        self.process = process
        self.cause = cause
    }

    public var description: String {
        "\(process) stopped because a service failed: \(cause)"
    }
}

/// Says on the log that a handshake was refused: the first of each second in full, the others of
/// that second counted, so that a client retrying without end cannot flood the log.
final class RefusalLog: Sendable {
    private let logger: Logger
    private let state = Mutex<(windowStart: ContinuousClock.Instant, suppressed: Int)>((.now - .seconds(2), 0))

    init(logger: Logger) {
        self.logger = logger
    }

    func refused(address: String, reason: String) {
        let now = ContinuousClock.now
        let suppressed: Int? = state.withLock { state in
            guard now - state.windowStart >= .seconds(1) else {
                state.suppressed += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.suppressed
        }
        guard let suppressed else { return }
        logger.warning(
            "Refused a connection at the CURVE handshake",
            metadata: [
                "peer.address": "\(address)", "reason": "\(reason)", "refused.since.last": "\(suppressed)"
            ])
    }
}
