import StoreBusPostgres
import StoreBusStorage
import StoreSchema

/// The signing authority's key pairs in the receipt service's PostgreSQL database (`rc_signing_key`),
/// shared by all its instances: they sign with one root and one intermediate, and any of them can
/// issue a leaf the others take up at their next ``SigningAuthority/reload()``. An update holds a
/// lock of its own (an advisory lock for the transaction), so that instances starting together make
/// one root between them. The private keys are in the database as they were in the data directory:
/// its role and backups are to be guarded as the keys are.
struct PostgresKeyStore: SigningKeyStore {
    let database: PostgresDatabase

    func load() throws -> [String: StoredKeyPair] {
        try database.readBlocking { db in try Self.read(db) }
    }

    func update<T>(_ body: (inout [String: StoredKeyPair]) throws -> T) throws -> T {
        try database.writeBlocking { db in
            try db.execute(cached: "SELECT pg_advisory_xact_lock(7130573)")
            let before = try Self.read(db)
            var kept = before
            let result = try body(&kept)
            for (name, pair) in kept where before[name] != pair {
                try db.execute(
                    cached: """
                        INSERT INTO rc_signing_key (name, certificate_pem, key_pem, created_ms) VALUES (?, ?, ?, ?)
                        ON CONFLICT (name) DO UPDATE SET certificate_pem = excluded.certificate_pem, key_pem = excluded.key_pem, created_ms = excluded.created_ms
                        """, arguments: [name, pair.certificatePEM, pair.keyPEM, EpochMilliseconds.now])
            }
            for name in before.keys where kept[name] == nil {
                try db.execute(cached: "DELETE FROM rc_signing_key WHERE name = ?", arguments: [name])
            }
            return result
        }
    }

    static func read(_ db: any SQLConnection) throws -> [String: StoredKeyPair] {
        var kept: [String: StoredKeyPair] = [:]
        try db.forEachRow(cached: "SELECT name, certificate_pem, key_pem FROM rc_signing_key") {
            kept[$0.text(0)] = StoredKeyPair(certificatePEM: $0.text(1), keyPEM: $0.text(2))
        }
        return kept
    }
}
