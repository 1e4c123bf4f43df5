import ArgumentParser
import Crypto
import Foundation
import StoreBus

/// `storectl keys make|show`: the CURVE key pairs of a deployment's services (see
/// deploy/README.md): `<name>.key` (0600, the service's identity) and `<name>.pub` (to give to the
/// services that talk to it).
struct KeysCommands: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Make and show the services' CURVE key pairs.",
        subcommands: [Make.self, Show.self, APIKey.self]
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

    /// An App Store Server API key pair, as App Store Connect hands one out: the private key a
    /// backend signs its requests' tokens with, and the public key the notification service checks
    /// them with (`service.serverAPIKeys[].publicKeyFile`).
    struct APIKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "api-key",
            abstract: "Make an App Store Server API key pair: NAME.p8 (the P-256 private key, PKCS#8 PEM, mode 0600, for the backend) and NAME.pem (its public key, for the notification service)."
        )

        @Option(name: .customLong("dir"), help: "Where the key files go (made 0700 when missing).")
        var directory = "data/keys"

        @Flag(name: .customLong("if-missing"), help: "Leave a key pair that exists alone, rather than failing.")
        var ifMissing = false

        @Argument(help: "Name of the key pair.")
        var name = "server-api"

        func run() throws {
            let directory = URL(fileURLWithPath: directory, isDirectory: true)
            let privatePath = directory.appendingPathComponent("\(name).p8").path
            let publicPath = directory.appendingPathComponent("\(name).pem").path
            let manager = FileManager.default
            if manager.fileExists(atPath: privatePath) || manager.fileExists(atPath: publicPath) {
                guard ifMissing else { throw Failure(description: "\(privatePath) or \(publicPath) exists: remove both first, or give --if-missing") }
                let key = try P256.Signing.PrivateKey(pemRepresentation: try String(contentsOfFile: privatePath, encoding: .utf8))
                guard try P256.Signing.PublicKey(pemRepresentation: try String(contentsOfFile: publicPath, encoding: .utf8)).rawRepresentation == key.publicKey.rawRepresentation else {
                    throw Failure(description: "\(publicPath) is not the public key of \(privatePath)")
                }
                print("\(name) kept \(privatePath) \(publicPath)")
                return
            }
            try manager.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let key = P256.Signing.PrivateKey()
            guard manager.createFile(atPath: privatePath, contents: Data(key.pemRepresentation.utf8), attributes: [.posixPermissions: 0o600]) else {
                throw Failure(description: "cannot write \(privatePath)")
            }
            try Data(key.publicKey.pemRepresentation.utf8).write(to: URL(fileURLWithPath: publicPath))
            print("\(name) made \(privatePath) \(publicPath)")
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
