/// Something wrong in a catalog file: where (the file and the field's path) and why.
public struct CatalogProblem: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file.
    public let file: String
    /// The field, as a path such as `apps[0].products[2].prices.FRA`.
    public let field: String
    /// Why it is not acceptable.
    public let reason: String

    public init(file: String, field: String, reason: String) {
        self.file = file
        self.field = field
        self.reason = reason
    }

    public var description: String { field.isEmpty ? "\(file): \(reason)" : "\(file): \(field): \(reason)" }
}

/// A catalog file that was rejected, with every problem found.
public struct CatalogLoadError: Error, Sendable, CustomStringConvertible {
    public let problems: [CatalogProblem]
    public var description: String {
        problems.map(\.description).joined(separator: "\n")
    }

    /// Problems named in an error message (``summary``).
    public static let summarizedProblems = 10
    /// Text (field paths and reasons) that the problems listed in one answer may hold: a file can
    /// have tens of thousands of problems, and a reason quotes the value it refuses, which can be
    /// megabytes; the answer must stay well under the 4 MiB message limit.
    public static let maxReportedBytes = 512 * 1024
    /// Longest field path or reason in a report, in bytes; longer ones are cut.
    public static let maxReportedTextBytes = 1024

    /// The first problems, each cut to ``maxReportedTextBytes``, that fit in ``maxReportedBytes``,
    /// and how many more there are.
    public func reported() -> (problems: [CatalogProblem], more: Int) {
        var shown: [CatalogProblem] = []
        var bytes = 0
        for problem in problems {
            let cut = Self.cut(problem)
            bytes += cut.file.utf8.count + cut.field.utf8.count + cut.reason.utf8.count
            if bytes > Self.maxReportedBytes { break }
            shown.append(cut)
        }
        return (shown, problems.count - shown.count)
    }

    /// The first ``summarizedProblems`` problems, each cut to ``maxReportedTextBytes``, one per line,
    /// then how many more there are.
    public var summary: String {
        var lines = problems.prefix(Self.summarizedProblems).map { Self.cut($0).description }
        if problems.count > Self.summarizedProblems {
            lines.append("… and \(problems.count - Self.summarizedProblems) more problems")
        }
        return lines.joined(separator: "\n")
    }

    /// `problem` with its field path and reason each cut to ``maxReportedTextBytes``.
    static func cut(_ problem: CatalogProblem) -> CatalogProblem {
        CatalogProblem(file: problem.file, field: cut(problem.field), reason: cut(problem.reason))
    }

    /// `text` cut to at most ``maxReportedTextBytes`` bytes of UTF-8, on a character boundary, with
    /// an ellipsis when cut.
    static func cut(_ text: String) -> String {
        guard text.utf8.count > maxReportedTextBytes else { return text }
        var kept = ""
        var bytes = 0
        for character in text {
            let size = character.utf8.count
            if bytes + size > maxReportedTextBytes - 3 { break }
            kept.append(character)
            bytes += size
        }
        return kept + "…"
    }
}
