import Foundation
import StoreBus
import StoreBusServer
import StoreBusTesting
import StoreSchema
import Synchronization
import ZeroMQ

/// A real `storebus-testkit-journal` process on ipc endpoints in a temporary directory. The endpoints
/// and data directory stay the same across restarts, as a deployed service's would.
final class JournalFixture: Sendable {
    let directory: TemporaryDirectory
    let rpcEndpoint: String
    let eventEndpoint: String
    let process: ServiceProcess

    init() throws {
        directory = try TemporaryDirectory(prefix: "journal")
        rpcEndpoint = directory.ipcEndpoint("rpc")
        eventEndpoint = directory.ipcEndpoint("events")
        process = ServiceProcess(
            name: "storebus-testkit-journal",
            arguments: ["--rpc-endpoint", rpcEndpoint, "--event-endpoint", eventEndpoint, "--data-dir", directory.path("data"), "--log-level", "warning"],
            logFile: directory.url.appendingPathComponent("journal.log")
        )
    }

    /// Starts (or restarts) the process and waits until it serves.
    func start(failPoints: String = "") async throws {
        try process.start(environment: ["STOREBUS_FAILPOINTS": failPoints])
        try await process.waitUntilServing(endpoint: rpcEndpoint)
    }

    func client() throws -> RPCClient {
        try RPCClient(configuration: ClientConfiguration(endpoints: [rpcEndpoint]))
    }

    func follower(client: RPCClient, key: String = "") throws -> EventFollower {
        var configuration = EventFollower.Configuration(log: "journal", key: key, doorbellEndpoints: [eventEndpoint])
        configuration.idlePoll = .milliseconds(200)
        return try EventFollower(configuration: configuration, client: client, context: ZeroMQContextForTests.shared, logger: .init(label: "follower"))
    }

    func stop() async {
        await process.stop()
        directory.remove()
    }
}

/// Events collected by a follower running in the background.
final class Collected: Sendable {
    private let state = Mutex<[Storebus_Eventlog_V1_Event]>([])
    func append(_ event: Storebus_Eventlog_V1_Event) { state.withLock { $0.append(event) } }
    var events: [Storebus_Eventlog_V1_Event] { state.withLock { $0 } }
    var count: Int { state.withLock { $0.count } }
}
