import Foundation

/// A fresh directory under /tmp, removed by ``remove()`` (or, after ``Leftovers/endWithSignals(grace:)``,
/// when a signal ends the process).
///
/// Its path is short on purpose: ipc:// endpoints inside it must fit the 107-byte Unix socket limit.
public struct TemporaryDirectory: Sendable {
    /// The directory.
    public let url: URL

    /// Creates a directory named `sb-<prefix>-<random>` under /tmp.
    public init(prefix: String = "t") throws {
        let name = "sb-\(prefix)-\(UInt32.random(in: 0...UInt32.max))"
        url = URL(fileURLWithPath: "/tmp", isDirectory: true).appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        Leftovers.made(url.path)
    }

    /// The path of a file or directory inside.
    public func path(_ component: String) -> String {
        url.appendingPathComponent(component).path
    }

    /// An `ipc://` endpoint for a socket file inside.
    public func ipcEndpoint(_ name: String) -> String {
        "ipc://" + path("\(name).sock")
    }

    /// Deletes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(at: url)
        Leftovers.removed(url.path)
    }
}
