import Foundation

/// The field numbers of `message` in `file` of proto-schemas/ (for example
/// `storebus/receipt/v1/receipt.proto`): what a hand-written encoder of the message must cover.
public func protoFieldNumbers(of message: String, in file: String) throws -> [Int] {
    let path = deployDirectory.deletingLastPathComponent().appendingPathComponent("proto-schemas").appendingPathComponent(file)
    let lines = try String(contentsOf: path, encoding: .utf8).components(separatedBy: "\n")
    let field = try Regex(#"^\s*(?:repeated\s+|optional\s+)?[\w.]+\s+\w+\s*=\s*(\d+)\s*(?:\[.*\])?\s*;"#)
    guard let start = lines.firstIndex(where: { $0.hasPrefix("message \(message) {") }) else { throw TestingError("no message \(message) in \(file)") }
    var numbers: [Int] = []
    for line in lines[(start + 1)...] {
        if line.hasPrefix("}") { break }
        if let match = line.firstMatch(of: field), let number = Int(match.output[1].substring ?? "") { numbers.append(number) }
    }
    return numbers.sorted()
}
