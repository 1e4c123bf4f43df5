import Foundation

/// Finds the package's built executables for tests that start real processes.
public enum Executables {
    /// The directory holding the built products: `STOREBUS_BIN_DIR` when set, else the directory of
    /// the running test binary (SwiftPM puts executables and the test bundle side by side).
    public static var directory: URL {
        if let override = ProcessInfo.processInfo.environment["STOREBUS_BIN_DIR"], !override.isEmpty {
            return URL(fileURLWithPath: override, isDirectory: true)
        }
        let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        // The test binary lives at <bin>/<Package>PackageTests.xctest (a file on Linux).
        return me.deletingLastPathComponent()
    }

    /// The path of an executable product, such as `storebus-catalog`.
    /// An absolute path names a program of the system (`/usr/sbin/ip`), taken as it is.
    public static func url(_ name: String) throws -> URL {
        if name.hasPrefix("/") { return URL(fileURLWithPath: name) }
        let candidate = directory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: candidate.path) else {
            throw TestingError("\(name) is not built at \(candidate.path); run `swift build` (make test does)")
        }
        return candidate
    }
}

/// A failure of the test support itself, with a sentence saying what went wrong.
public struct TestingError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The repository's `deploy/` folder (sample catalog, configurations), found from this file's path.
public let deployDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("deploy")

// Identifiers of the sample catalog in deploy/catalog/catalog.json, used by tests across targets.
/// The sample puzzle game.
public let puzzle = "com.storebus.demo.puzzle"
/// The sample notes app.
public let notes = "com.storebus.demo.notes"
/// A consumable of the puzzle game.
public let coins = "com.storebus.demo.puzzle.coins100"
/// A non-consumable with hosted content.
public let levelPack = "com.storebus.demo.puzzle.levelpack1"
/// A non-consumable without hosted content.
public let removeAds = "com.storebus.demo.puzzle.removeads"
