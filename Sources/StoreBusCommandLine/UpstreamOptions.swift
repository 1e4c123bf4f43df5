import ArgumentParser
import Foundation
import StoreBus
import StoreBusHost

/// A row of the service registry, as a type, so that an option group can be written once for
/// every service another calls (``UpstreamEndpoints``, ``UpstreamEvents``).
public protocol RegisteredService: Sendable {
    /// The service's row.
    static var entry: ServiceEntry { get }
}

/// The services other processes call, as types for the option groups.
public enum Upstream {
    public enum Catalog: RegisteredService { public static var entry: ServiceEntry { ServiceRegistry.catalog } }
    public enum PaymentQueue: RegisteredService { public static var entry: ServiceEntry { ServiceRegistry.paymentQueue } }
    public enum Receipt: RegisteredService { public static var entry: ServiceEntry { ServiceRegistry.receipt } }
    public enum Download: RegisteredService { public static var entry: ServiceEntry { ServiceRegistry.download } }
    public enum Notifications: RegisteredService { public static var entry: ServiceEntry { ServiceRegistry.notifications } }
    public enum Gateway: RegisteredService { public static var entry: ServiceEntry { ServiceRegistry.gateway } }
}

/// The RPC endpoints of a service this process calls, named from its registry row:
/// `--<name>-endpoint E` (repeatable), else `STOREBUS_<NAME>_ENDPOINTS` (comma-separated), else the
/// config file's `service.<name>Endpoints`, else the default.
public struct UpstreamEndpoints<Service: RegisteredService>: ParsableArguments, Sendable {
    @Option(
        name: .customLong(Service.entry.name + "-endpoint"),
        help: ArgumentHelp("RPC endpoint of \(Service.entry.process) (repeatable). Also \(Self.environmentVariable) or service.\(Service.entry.endpointsKey).")
    )
    var values: [String] = []

    public init() {}

    /// The environment variable: `STOREBUS_PAYMENT_QUEUE_ENDPOINTS`.
    public static var environmentVariable: String { "STOREBUS_\(Service.entry.environmentName)_ENDPOINTS" }

    /// The endpoints the flags or the environment give, nil when neither does.
    public var endpoints: [String]? {
        HostSettings.list(flags: values, environment: Self.environmentVariable)
    }
}

/// The doorbell endpoints of a service whose event log this process follows:
/// `--<name>-events E` (repeatable), else `STOREBUS_<NAME>_EVENTS`, else the config file's
/// `service.<name>EventEndpoints`, else the default.
public struct UpstreamEvents<Service: RegisteredService>: ParsableArguments, Sendable {
    @Option(
        name: .customLong(Service.entry.name + "-events"),
        help: ArgumentHelp("Doorbell endpoint of \(Service.entry.process) (repeatable). Also \(Self.environmentVariable) or service.\(Service.entry.eventEndpointsKey).")
    )
    var values: [String] = []

    public init() {}

    /// The environment variable: `STOREBUS_PAYMENT_QUEUE_EVENTS`.
    public static var environmentVariable: String { "STOREBUS_\(Service.entry.environmentName)_EVENTS" }

    /// The endpoints the flags or the environment give, nil when neither does.
    public var endpoints: [String]? {
        HostSettings.list(flags: values, environment: Self.environmentVariable)
    }
}
