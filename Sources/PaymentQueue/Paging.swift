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

    /// The token of a position: `kind` and its fields, base64url without padding.
    static func token(_ kind: String, _ fields: [String]) -> String {
        Data(([kind] + fields).joined(separator: "\n").utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The fields of a token made by ``token(_:_:)`` for `kind` with `count` fields; nil for an empty
    /// token (the first page); INVALID_ARGUMENT naming `pageToken` for anything else.
    static func fields(of token: String, kind: String, count: Int) throws -> [String]? {
        guard !token.isEmpty else { return nil }
        var base64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard token.utf8.count <= 512, let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8) else {
            throw invalid(token)
        }
        let parts = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == count + 1, parts[0] == kind else { throw invalid(token) }
        return Array(parts.dropFirst())
    }

    /// INVALID_ARGUMENT naming `pageToken`.
    static func invalid(_ token: String) -> RPCError {
        RPCError.invalidArgument(field: "pageToken", "is not a token this listing gave (\"\(token.prefix(64))\")")
    }
}
