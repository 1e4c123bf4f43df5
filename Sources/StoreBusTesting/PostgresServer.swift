import Foundation
import StoreBusPostgres

#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL server of a test's own: a cluster made with initdb in a temporary directory, its
/// postmaster a child process of the test (killed with it), listening on a free loopback port, the
/// role `storebus` its superuser, signing in without a password (trust, loopback only). As root
/// (which PostgreSQL refuses to run as), it runs as Debian's `postgres` user, through setpriv.
public final class PostgresServer: Sendable {
    /// The directory holding the cluster, its socket and its log.
    public let directory: TemporaryDirectory
    /// The loopback TCP port it listens on.
    public let port: Int
    let process: ServiceProcess

    /// The role initdb makes the superuser.
    public static let user = "storebus"

    private init(directory: TemporaryDirectory, port: Int, process: ServiceProcess) {
        self.directory = directory
        self.port = port
        self.process = process
    }

    /// Settings for a service using database `database` of this server.
    public func settings(database: String = "postgres") -> PostgresSettings {
        PostgresSettings(hosts: ["127.0.0.1:\(port)"], user: Self.user, database: database)
    }

    /// The directory of PostgreSQL's server programs (initdb, postgres): the newest of Debian's
    /// /usr/lib/postgresql/<version>/bin.
    public static func binaries() throws -> URL {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []
        let newest = versions.compactMap(Int.init).sorted().last
        guard let newest, FileManager.default.isExecutableFile(atPath: root.appendingPathComponent("\(newest)/bin/postgres").path) else {
            throw TestingError("PostgreSQL's server is not installed (no /usr/lib/postgresql/<version>/bin/postgres): `make test-deps` installs postgresql-15")
        }
        return root.appendingPathComponent("\(newest)/bin")
    }

    /// Makes a cluster and starts its server; returns once it accepts connections.
    public static func start() async throws -> PostgresServer {
        let binaries = try binaries()
        let directory = try TemporaryDirectory(prefix: "pg")
        let data = directory.path("data")
        let asPostgres = getuid() == 0
        if asPostgres {
            // The server's user must reach its directory and own its data.
            chmod(directory.url.path, 0o755)
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
            guard let account = getpwnam("postgres") else { throw TestingError("running as root, and there is no postgres user to run PostgreSQL as") }
            chown(data, account.pointee.pw_uid, account.pointee.pw_gid)
            chown(directory.url.path, account.pointee.pw_uid, account.pointee.pw_gid)
        }
        func command(_ program: String, _ arguments: [String]) -> (String, [String]) {
            let path = binaries.appendingPathComponent(program).path
            return asPostgres ? ("/usr/bin/setpriv", ["--reuid=postgres", "--regid=postgres", "--init-groups", "--", path] + arguments) : (path, arguments)
        }
        let (initdb, initdbArguments) = command(
            "initdb", ["-D", data, "-U", user, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"])
        let made = try await runCommand(initdb, initdbArguments, log: directory.path("initdb.log"))
        guard made.status == 0 else {
            throw TestingError("initdb failed (\(made.status)): \(made.output)")
        }
        let port = try unusedLoopbackPort()
        let (postgres, postgresArguments) = command(
            "postgres",
            [
                "-D", data, "-p", "\(port)", "-k", directory.url.path, "-c", "listen_addresses=127.0.0.1",
                "-c", "max_connections=200", "-c", "shared_buffers=32MB", "-c", "synchronous_commit=on"
            ])
        let process = ServiceProcess(name: postgres, arguments: postgresArguments, logFile: directory.url.appendingPathComponent("postgres.log"))
        try process.start()
        let server = PostgresServer(directory: directory, port: port, process: process)
        let deadline = ContinuousClock.now + .seconds(120)
        while !process.output.contains("database system is ready to accept connections") {
            guard process.isRunning else {
                throw TestingError("postgres exited as it started: \(process.output)")
            }
            guard ContinuousClock.now < deadline else {
                await server.stop()
                throw TestingError("postgres did not get ready in 120 s: \(process.output)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return server
    }

    /// Starts a server, runs `body`, and stops the server whether `body` returns or throws.
    public static func running<T>(_ body: (PostgresServer) async throws -> T) async throws -> T {
        let server = try await start()
        do {
            let value = try await body(server)
            await server.stop()
            return value
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Makes database `name`, for a service that keeps its state in a database of its own (each
    /// service does: see `PostgresSchema`); returns the settings for it.
    @discardableResult
    public func createDatabase(_ name: String) async throws -> PostgresSettings {
        let made = try await runCommand(
            try Self.binaries().appendingPathComponent("createdb").path, ["-h", "127.0.0.1", "-p", "\(port)", "-U", Self.user, name],
            log: directory.path("createdb-\(name).log"))
        guard made.status == 0 else { throw TestingError("createdb \(name) failed (\(made.status)): \(made.output)") }
        return settings(database: name)
    }

    /// What the server has logged.
    public var log: String { process.output }

    /// The postmaster's process id (every backend is a child of it), while it runs.
    public var pid: pid_t? { process.pid }

    /// Stops the server at once (SIGQUIT: its immediate shutdown) and removes its directory.
    public func stop() async {
        process.signal(SIGQUIT)
        if await process.waitForExit(timeout: .seconds(30)) == nil { await process.kill() }
        directory.remove()
    }
}
