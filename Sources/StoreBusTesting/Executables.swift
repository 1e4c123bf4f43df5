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

/// The field numbers of `message` in `file` of proto-schemas/ (for example
/// `storebus/receipt/v1/receipt.proto`): what a hand-written encoder of the message must cover.
public func protoFieldNumbers(of message: String, in file: String) throws -> [Int] {
    let path = deployDirectory.deletingLastPathComponent().appendingPathComponent("proto-schemas").appendingPathComponent(file)
    let lines = try String(contentsOf: path, encoding: .utf8).components(separatedBy: "\n")
    let field = try Regex(#"^\s*(?:repeated\s+|optional\s+)?[\w.]+\s+\w+\s*=\s*(\d+)\s*(?:\[.*\])?\s*;"#)
    guard let start = lines.firstIndex(where: { $0.hasPrefix("message \(message) {") }) else { throw TestingError("no message \(message) in \(file)") }
    var numbers: [Int] = []
    for line in lines[(start + 1)...] {
        if line.hasPrefix("}") { break }
        if let match = line.firstMatch(of: field), let number = Int(match.output[1].substring ?? "") { numbers.append(number) }
    }
    return numbers.sorted()
}
