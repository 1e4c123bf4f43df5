import Foundation
import Logging
import StoreBus
import StoreBusSDK
import Synchronization

/// The console's way to the store: the gateway, one RPC client shared by every login, and for each
/// login the sessions it opened there with its admin key. Most calls are made in one session per
/// login; a device's calls (its downloads, subscriptions, receipt) in a session naming that
/// device's queue, as the contract's access rules want. The gateway checks the key and the access
/// rules of every call: the console grants nothing of its own.
final class GatewayLink: Sendable {
    /// The queue an admin session names when it acts on none.
    static let consoleQueue = "storebus-console"

    /// The RPC client under every session; the sessions' connections never shut it down.
    struct SharedTransport: StoreTransport {
        let client: RPCClient
        func callRaw(path: String, idempotent: Bool, body: [UInt8], options: CallOptions) async throws(RPCError) -> RawResponse {
            try await client.callRaw(path: path, idempotent: idempotent, body: body, options: options)
        }
        func shutdown() async {}
    }

    private struct Key: Hashable {
        var adminKey: String
        var app: String
        var account: String
        var device: String
    }

    let client: RPCClient
    private let endpoints: [String]
    private let timeout: Duration
    private let logger: Logger
    private let connections = Mutex<[Key: StoreConnection]>([:])
    /// Sessions kept at once, across logins; beyond it they are opened again as needed.
    private static let maxConnections = 1024

    init(client: RPCClient, endpoints: [String], timeout: Duration, logger: Logger) {
        self.client = client
        self.endpoints = endpoints
        self.timeout = timeout
        self.logger = logger
    }

    /// The connection of `adminKey`'s session naming the queue given (the console's own by default).
    func connection(
        _ adminKey: String, app: String = consoleQueue, account: String = consoleQueue, device: String = consoleQueue
    ) -> StoreConnection {
        let key = Key(adminKey: adminKey, app: app, account: account, device: device)
        return connections.withLock { connections in
            if let known = connections[key] { return known }
            if connections.count >= Self.maxConnections { connections.removeAll() }
            let connection = makeConnection(key)
            connections[key] = connection
            return connection
        }
    }

    /// A new connection over the shared client, for the session `key` names.
    private func makeConnection(_ key: Key) -> StoreConnection {
        var configuration = StoreConfiguration(gatewayEndpoints: endpoints, apiKey: key.adminKey, appBundleID: key.app, accountID: key.account, deviceID: key.device)
        configuration.callTimeout = timeout
        return StoreConnection(configuration: configuration, transport: SharedTransport(client: client), logger: logger)
    }

    /// Whether the gateway takes `adminKey` as an admin key: false for a key it refuses or one that
    /// is not an admin's; other failures (no gateway) are thrown.
    func isAdminKey(_ adminKey: String) async throws -> Bool {
        // A session of its own, not kept: a wrong key must not stay among the logins' sessions.
        let connection = makeConnection(Key(adminKey: adminKey, app: Self.consoleQueue, account: Self.consoleQueue, device: Self.consoleQueue))
        do {
            return try await connection.authenticate().isAdmin
        } catch let error as StoreError where error.status == .unauthenticated || error.status == .permissionDenied || error.status == .invalidArgument {
            return false
        }
    }

    /// Forgets the sessions of `adminKey` (its login ended).
    func forget(_ adminKey: String) {
        connections.withLock { connections in
            connections = connections.filter { $0.key.adminKey != adminKey }
        }
    }
}
