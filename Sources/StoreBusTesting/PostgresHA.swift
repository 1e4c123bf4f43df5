import Foundation
import StoreBusPostgres

#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL primary and its synchronous standby, kept by pg_auto_failover (Debian's
/// postgresql-15-auto-failover and pg-auto-failover-cli): a monitor and two nodes, each a
/// `pg_autoctl run` of its own under a temporary directory, on free loopback ports, as Debian's
/// `postgres` user when the tests run as root. The role `storebus` owns the database `storebus` and
/// signs in without a password (trust, loopback only). With one standby, pg_auto_failover makes it
/// synchronous (`synchronous_standby_names` names it): a commit is acknowledged once the standby has
/// it. When the primary is lost, the monitor promotes the standby after `demoteTimeoutSeconds`.
///
/// In a network namespace (`namespace`, at `address`: a host of a test's network), the nodes listen
/// on that address and let the hosts of its network (the LAN) sign in.
public final class PostgresHA: Sendable {
    /// The directory holding the monitor's and the nodes' data and logs.
    public let directory: TemporaryDirectory
    /// The nodes' ports, the first node's first (the primary at start).
    public let ports: [Int]
    /// Where the monitor and the nodes listen.
    public let address: String
    let monitor: ServiceProcess
    let nodes: [ServiceProcess]
    /// The environment pg_autoctl runs in.
    let environment: [String: String]

    /// The role and database the nodes are made with.
    public static let user = "storebus"
    public static let database = "storebus"

    private init(directory: TemporaryDirectory, ports: [Int], address: String, monitor: ServiceProcess, nodes: [ServiceProcess], environment: [String: String]) {
        self.directory = directory
        self.ports = ports
        self.address = address
        self.monitor = monitor
        self.nodes = nodes
        self.environment = environment
    }

    /// Settings for a service on both nodes: it finds the primary among them.
    public func settings(database: String = PostgresHA.database) -> PostgresSettings {
        PostgresSettings(hosts: ports.map { "\(address):\($0)" }, user: Self.user, database: database, connectTimeoutSeconds: 2)
    }

    /// `sql` on node `index` (its first column's lines), nil when the node does not answer.
    public func query(node index: Int, database: String = PostgresHA.database, _ sql: String) async -> String? {
        await Self.query(host: address, port: ports[index], database: database, sql)
    }

    /// `sql` on the primary, nil when none answers.
    public func queryPrimary(database: String = PostgresHA.database, _ sql: String) async -> String? {
        guard let primary = await primary() else { return nil }
        return await query(node: primary, database: database, sql)
    }

