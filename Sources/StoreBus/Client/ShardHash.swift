/// How a queue's account is placed in a shard: FNV-1a (64-bit) of `<app>|<account>`, modulo the
/// number of shards. The same in every process and every language, and fixed: a database's shards
/// never change number.
public enum ShardHash {
    public static func shard(app: String, account: String, count: UInt32) -> UInt32 {
        guard count > 1 else { return 0 }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in app.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        hash = (hash ^ UInt64(UInt8(ascii: "|"))) &* 0x0000_0100_0000_01b3
        for byte in account.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return UInt32(hash % UInt64(count))
    }

    /// The shard of a queue key `<app>|<account>|<device>` (its app and account); a key of another
    /// shape hashes whole.
    public static func shard(ofQueueKey key: String, count: UInt32) -> UInt32 {
        guard count > 1 else { return 0 }
        let parts = key.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return shard(app: key, account: "", count: count) }
        return shard(app: String(parts[0]), account: String(parts[1]), count: count)
    }
}
