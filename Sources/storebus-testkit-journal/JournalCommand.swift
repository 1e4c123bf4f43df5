import ArgumentParser
import GRDB
import ServiceLifecycle
import StoreBus
import StoreBusCommandLine
import StoreBusHost
import StoreBusServer
import StoreBusStorage
import StoreSchema

/// `storebus-testkit-journal`: a minimal state-owning StoreBus process for the foundation's own
/// end-to-end tests (crash recovery of the event log, bad input, followers). Each Append writes a row
/// and its event in one transaction, through the same EventLogWriter the services use.
@main
struct JournalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storebus-testkit-journal",
        abstract: "Test fixture: a journal service with an event log."
    )

    @OptionGroup var host: HostOptions

    @Option(name: .customLong("fail-after-ms"), help: "Test only: a background service that fails this many milliseconds after start.")
    var failAfterMilliseconds: Int?

    func run() async throws {
        let configuration = try host.resolve(
            defaults: HostConfiguration(
                rpcEndpoints: ["tcp://127.0.0.1:7390"], eventEndpoints: ["tcp://127.0.0.1:7391"], dataDirectory: "data/journal"
            ))
        ServiceHost.bootstrap(configuration)
        let host = try ServiceHost(process: "storebus-testkit-journal", configuration: configuration)
        var migrator = DatabaseMigrator()
        EventLog.registerMigrations(&migrator)
        migrator.registerMigration("journal_v1") { db in
            try db.execute(sql: "CREATE TABLE journal_entry (id INTEGER PRIMARY KEY, key TEXT NOT NULL, text TEXT NOT NULL)")
            try db.execute(sql: "CREATE INDEX journal_entry_key ON journal_entry (key)")
        }
        let database = try StoreDatabase(directory: try host.dataDirectory(), name: "journal", migrator: migrator)
        let publisher = try host.makePublisher()
        // Commits on the server's loop, as the payment queue's do.
        let writer = EventLogWriter(logName: "journal", database: database, publisher: publisher, failPoints: host.failPoints, reactor: host.reactor)

        var router = try EventLogHandlers(database: database).router
        router.register(JournalHandlers(database: database, writer: writer))
        try await host.serve(
            router: router,
            services: [Storebus_Testkit_V1_Journal.serviceName, Storebus_Eventlog_V1_EventLog.serviceName],
            background: failAfterMilliseconds.map { [FailingService(delay: .milliseconds($0))] } ?? [],
            publisher: publisher,
            onShutdown: { try? database.close() }
        )
    }
}

/// A background service that throws after `delay` unless the process is shut down first: how the
/// tests check that a process whose service failed exits with a non-zero status.
struct FailingService: Service {
    let delay: Duration

    struct Failure: Error, CustomStringConvertible {
        var description: String { "the test service failed on purpose (--fail-after-ms)" }
    }

    func run() async throws {
        // A graceful shutdown before the delay ends the service without a failure.
        guard (try? await cancelWhenGracefulShutdown { [delay] in try await Task.sleep(for: delay) }) != nil else { return }
        throw Failure()
    }
}

/// The handlers of `storebus.testkit.v1.Journal`: entries appended with their event in one commit.
struct JournalHandlers: Storebus_Testkit_V1_Journal.Handlers {
    let database: StoreDatabase
    let writer: EventLogWriter

    var loopSafe: LoopSafeMethods { .all(of: Storebus_Testkit_V1_Journal.self) }

    func append(_ request: Storebus_Testkit_V1_AppendRequest, context: ServerContext) async throws -> Storebus_Testkit_V1_AppendResponse {
        // The contract bounds the key (1 to 200 bytes) and the text; a key is one line of the log.
        guard !request.key.contains("\n") else {
            throw RPCError.invalidArgument(field: "key", "must not contain a newline")
        }
        return try await writer.write { db, batch in
            let id = try db.value(Int64.self, cached: "INSERT INTO journal_entry (key, text) VALUES (?, ?) RETURNING id", arguments: [request.key, request.text]) ?? 0
            let entry = Storebus_Testkit_V1_JournalEntryAppended.with {
                $0.key = request.key
                $0.text = request.text
                $0.entryID = UInt64(id)
            }
            let event = try batch.append(key: request.key, entry)
            return Storebus_Testkit_V1_AppendResponse.with {
                $0.seq = event.seq
                $0.keySeq = event.keySeq
            }
        }
    }

    func countEntries(_ request: Storebus_Testkit_V1_CountEntriesRequest, context: ServerContext) async throws -> Storebus_Testkit_V1_CountEntriesResponse {
        let count = try await database.pool.read { db in
            request.key.isEmpty
                ? try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM journal_entry")!
                : try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM journal_entry WHERE key = ?", arguments: [request.key])!
        }
        return .with { $0.count = UInt64(count) }
    }
}
