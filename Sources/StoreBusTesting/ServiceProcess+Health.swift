import StoreBus
import StoreSchema

extension ServiceProcess {
    /// Waits until the process answers Health/Check with SERVING on `endpoint`; throws with the
    /// process's output when it does not within `timeout`, or exits first.
    public func waitUntilServing(endpoint: String, timeout: Duration = .seconds(20)) async throws {
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [endpoint]))
        defer { Task { await client.shutdown() } }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard isRunning else { throw TestingError("\(name) exited before serving:\n\(output)") }
            // Time for a gateway to ask the services behind it (up to a second when one is down).
            if let answer = try? await client.call(Storebus_Health_V1_Health.check, .init(), options: CallOptions(timeout: .seconds(2))),
               answer.status == .serving {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestingError("\(name) did not serve on \(endpoint) within \(timeout):\n\(output)")
    }
}
