import ArgumentParser
import StoreBus
import StoreSchema

/// `storectl health`: asks every service for Health/Check; exits 0 only when all answer SERVING.
struct HealthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "health", abstract: "Check that every StoreBus service answers.")

    @Option(name: .customLong("service"), help: "name=endpoint of a service to check (repeatable). Defaults to the local deployment's.")
    var services: [String] = []

    @Option(help: "Seconds to wait for each service.")
    var timeout: Double = 3

    static let localDefaults = ["gateway=tcp://127.0.0.1:7300", "catalog=tcp://127.0.0.1:7301", "payment-queue=tcp://127.0.0.1:7302"]

    func validate() throws {
        guard timeout.isFinite, timeout > 0, timeout <= 3600 else {
            throw ValidationError("--timeout must be a number of seconds from 0 to 3600")
        }
    }

    func run() async throws {
        var allServing = true
        for entry in services.isEmpty ? Self.localDefaults : services {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw Failure(description: "\"\(entry)\" is not name=endpoint") }
            let (name, endpoint) = (parts[0], parts[1])
            let client = try RPCClient(configuration: ClientConfiguration(endpoints: [endpoint]))
            do {
                let answer = try await client.call(Storebus_Health_V1_Health.check, .init(), options: CallOptions(timeout: .milliseconds(Int64(timeout * 1000))))
                let serving = answer.status == .serving
                allServing = allServing && serving
                print("\(name) \(serving ? "serving" : "not serving") at \(endpoint) (\(answer.process) \(answer.version), up \(Int(answer.uptimeSeconds)) s)")
            } catch {
                allServing = false
                print("\(name) not answering at \(endpoint): \(error.message)")
            }
            await client.shutdown()
        }
        if !allServing { throw ExitCode.failure }
    }
}
