import Foundation

/// Runs a command to its end (through ``Spawn``, as every process of the tests is started); returns
/// its exit status and its output, standard output and error together, kept in `log` (a temporary
/// file when none is given).
public func runCommand(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:], log: String? = nil
) async throws -> (status: Int32, output: String) {
    let path = log ?? FileManager.default.temporaryDirectory.appendingPathComponent("sb-command-\(UUID().uuidString).log").path
    defer { if log == nil { try? FileManager.default.removeItem(atPath: path) } }
    let pid = try Spawn.start(
        executable: executable, arguments: arguments,
        environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new }, output: .file(path)
    )
    let status = await withCheckedContinuation { continuation in
        Spawn.onExit(of: pid) { continuation.resume(returning: $0) }
    }
    return (status, (try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
}
