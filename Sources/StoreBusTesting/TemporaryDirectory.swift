import Foundation

/// A fresh directory, under /tmp unless told otherwise, removed by ``remove()`` (or, after
/// ``Leftovers/endWithSignals(grace:)``, when a signal ends the process).
///
/// Under /tmp, its path is short on purpose: ipc:// endpoints inside it must fit the 107-byte Unix
/// socket limit.
public struct TemporaryDirectory: Sendable {
    /// The directory.
    public let url: URL

    /// Creates a directory named `sb-<prefix>-<random>` under `base` (/tmp unless given: ipc://
    /// endpoints need a short path).
    public init(prefix: String = "t", in base: URL = URL(fileURLWithPath: "/tmp", isDirectory: true)) throws {
        let name = "sb-\(prefix)-\(UInt32.random(in: 0...UInt32.max))"
        url = base.appendingPathComponent(name, isDirectory: true)
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
        // Still registered when it could not be removed (a service that a signal is stopping may
        // still write into it): the signal's handler tries again once the services have exited.
        if !FileManager.default.fileExists(atPath: url.path) { Leftovers.removed(url.path) }
    }
}