    /// Makes the monitor and the two nodes and runs them; returns once the first node is primary and
    /// the second its synchronous standby. `demoteTimeoutSeconds`: how long the monitor waits, once
    /// the primary is lost, before it promotes the standby.
    public static func start(demoteTimeoutSeconds: Int = 3, namespace: String? = nil, address: String = "127.0.0.1") async throws -> PostgresHA {
        let binaries = try PostgresServer.binaries()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/pg_autoctl") else {
            throw TestingError("pg_auto_failover is not installed (no /usr/bin/pg_autoctl): `make test-deps` installs pg-auto-failover-cli and postgresql-15-auto-failover")
        }
        let directory = try TemporaryDirectory(prefix: "pgha")
        let asPostgres = getuid() == 0
        if asPostgres {
            chmod(directory.url.path, 0o755)
            guard let account = getpwnam("postgres") else { throw TestingError("running as root, and there is no postgres user to run PostgreSQL as") }
            chown(directory.url.path, account.pointee.pw_uid, account.pointee.pw_gid)
        }
        // pg_autoctl keeps its state and configuration under the XDG directories, and finds pg_ctl
        // on the PATH.
        let environment = [
            "PATH": binaries.path + ":/usr/bin:/bin", "XDG_CONFIG_HOME": directory.path("config"), "XDG_DATA_HOME": directory.path("state"),
            "PG_AUTOCTL_DEBUG": "0"
        ]
        let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) }
        if namespace != nil, ip == nil { throw TestingError("no ip command to run PostgreSQL in a network namespace") }
        func command(_ arguments: [String]) -> (String, [String]) {
            let (program, rest) =
                asPostgres
                ? ("/usr/bin/setpriv", ["--reuid=postgres", "--regid=postgres", "--init-groups", "--", "/usr/bin/pg_autoctl"] + arguments)
                : ("/usr/bin/pg_autoctl", arguments)
            guard let namespace, let ip else { return (program, rest) }
            return (ip, ["netns", "exec", namespace, program] + rest)
        }
        let monitorPort = try unusedLoopbackPort()
        let ports = [try unusedLoopbackPort(), try unusedLoopbackPort()]
        let monitorURI = "postgres://autoctl_node@\(address):\(monitorPort)/pg_auto_failover?sslmode=disable"
        let common = ["--hostname", address, "--auth", "trust", "--no-ssl"]
        /// In a namespace, the hosts of its network sign in to any database without a password too.
        func allowNetwork(_ data: String) throws {
            guard namespace != nil, let file = FileHandle(forWritingAtPath: "\(data)/pg_hba.conf") else { return }
            _ = try file.seekToEnd()
            try file.write(contentsOf: Data("\nhost all all samenet trust\n".utf8))
            try file.close()
        }

        let (create, createArguments) = command(["create", "monitor", "--pgdata", directory.path("monitor"), "--pgport", "\(monitorPort)"] + common)
        let made = try await runCommand(create, createArguments, environment: environment, log: directory.path("monitor-create.log"))
        guard made.status == 0 else { throw TestingError("pg_autoctl create monitor failed (\(made.status)): \(made.output)") }
        // The monitor's failover timings, shortened for tests (a lost primary is seen at the next
        // health check; the standby is promoted once the demote timeout has passed).
        let tuning = """

            pgautofailover.health_check_period = 1000
            pgautofailover.health_check_timeout = 1000
            pgautofailover.health_check_max_retries = 1
            pgautofailover.health_check_retry_delay = 500
            pgautofailover.node_considered_unhealthy_timeout = 2000
            pgautofailover.primary_demote_timeout = '\(demoteTimeoutSeconds)s'

            """
        let conf = FileHandle(forWritingAtPath: directory.path("monitor/postgresql.conf"))
        _ = try conf?.seekToEnd()
        try conf?.write(contentsOf: Data(tuning.utf8))
        try conf?.close()
        try allowNetwork(directory.path("monitor"))

        let (run, runArguments) = command(["run", "--pgdata", directory.path("monitor")])
        let monitor = ServiceProcess(name: run, arguments: runArguments, logFile: directory.url.appendingPathComponent("monitor.log"))
        try monitor.start(environment: environment)
        var nodes: [ServiceProcess] = []
        let ha = PostgresHA(directory: directory, ports: ports, address: address, monitor: monitor, nodes: [], environment: environment)
        do {
            try await ha.waitUntil("the monitor accepts connections", timeout: .seconds(60)) {
                await Self.query(host: address, port: monitorPort, user: "autoctl_node", database: "pg_auto_failover", "SELECT 1") == "1"
            }
            for (index, port) in ports.enumerated() {
                let data = directory.path("node\(index + 1)")
                let (create, createArguments) = command(
                    ["create", "postgres", "--pgdata", data, "--pgport", "\(port)", "--username", user, "--dbname", database, "--monitor", monitorURI, "--name", "node\(index + 1)"]
                        + common)
                let made = try await runCommand(create, createArguments, environment: environment, log: directory.path("node\(index + 1)-create.log"))
                guard made.status == 0 else { throw TestingError("pg_autoctl create postgres failed (\(made.status)): \(made.output)") }
                try allowNetwork(data)
                let (run, runArguments) = command(["run", "--pgdata", data])
                let node = ServiceProcess(name: run, arguments: runArguments, logFile: directory.url.appendingPathComponent("node\(index + 1).log"))
                try node.start(environment: environment)
                nodes.append(node)
            }
            let started = PostgresHA(directory: directory, ports: ports, address: address, monitor: monitor, nodes: nodes, environment: environment)
            try await started.waitForStandby(1, timeout: .seconds(120))
            return started
        } catch {
            await PostgresHA(directory: directory, ports: ports, address: address, monitor: monitor, nodes: nodes, environment: environment).stop()
            throw error
        }
    }

    /// Starts a primary and standby, runs `body`, and stops them whether `body` returns or throws.
    public static func running<T>(_ body: (PostgresHA) async throws -> T) async throws -> T {
        let ha = try await start()
        do {
            let value = try await body(ha)
            await ha.stop()
            return value
        } catch {
            await ha.stop()
            throw error
        }
    }

    /// The index of the node that is primary now (accepts writes), if one is.
    public func primary() async -> Int? {
        for index in ports.indices where await query(node: index, "SELECT pg_is_in_recovery()") == "f" {
            return index
        }
        return nil
    }

    /// Starts node `index` again (its keeper and postgres), after ``kill(node:)``: pg_auto_failover
    /// makes it a standby of the primary there is now.
    public func restart(node index: Int) throws {
        try nodes[index].start(environment: environment)
    }

    /// Waits until node `index` is a standby and the other its primary with one synchronous standby,
    /// at most `timeout`: a commit acknowledged from then on is on both.
    public func waitForStandby(_ index: Int, timeout: Duration = .seconds(120)) async throws {
        try await waitUntil("node\(index + 1) is the synchronous standby", timeout: timeout) {
            let other = index == 0 ? 1 : 0
            let standbys = await self.query(node: other, "SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')")
            let recovering = await self.query(node: index, "SELECT pg_is_in_recovery()")
            return standbys == "1" && recovering == "t"
        }
    }

    /// Kills node `index` at once, its keeper, its postgres and every backend (SIGKILL to the whole
    /// process tree): a machine lost, as far as the others can tell.
    public func kill(node index: Int) async {
        ProcessTree.kill(root: nodes[index].pid)
        await nodes[index].kill()
    }

    /// Waits until node `index` is the primary (the monitor has promoted it), at most `timeout`.
    public func waitForPrimary(_ index: Int, timeout: Duration = .seconds(60)) async throws {
        try await waitUntil("node\(index + 1) is primary", timeout: timeout) { await self.primary() == index }
    }

    /// What the monitor and the nodes have logged.
    public var logs: String {
        ([monitor] + nodes).map { "== \($0.logFile.lastPathComponent)\n\($0.output)" }.joined(separator: "\n")
    }

    /// Stops every process (SIGKILL to each tree: the data is thrown away) and removes the directory.
    public func stop() async {
        for process in nodes + [monitor] {
            ProcessTree.kill(root: process.pid)
            await process.kill()
        }
        directory.remove()
    }

    private func waitUntil(_ what: String, timeout: Duration, _ condition: () async -> Bool) async throws {
        guard await StoreBusTesting.waitUntil(timeout: timeout, interval: .milliseconds(250), condition) else {
            throw TestingError("pg_auto_failover: not reached in \(timeout): \(what)\n\(logs)")
        }
    }

    /// One value of a query on the node at `port`, as psql prints it; nil when it cannot connect.
    public static func query(host: String = "127.0.0.1", port: Int, user: String = PostgresHA.user, database: String = PostgresHA.database, _ sql: String) async -> String? {
        guard
            let answer = try? await runCommand(
                "/usr/bin/psql", ["-h", host, "-p", "\(port)", "-U", user, "-d", database, "-Atc", sql], environment: ["PGCONNECT_TIMEOUT": "2"]),
            answer.status == 0
        else { return nil }
        return answer.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
