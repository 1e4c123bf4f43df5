/// A process could not start: an endpoint could not be bound, a directory could not be written.
public struct StartupError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, as a sentence.
    public let description: String
    /// Creates the error.
    public init(_ description: String) { self.description = description }
}
