import Foundation
import StoreBus
import StoreBusCommandLine
import StoreBusHost
import StoreBusTesting
import Testing
import ZeroMQ

/// Key files, and the `curve` section of a config file that names them.
struct CurveKeyFileTests {
    @Test("a key pair is made 0600 beside its public key 0644, never overwritten, read back whole; a key pair others may read, or whose keys do not belong together, is refused")
    func keyFiles() throws {
        let directory = try TemporaryDirectory(prefix: "keys")
        defer { directory.remove() }
        let keys = directory.url.appendingPathComponent("keys")
        let made = try CurveKeyFile.make(name: "catalog", in: keys)
        let keyPath = keys.appendingPathComponent("catalog.key").path
        #expect(try FileManager.default.attributesOfItem(atPath: keyPath)[.posixPermissions] as? Int == 0o600)
        #expect(try FileManager.default.attributesOfItem(atPath: keys.appendingPathComponent("catalog.pub").path)[.posixPermissions] as? Int == 0o644)
        #expect(try CurveKeyFile.readKeyPair(at: keyPath) == made)
        #expect(try CurveKeyFile.readPublicKey(at: keys.appendingPathComponent("catalog.pub").path) == made.publicKey)
        #expect(try CurveKeyFile.publicKey(fileOrKey: made.publicKey) == made.publicKey)
        #expect(throws: StartupError.self) { try CurveKeyFile.make(name: "catalog", in: keys) }
        #expect(throws: StartupError.self) { try CurveKeyFile.make(name: "../escape", in: keys) }
        #expect(throws: StartupError.self) { try CurveKeyFile.publicKey(fileOrKey: "not a key") }

        chmod(keyPath, 0o640)
        #expect { try CurveKeyFile.readKeyPair(at: keyPath) } throws: { "\($0)".contains("may be read by others (mode 640): chmod 600 it") }
        chmod(keyPath, 0o600)
        let other = try CurveKeyPair.generate()
        var text = try String(contentsOfFile: keyPath, encoding: .utf8)
        text = text.replacingOccurrences(of: made.publicKey, with: other.publicKey)
        try text.write(toFile: keyPath, atomically: false, encoding: .utf8)
        #expect { try CurveKeyFile.readKeyPair(at: keyPath) } throws: { "\($0)".contains("does not belong to its secret-key") }
    }

    @Test("a config file's curve section: paths from the file's directory, --curve-key in place of keyFile; a key given without a curve section is refused")
    func configSection() throws {
        let directory = try TemporaryDirectory(prefix: "curve-config")
        defer { directory.remove() }
        let keys = directory.url.appendingPathComponent("keys")
        let own = try CurveKeyFile.make(name: "receipt", in: keys)
        let gateway = try CurveKeyFile.make(name: "gateway", in: keys)
        let queue = try CurveKeyFile.make(name: "payment-queue", in: keys)
        try """
        {"rpcEndpoints": ["tcp://0.0.0.0:7303"],
         "curve": {"keyFile": "keys/receipt.key", "allowedKeys": ["keys/gateway.pub"],
                   "serverKeys": {"tcp://pq.internal:7302": "keys/payment-queue.pub"}, "plainEndpoints": ["tcp://127.0.0.1:9"]}}
        """.write(toFile: directory.path("receipt.json"), atomically: true, encoding: .utf8)
        let options = try HostOptions.parse(["--config", directory.path("receipt.json")])
        let configuration = try options.resolve(defaults: HostConfiguration(rpcEndpoints: []), environment: [:])
        let (security, allowed) = try configuration.tcpSecurity()
        #expect(allowed == [gateway.publicKey])
        #expect(security == .curve(CurveLinks(keyPair: own, serverKeys: ["tcp://pq.internal:7302": queue.publicKey], plainEndpoints: ["tcp://127.0.0.1:9"])))

        // systemd's credential copy of the key pair in place of the file's
        let copy = directory.url.appendingPathComponent("credentials")
        let other = try CurveKeyFile.make(name: "receipt", in: copy)
        let overridden = try HostOptions.parse(["--config", directory.path("receipt.json"), "--curve-key", copy.appendingPathComponent("receipt.key").path])
        guard case .curve(let links) = try overridden.resolve(defaults: HostConfiguration(rpcEndpoints: []), environment: [:]).tcpSecurity().security else {
            Issue.record("no CURVE links")
            return
        }
        #expect(links.keyPair == other)

        // Without a curve section: plain TCP on loopback only, unless plain TCP is said explicitly
        let bare = try HostOptions.parse(["--rpc-endpoint", "tcp://127.0.0.1:1"]).resolve(defaults: HostConfiguration(rpcEndpoints: []), environment: [:])
        #expect(try bare.tcpSecurity().security == .plainOnLoopback)
        let plain = try HostOptions.parse(["--rpc-endpoint", "tcp://10.0.0.1:1"]).resolve(defaults: HostConfiguration(rpcEndpoints: []), environment: ["STOREBUS_PLAIN_TCP": "1"])
        #expect(try plain.tcpSecurity().security == .plain)
        #expect { try HostOptions.parse(["--rpc-endpoint", "tcp://127.0.0.1:1", "--curve-key", "x.key"]).resolve(defaults: HostConfiguration(rpcEndpoints: []), environment: [:]) } throws: {
            "\($0)".contains("no curve section")
        }
    }
}
