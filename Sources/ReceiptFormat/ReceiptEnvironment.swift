/// Which store a deployment is: its receipts say so, and a receipt of the other one is refused
/// with 21007 or 21008, as Apple's two verifyReceipt endpoints do.
public enum ReceiptEnvironment: String, Sendable, Codable, CaseIterable {
    case sandbox = "Sandbox"
    case production = "Production"

    /// The environment named `name` in any case (`sandbox`, `Production`), or nil.
    public init?(name: String) {
        guard let environment = Self.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else { return nil }
        self = environment
    }

    /// The value a configuration file gives: `sandbox` or `production` (any case).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let environment = Self(name: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "must be sandbox or production, not \(text.prefix(64))")
        }
        self = environment
    }
}
