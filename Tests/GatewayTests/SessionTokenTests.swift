import Foundation
import Testing

@testable import Gateway

@Suite("Gateway sessions")
struct SessionTokenTests {
    let claims = SessionClaims(app: "com.example.app", account: "alice", device: "phone", key: "0123abcd", expires: 4_000_000_000)

    @Test("a token signed by one gateway is accepted by another holding the same secret")
    func sharedSecret() throws {
        let token = SessionSigner(secret: "shared secret").token(for: claims)
        #expect(try SessionSigner(secret: "shared secret").claims(of: token) == claims)
    }

    @Test("a token signed with another secret, altered, or malformed is refused as forged")
    func forged() throws {
        let token = SessionSigner(secret: "one").token(for: claims)
        #expect(throws: SessionSigner.Refusal.forged) { try SessionSigner(secret: "two").claims(of: token) }
        // Swap in claims for another account, keeping the MAC.
        let parts = token.split(separator: ".")
        var other = claims
        other.account = "mallory"
        let otherToken = SessionSigner(secret: "x").token(for: other).split(separator: ".")
        let spliced = "\(parts[0]).\(otherToken[1]).\(parts[2])"
        #expect(throws: SessionSigner.Refusal.forged) { try SessionSigner(secret: "one").claims(of: spliced) }
        for garbage in ["", "v1", "v1..", "v2.\(parts[1]).\(parts[2])", "not a token at all"] {
            #expect(throws: SessionSigner.Refusal.forged) { try SessionSigner(secret: "one").claims(of: garbage) }
        }
    }

    @Test("an expired token is refused as expired")
    func expired() throws {
        var old = claims
        old.expires = 1_000
        let token = SessionSigner(secret: "s").token(for: old)
        #expect(throws: SessionSigner.Refusal.expired) { try SessionSigner(secret: "s").claims(of: token) }
    }

    @Test("keys are found by their secret; short and repeated keys are refused at start")
    func keyring() throws {
        let keyring = try APIKeyring([
            APIKey(name: "demo", key: "0123456789abcdef", apps: ["com.example.app"]),
            APIKey(name: "ops", key: "fedcba9876543210", admin: true)
        ])
        #expect(keyring.key(for: "0123456789abcdef")?.name == "demo")
        #expect(keyring.key(for: "0123456789abcdeX") == nil)
        #expect(keyring.key(for: "fedcba9876543210")?.allows(app: "anything") == true)
        #expect(keyring.key(for: "0123456789abcdef")?.allows(app: "com.other") == false)
        #expect(throws: (any Error).self) { try APIKeyring([APIKey(name: "short", key: "abc")]) }
        #expect(throws: (any Error).self) {
            try APIKeyring([APIKey(name: "a", key: "0123456789abcdef"), APIKey(name: "b", key: "0123456789abcdef")])
        }
        #expect(throws: (any Error).self, "an admin key limited to some apps") {
            try APIKeyring([APIKey(name: "ops", key: "fedcba9876543210", apps: ["com.example.app"], admin: true)])
        }
        // Sessions name a key by a digest of its secret; a replaced secret ends them.
        let demo = try #require(keyring.key(for: "0123456789abcdef"))
        #expect(keyring.key(identifier: APIKeyring.identifier(of: demo))?.name == "demo")
        let replaced = try APIKeyring([APIKey(name: "demo", key: "a-new-secret-0000", apps: ["com.example.app"])])
        #expect(replaced.key(identifier: APIKeyring.identifier(of: demo)) == nil)
    }
}
