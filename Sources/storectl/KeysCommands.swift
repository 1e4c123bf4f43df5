import ArgumentParser
import Foundation
import StoreBus

/// `storectl keys make|show`: the CURVE key pairs of a deployment's services (see
/// deploy/README.md): `<name>.key` (0600, the service's identity) and `<name>.pub` (to give to the
/// services that talk to it).
struct KeysCommands: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Make and show the services' CURVE key pairs.",
        subcommands: [Make.self, Show.self]
    )

    /// Every service's name (``ServiceRegistry``), the default set.
    static let services = ServiceRegistry.all.map(\.name)

    struct Make: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a key pair for each name (default: every service, \(KeysCommands.services.joined(separator: " "))): NAME.key (mode 0600) and NAME.pub."
        )

        @Option(name: .customLong("dir"), help: "Where the key files go (made 0700 when missing).")
        var directory = "data/keys"

        @Flag(name: .customLong("if-missing"), help: "Leave a name whose key pair exists alone (checking it), rather than failing.")
        var ifMissing = false

        @Argument(help: "Names of the key pairs.")
        var names: [String] = []

        func run() throws {
            let directory = URL(fileURLWithPath: directory, isDirectory: true)
            for name in names.isEmpty ? KeysCommands.services : names {
                let existing = directory.appendingPathComponent(CurveKeyFile.keyPairFileName(name)).path
                if ifMissing, FileManager.default.fileExists(atPath: existing) {
                    let pair = try CurveKeyFile.readKeyPair(at: existing)
                    print("\(name) kept \(pair.publicKey) \(existing)")
                    continue
                }
                let pair = try CurveKeyFile.make(name: name, in: directory)
                print("\(name) made \(pair.publicKey) \(existing)")
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the public key of each key file (NAME.key or NAME.pub), checking key pairs' modes and keys.")

        @Option(name: .customLong("dir"), help: "Where the key files are.")
        var directory = "data/keys"

        @Argument(help: "Names or paths of key files (default: every .key and .pub file in --dir).")
        var files: [String] = []

        func run() throws {
            let directory = URL(fileURLWithPath: directory, isDirectory: true)
            var paths = files.map { file in
                FileManager.default.fileExists(atPath: file) ? file : directory.appendingPathComponent(CurveKeyFile.keyPairFileName(file)).path
            }
            if files.isEmpty {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
                paths = names.filter { $0.hasSuffix(".key") || $0.hasSuffix(".pub") }.sorted().map { directory.appendingPathComponent($0).path }
                guard !paths.isEmpty else { throw Failure(description: "no key files in \(directory.path) (storectl keys make --dir \(directory.path))") }
            }
            var failed = false
            for path in paths {
                do {
                    if path.hasSuffix(".pub") {
                        print("\(path) public \(try CurveKeyFile.readPublicKey(at: path))")
                    } else {
                        print("\(path) key pair, public \(try CurveKeyFile.readKeyPair(at: path).publicKey)")
                    }
                } catch {
                    failed = true
                    print("\(path): \(error)")
                }
            }
            if failed { throw ExitCode.failure }
        }
    }
}
