import ArgumentParser
import StoreBus
import StoreBusHost
import StoreSchema

/// `storectl health`: asks every service for Health/Check; exits 0 only when all answer SERVING.
/// A gateway's answer includes the services behind it, which must be serving too.
struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "health", abstract: "Check that every StoreBus service answers.")

    @Option(name: .customLong("service"), help: "name=endpoint of a service to check (repeatable).")
    var services: [String] = []

    @Option(
        name: .customLong("gateway"),
        help:
            "A gateway to check, with the services behind it (repeatable; STOREBUS_GATEWAY too). Without --service or --gateway, the local deployment's gateway and the services behind it are checked."
    )
    var gateways: [String] = []

    @Option(
        name: .customLong("gateway-key"), help: "The gateways' CURVE public key (a .pub file or the key); default as for the other commands. Services behind a CURVE gateway are checked through it.")
    var gatewayKey: String?

    @Option(help: "Seconds to wait for each service.")
    var timeout: Double = 3

    /// The local deployment's gateway: its services admit only each other's CURVE keys, and the
    /// gateway's answer says how each of them is.
    static let localDefaults = ["\(ServiceRegistry.gateway.name)=\(ServiceRegistry.gateway.rpcEndpoint)"]
    /// The process that answers for each StoreBus service name.
    static let processes = Dictionary(uniqueKeysWithValues: ServiceRegistry.all.map { ($0.name, $0.process) })

    func validate() throws {
        guard timeout.isFinite, timeout > 0, timeout <= 3600 else {
            throw ValidationError("--timeout must be a number of seconds from 0 to 3600")
        }
    }

    func run() async throws {
        var allServing = true
        let gatewayEntries = HostSettings.endpoints(flags: gateways, environmentVariable: "STOREBUS_GATEWAY", default: []).map { "gateway=\($0)" }
        let entries = services + gatewayEntries
        for entry in entries.isEmpty ? Self.localDefaults : entries {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw Failure(description: "\"\(entry)\" is not name=endpoint") }
            let (name, endpoint) = (parts[0], parts[1])
            let client: RPCClient
            do {
                var configuration = ClientConfiguration(endpoints: [endpoint])
                if name == "gateway" { configuration.serverPublicKey = try GatewayOptions.gatewayPublicKey(flag: gatewayKey, endpoints: [endpoint]) }
                client = try RPCClient(configuration: configuration)
            } catch {
                allServing = false
                print("\(name) cannot be checked: \"\(endpoint)\" is not a usable endpoint (\(error))")
                continue
            }
            do {
                let answer = try await client.call(Storebus_Health_V1_Health.check, .init(), options: CallOptions(timeout: .milliseconds(Int64(timeout * 1000))))
                // A StoreBus service's name says which process should answer: another one there (the
                // gateway at the catalog's endpoint, say) does not make the service healthy.
                let expected = Self.processes[name]
                let serving = answer.status == .serving && (expected == nil || answer.process == expected)
                allServing = allServing && serving
                let state = answer.status != .serving ? "not serving" : serving ? "serving" : "not found (\(answer.process) answers there)"
                print("\(name) \(state) at \(endpoint) (\(answer.process) \(answer.version), up \(Int(answer.uptimeSeconds)) s)")
                // A gateway asks the services behind it: it serves clients only when they answer too.
                for upstream in answer.upstreams {
                    allServing = allServing && upstream.status == .serving
                    print("  " + Self.describe(upstream))
                }
            } catch {
                allServing = false
                print("\(name) not answering at \(endpoint): \(error.message)")
            }
            await client.shutdown()
        }
        if !allServing { throw ExitCode.failure }
    }

    /// One line on a service behind a gateway, as the gateway found it.
    static func describe(_ upstream: Storebus_Health_V1_UpstreamHealth) -> String {
        guard upstream.status == .serving else {
            return "\(upstream.name) behind it not serving: \(upstream.message)"
        }
        return "\(upstream.name) behind it serving (\(upstream.process) \(upstream.version), up \(Int(upstream.uptimeSeconds)) s)"
    }
}
