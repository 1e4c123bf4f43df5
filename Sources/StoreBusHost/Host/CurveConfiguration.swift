import Foundation
import StoreBus
import ZeroMQ

/// A process's CURVE settings, from the `curve` object of its config file (paths relative to the
/// file):
///
/// ```json
/// "curve": {
///   "keyFile": "keys/catalog.key",
///   "allowedKeys": ["keys/gateway.pub", "keys/payment-queue.pub"],
///   "serverKeys": {"tcp://10.0.0.2:7302": "keys/payment-queue.pub"},
///   "openEndpoints": [],
///   "plainEndpoints": []
/// }
/// ```
///
/// With it, every TCP link of the process is CURVE (the Ironhouse pattern): its endpoints are
/// CURVE servers that admit only clients whose public key is in `allowedKeys` (a ZAP handler
/// refuses the rest at the handshake), but `openEndpoints`, which admit any CURVE client (the
/// gateway's client endpoint, where API keys say who the client is); every endpoint it connects to
/// must have its server's public key in `serverKeys`. `plainEndpoints` stay plain TCP.
public struct CurveConfiguration: Sendable, Equatable, Decodable {
    /// The process's key pair file (mode 0600).
    public var keyFile: String
    /// Public key files of the processes allowed to connect.
    public var allowedKeys: [String]
    /// Public key file of the server at each endpoint the process connects to.
    public var serverKeys: [String: String]
    /// Bound endpoints open to any CURVE client.
    public var openEndpoints: [String]
    /// Endpoints left plain TCP.
    public var plainEndpoints: [String]

    /// Settings with the given files.
    public init(keyFile: String, allowedKeys: [String] = [], serverKeys: [String: String] = [:], openEndpoints: [String] = [], plainEndpoints: [String] = []) {
        self.keyFile = keyFile
        self.allowedKeys = allowedKeys
        self.serverKeys = serverKeys
        self.openEndpoints = openEndpoints
        self.plainEndpoints = plainEndpoints
    }

    enum CodingKeys: String, CodingKey {
        case keyFile, allowedKeys, serverKeys, openEndpoints, plainEndpoints
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        keyFile = decoder.configPath(try container.decode(String.self, forKey: .keyFile))
        allowedKeys = try container.value(.allowedKeys, default: [String]()).map(decoder.configPath)
        serverKeys = try container.value(.serverKeys, default: [String: String]()).mapValues(decoder.configPath)
        openEndpoints = try container.value(.openEndpoints, default: [])
        plainEndpoints = try container.value(.plainEndpoints, default: [])
    }

    /// The key pair and public keys read from their files, as the links of a context and the
    /// allow-list of its authenticator.
    public func load() throws -> (links: CurveLinks, allowedKeys: [String]) {
        let keyPair = try CurveKeyFile.readKeyPair(at: keyFile)
        let allowed = try allowedKeys.map(CurveKeyFile.readPublicKey(at:))
        let servers = try serverKeys.mapValues(CurveKeyFile.readPublicKey(at:))
        let links = CurveLinks(keyPair: keyPair, serverKeys: servers, openEndpoints: Set(openEndpoints), plainEndpoints: Set(plainEndpoints))
        return (links, allowed)
    }
}
