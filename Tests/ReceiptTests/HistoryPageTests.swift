import Foundation
import StoreBus
import Testing

@testable import Receipt

/// The App Store Server API's history pages: 20 at a time in a stable order, each revision going on
/// after the last page, whatever came since.
struct HistoryPageTests {
    typealias Entry = (ms: Int64, id: String)

    /// Every page of `all`, following the revisions.
    static func pages(_ all: [Entry], descending: Bool = false) throws -> [[String]] {
        var pages: [[String]] = []
        var revision = ""
        while true {
            let page = try HistoryPage(all, key: { ($0.ms, $0.id) }, descending: descending, revision: revision)
            pages.append(page.items.map(\.id))
            revision = page.revision
            if !page.hasMore { return pages }
        }
    }

    @Test("45 transactions: pages of 20, 20 and 5, oldest first, none twice; descending the reverse; equal times ordered by id")
    func paging() throws {
        // Shuffled, with pairs bought in the same millisecond.
        let all: [Entry] = (0..<45).map { (Int64(1_000 + $0 / 2), String(format: "%04d", $0)) }.shuffled()
        let ascending = try Self.pages(all)
        #expect(ascending.map(\.count) == [20, 20, 5])
        #expect(ascending.flatMap { $0 } == (0..<45).map { String(format: "%04d", $0) })
        let descending = try Self.pages(all, descending: true)
        #expect(descending.flatMap { $0 } == (0..<45).reversed().map { String(format: "%04d", $0) })
    }

    @Test("the last page's revision gives what came after it, later; an empty history gives a revision too; a forged revision is refused")
    func revisions() throws {
        let first: [Entry] = [(1_000, "1"), (2_000, "2")]
        let page = try HistoryPage(first, key: { ($0.ms, $0.id) }, descending: false, revision: "")
        #expect(page.items.map(\.id) == ["1", "2"] && !page.hasMore)
        let later = try HistoryPage(first + [(3_000, "3")], key: { ($0.ms, $0.id) }, descending: false, revision: page.revision)
        #expect(later.items.map(\.id) == ["3"])
        let empty = try HistoryPage([Entry](), key: { ($0.ms, $0.id) }, descending: false, revision: "")
        #expect(empty.items.isEmpty && !empty.revision.isEmpty && !empty.hasMore)
        #expect(throws: RPCError.self) { try HistoryPage(first, key: { ($0.ms, $0.id) }, descending: false, revision: "not a revision!") }
    }
}
