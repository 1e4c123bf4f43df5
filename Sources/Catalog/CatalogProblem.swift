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
}
