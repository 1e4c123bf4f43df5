import Foundation
import StoreBus

/// Pages of the admin listings (ListAccountTransactions, ListCharges): a page size from the request
/// and an opaque token naming the last row of the previous page, so that each page is a range query
/// that starts where the last one stopped, whatever was added since.
public enum Paging {
    /// Rows in a page when the request names no size.
    public static let defaultPageSize = 100
    /// The most rows a page holds, whatever the request asks.
    public static let maxPageSize = 1000
    /// The most bytes of transactions' JSON a page holds (beyond its first): a transaction carries up
    /// to 4 KiB of request data, and a restored one its original's too, so 1000 of them could pass
    /// the message size limit.
    public static let maxPageBytes = 1 << 20

    /// The page size for a request's `page_size` (0: the default; larger than the maximum: the maximum).
    public static func size(_ requested: UInt32) -> Int {
        requested == 0 ? defaultPageSize : min(Int(requested), maxPageSize)
    }

    /// A page size a caller of the store asked for, within 1...``maxPageSize``.
    static func clamped(_ limit: Int) -> Int {
        min(max(limit, 1), maxPageSize)
    }

    /// The token of a position: the listing's `kind` and the last row's number (a transaction
    /// identifier, a charge id), base64url without padding.
    static func token(_ kind: String, after row: Int64) -> String {
        token(kind, afterKey: String(row))
    }

    /// The row number in a token made by ``token(_:after:)`` for `kind`; nil for an empty token (the
    /// first page); INVALID_ARGUMENT naming `pageToken` for anything else.
    static func row(after token: String, kind: String) throws -> Int64? {
        guard let key = try key(after: token, kind: kind, maxBytes: 128) else { return nil }
        guard let row = Int64(key) else { throw invalid(token) }
        return row
    }

    /// The token of a position named by text (an account): the listing's `kind` and the last
    /// row's key, base64url without padding.
    static func token(_ kind: String, afterKey key: String) -> String {
        Data("\(kind)\n\(key)".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The key in a token made by ``token(_:afterKey:)`` for `kind` (a token of at most `maxBytes`);
    /// nil for an empty token (the first page); INVALID_ARGUMENT naming `pageToken` for anything else.
    static func key(after token: String, kind: String, maxBytes: Int = 512) throws -> String? {
        guard !token.isEmpty else { return nil }
        var base64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard token.utf8.count <= maxBytes, let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8) else {
            throw invalid(token)
        }
        guard let newline = text.firstIndex(of: "\n"), text[..<newline] == kind else { throw invalid(token) }
        return String(text[text.index(after: newline)...])
    }

    private static func invalid(_ token: String) -> RPCError {
        RPCError.invalidArgument(field: "pageToken", "is not a token this listing gave (\"\(token.prefix(64))\")")
    }
}
