import StoreBus
import StoreSchema

extension ServiceProcess {
    /// Waits until the process answers Health/Check with SERVING on `endpoint` (a CURVE endpoint
    /// open to any client when `serverPublicKey` is given); throws with the process's output when it
    /// does not within `timeout`, or exits first.
    public func waitUntilServing(endpoint: String, serverPublicKey: String? = nil, timeout: Duration = .seconds(20)) async throws {
        var configuration = ClientConfiguration(endpoints: [endpoint])
        configuration.serverPublicKey = serverPublicKey
        let client = try RPCClient(configuration: configuration)
        defer { Task { await client.shutdown() } }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard isRunning else { throw TestingError("\(name) exited before serving:\n\(output)") }
            // Time for a gateway to ask the services behind it (up to a second when one is down).
            if let answer = try? await client.call(Storebus_Health_V1_Health.check, .init(), options: CallOptions(timeout: .seconds(2))),
                answer.status == .serving
            {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestingError("\(name) did not serve on \(endpoint) within \(timeout):\n\(output)")
    }
}

extension ServiceProcess {
    /// Waits until the process prints its ready line (`<name> ready rpc=...`): for a service that
    /// only allowed CURVE keys may ask; throws with its output when it exits first or `timeout` passes.
    public func waitUntilReady(timeout: Duration = .seconds(20)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if output.contains(" ready rpc=") { return }
            guard isRunning else { throw TestingError("\(name) exited before it was ready:\n\(output)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestingError("\(name) did not print its ready line within \(timeout):\n\(output)")
    }
}
