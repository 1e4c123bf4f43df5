import Crypto
import Foundation
import ReceiptFormat
import StoreBus
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Testing
import X509

@testable import Notifications

/// Signed notifications kept in compact form (``CompactJWS``), against their plain twin: the same
/// notifications kept whole.
struct CompactJWSTests {
    /// A key with a chain of three certificates in its header, as the receipt service signs with.
    static func signingKey() throws -> SigningKey {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("StoreBus compact JWS test") }
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey), notValidBefore: Date(), notValidAfter: Date() + 3_600,
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256, extensions: .init(), issuerPrivateKey: .init(key))
        return SigningKey(certificate: certificate, privateKey: key, issuers: [certificate, certificate])
    }

    /// A signed notification as the receipt service makes one: its transaction signed inside it,
    /// and for a subscription its renewal info too; `text` in its fields.
    static func signed(_ key: SigningKey, text: String, renewal: Bool) throws -> String {
        var transaction = JWSTransactionDecodedPayload()
        transaction.transactionId = "1000000000000\(text.utf8.count)"
        transaction.bundleId = text
        transaction.signedDate = 1_780_000_000_000
        var data = NotificationData()
        data.bundleId = text
        data.environment = "Sandbox"
        data.signedTransactionInfo = try JWS.sign(transaction, with: key)
        if renewal {
            var info = JWSRenewalInfoDecodedPayload()
            info.originalTransactionId = transaction.transactionId
            info.autoRenewProductId = text
            data.signedRenewalInfo = try JWS.sign(info, with: key)
        }
        var payload = ResponseBodyV2DecodedPayload()
        payload.notificationType = "ONE_TIME_CHARGE"
        payload.notificationUUID = UUID().uuidString.lowercased()
        payload.data = data
        payload.version = "2.0"
        payload.signedDate = 1_780_000_000_000
        return try JWS.sign(payload, with: key)
    }

    /// `jws`'s header, when it is a compact JWS.
    static func header(of jws: String) -> CompactJWS.Header? {
        var jws = jws
        return jws.withUTF8 { bytes in CompactJWS.Segments(bytes).map { CompactJWS.Header(segment: $0.header) } }
    }

    /// `jws` in compact form under `header`.
    static func compact(_ jws: String, header: CompactJWS.Header) -> String? {
        var jws = jws
        return jws.withUTF8 { bytes in CompactJWS.Segments(bytes).flatMap { CompactJWS.compact($0, header: header) } }
    }

    static let texts = ["com.example.app", "tilde ~ in ~~ the ~ payload~", "~", "quote \" back \\ slash / é 日 🎉", "\n\t\u{1}"]

    @Test("a signed notification comes back byte for byte from its compact form, a fifth of its size or less; its header is taken out wherever it recurs")
    func roundTrip() throws {
        let key = try Self.signingKey()
        for text in Self.texts {
            for renewal in [false, true] {
                let jws = try Self.signed(key, text: text, renewal: renewal)
                let header = try #require(Self.header(of: jws))
                let compact = try #require(Self.compact(jws, header: header))
                #expect(CompactJWS.kind(compact) == .compact(digest: Substring(header.digest)))
                #expect(CompactJWS.expand(compact, header: header) == jws)
                #expect(compact.utf8.count * 5 <= jws.utf8.count, "\(compact.utf8.count) of \(jws.utf8.count) bytes")
                #expect(!compact.contains(header.segment))
                // Its offsets: one for the transaction's header, another for the renewal info's.
                let offsets = compact.split(separator: "~", maxSplits: 3, omittingEmptySubsequences: false)[2]
                #expect(offsets.split(separator: ",").count == (renewal ? 2 : 1), "\(offsets)")
                // Under another header it does not expand to the same JWS.
                #expect(CompactJWS.expand(compact, header: CompactJWS.Header(segment: "eyJhbGciOiJFUzI1NiJ9")) != jws)
            }
        }
    }

    @Test("what is not a JWS the form takes is kept as it is: no three segments, a non-base64url byte, a payload not written by the one encoding, a ~ in the signature")
    func notCompacted() throws {
        let header = CompactJWS.Header(segment: "eyJhbGciOiJFUzI1NiJ9")
        func compact(_ text: String) -> String? {
            Self.header(of: text).flatMap { Self.compact(text, header: $0) }
        }
        for text in ["", "p1", "a.b", "a.b.c.d", "eyJ9..sig", ".eyJ9.sig", "eyJ9.eyJ~.sig", "eyJ9.eyJ=.sig", "eyJ9.e y.sig", "eyJ9.eyJ9.s~g"] {
            #expect(compact(text) == nil, "\(text)")
        }
        // "eyJ9" is {"}; "eyK" carries bits past its two bytes, "e" is no whole byte.
        #expect(compact("eyJhbGciOiJFUzI1NiJ9.eyJ9.c2ln") != nil)
        #expect(compact("eyJhbGciOiJFUzI1NiJ9.eyK.c2ln") == nil)
        #expect(compact("eyJhbGciOiJFUzI1NiJ9.e.c2ln") == nil)
        // A payload of any bytes (0xFF 0xEE is not UTF-8) comes back as it was.
        let bytes = "eyJhbGciOiJFUzI1NiJ9._-4.c2ln"
        let kept = try #require(compact(bytes))
        #expect(CompactJWS.expand(kept, header: try #require(Self.header(of: bytes))) == bytes)
        // A JWS under another header than the one given is not made compact under it.
        #expect(Self.compact("eyJ9.eyJ9.c2ln", header: header) == nil)
        // Kept as it is, a text that begins with "~" reads back whole.
        for text in ["~", "~~", "~abc", "a~"] {
            #expect(CompactJWS.kind(CompactJWS.escaped(text)) == .plain(Substring(text)))
        }
    }

    @Test("a compact form damaged in storage does not expand")
    func damaged() throws {
        let key = try Self.signingKey()
        let jws = try Self.signed(key, text: "com.example.app", renewal: true)
        let header = try #require(Self.header(of: jws))
        let compact = try #require(Self.compact(jws, header: header))
        let parts = compact.split(separator: "~", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        for offsets in ["x", "1,,2", "99999999", "5,1", "1234567890"] {
            #expect(CompactJWS.expand(["", parts[1], offsets, parts[3]].joined(separator: "~"), header: header) == nil, "\(offsets)")
        }
        #expect(CompactJWS.expand("~" + header.digest, header: header) == nil)
    }

    @Test("notifications appended compact read back as those appended whole, their pages the same bytes; the log a quarter of the size or less")
    func storeMatchesPlainTwin() async throws {
        let directory = try TemporaryDirectory(prefix: "ntcompact")
        defer { directory.remove() }
        let key = try Self.signingKey()
        var notifications: [Storebus_Notifications_V1_Notification] = []
        for (index, text) in (Self.texts + ["~~", "p1", "eyJ9.eyK.c2ln"]).enumerated() {
            for renewal in [false, true] {
                let signed = index < Self.texts.count ? try Self.signed(key, text: text, renewal: renewal) : text
                notifications.append(
                    .with {
                        $0.notificationUuid = "n\(notifications.count)"
                        $0.notificationType = "ONE_TIME_CHARGE"
                        $0.signedPayload = signed
                        $0.transactionID = "t\(index)"
                        $0.appBundleID = puzzle
                    })
            }
        }
        let appended = notifications
        var pages: [[UInt8]] = []
        var read: [[Storebus_Notifications_V1_Notification]] = []
        var sizes: [Int] = []
        for compact in [false, true] {
            let database = try StoreDatabase(
                directory: directory.url, name: compact ? "compact" : "plain", durability: .normal, migrator: NotificationsSchema.migrator)
            let store = NotificationStore(database: database)
            try await database.write { db in
                for notification in appended {
                    _ = try NotificationStore.append(db, notification, webhooks: WebhookURLs(), environment: "Sandbox", headers: store.headers, compact: compact)
                }
            }
            pages.append(try await store.page(app: puzzle, after: 0, limit: 100))
            read.append(try await store.read(app: puzzle, after: 0, limit: 100).notifications)
            sizes.append(try await database.read { db in try db.value(Int.self, cached: "SELECT SUM(LENGTH(json)) FROM storebus_event") ?? 0 })
            // A store opened anew reads its headers from the database.
            let reopened = NotificationStore(database: database)
            #expect(try await reopened.page(app: puzzle, after: 3, limit: 5) == store.page(app: puzzle, after: 3, limit: 5))
            try database.close()
        }
        #expect(read[0].map(\.signedPayload) == notifications.map(\.signedPayload))
        #expect(read[1] == read[0])
        #expect(pages[1] == pages[0])
        #expect(sizes[1] * 4 <= sizes[0], "\(sizes)")
    }

    @Test("a notification kept under a header the log does not have is DATA_LOSS, not a wrong signed payload")
    func missingHeader() async throws {
        let scratch = try ScratchNotifications(prefix: "ntheader")
        defer { scratch.directory.remove() }
        let (database, store) = (scratch.database, scratch.store)
        let jws = try Self.signed(try Self.signingKey(), text: "com.example.app", renewal: false)
        try await database.write { db in
            _ = try NotificationStore.append(
                db,
                .with {
                    $0.signedPayload = jws; $0.appBundleID = puzzle
                }, webhooks: WebhookURLs(), environment: "Sandbox", headers: store.headers, compact: true)
            try db.execute(cached: "DELETE FROM nt_jws_header")
        }
        let fresh = NotificationStore(database: database)
        await #expect { _ = try await fresh.read(app: puzzle, after: 0, limit: 10) } throws: { ($0 as? RPCError)?.code == .dataLoss }
        await #expect { _ = try await fresh.page(app: puzzle, after: 0, limit: 10) } throws: { ($0 as? RPCError)?.code == .dataLoss }
        try database.close()
    }
}
