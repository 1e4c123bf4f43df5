import SwiftProtobuf
import SwiftProtobufPluginLibrary

/// A field's `storebus.options.v1.rules` (proto-schemas/storebus/options/v1/options.proto), read from
/// the options protoc hands over. As for ``ContractOptions``, the plugin does not link the Swift
/// generated from that file: the extension is read as bytes and its fields, all varints, by number.
struct FieldRules: Equatable {
    var minBytes: UInt64 = 0
    var maxBytes: UInt64 = 0
    var minItems: UInt64 = 0
    var maxItems: UInt64 = 0
    var maxValue: UInt64 = 0
    var defined = false
    var name = false
    /// 0 none, 1 app, 2 account, 3 device (`PrincipalPart`).
    var principal: UInt64 = 0
    var idempotencyKey = false

    /// `rules`: field 50102 of FieldOptions.
    static let extensionField = MessageExtension<OptionalExtensionField<ProtobufBytes>, Google_Protobuf_FieldOptions>(
        _protobuf_fieldNumber: 50102, fieldName: "storebus.options.v1.rules"
    )

    /// The rules of `field`, nil when it has none; throws for a rule its type cannot have.
    static func of(_ field: FieldDescriptor) throws -> FieldRules? {
        let options = try Google_Protobuf_FieldOptions(
            serializedBytes: try field.options.serializedBytes() as [UInt8], extensions: SimpleExtensionMap([extensionField])
        )
        guard let bytes = options.getExtensionValue(ext: extensionField) else { return nil }
        var rules = FieldRules()
        var reader = VarintReader(bytes: Array(bytes))
        while let key = try reader.next() {
            guard key & 7 == 0 else { throw GenerationError("\(field.fullName): storebus.options.v1.rules holds a field that is not a varint") }
            let value = try reader.varint()
            switch key >> 3 {
            case 1: rules.minBytes = value
            case 2: rules.maxBytes = value
            case 3: rules.minItems = value
            case 4: rules.maxItems = value
            case 5: rules.maxValue = value
            case 6: rules.defined = value != 0
            case 7: rules.name = value != 0
            case 8: rules.principal = value
            case 9: rules.idempotencyKey = value != 0
            default: break
            }
        }
        try rules.check(for: field)
        return rules == FieldRules() ? nil : rules
    }

    /// Whether the rules check the value (not only fill it from the principal or the metadata).
    var checksValue: Bool {
        minBytes > 0 || maxBytes > 0 || minItems > 0 || maxItems > 0 || maxValue > 0 || defined || name
    }

    private func check(for field: FieldDescriptor) throws {
        let place = field.fullName
        let isText = field.type == .string || field.type == .bytes
        let isUnsigned = [.uint32, .uint64, .fixed32, .fixed64].contains(field.type)
        if (minBytes > 0 || maxBytes > 0) && !isText { throw GenerationError("\(place): min_bytes and max_bytes are for strings and bytes") }
        if (minItems > 0 || maxItems > 0) && !field.isRepeated { throw GenerationError("\(place): min_items and max_items are for repeated fields") }
        if maxValue > 0 && !isUnsigned { throw GenerationError("\(place): max_value is for unsigned integers") }
        if defined && field.type != .enum { throw GenerationError("\(place): defined is for enums") }
        if (name || principal != 0 || idempotencyKey) && (field.type != .string || field.isRepeated) {
            throw GenerationError("\(place): name, principal and idempotency_key are for singular strings")
        }
        if field.isMap || field.realContainingOneof != nil { throw GenerationError("\(place): rules are not supported on maps and oneof members") }
        if maxBytes > 0 && minBytes > maxBytes { throw GenerationError("\(place): min_bytes is above max_bytes") }
        if maxItems > 0 && minItems > maxItems { throw GenerationError("\(place): min_items is above max_items") }
        if principal > 3 { throw GenerationError("\(place): unknown principal part \(principal)") }
    }

    /// The sentence of a length rule, as the server says it: "must be 1 to 64 bytes".
    static func rangeSentence(min: UInt64, max: UInt64, unit: String) -> String {
        switch (min, max) {
        case (0, let max): return "must be at most \(max) \(unit)"
        case (let min, 0): return "must be at least \(min) \(unit)"
        case let (min, max): return "must be \(min) to \(max) \(unit)"
        }
    }
}

/// Reads protobuf wire-format keys and varints.
struct VarintReader {
    let bytes: [UInt8]
    var offset = 0

    /// The next key, nil at the end.
    mutating func next() throws -> UInt64? {
        offset < bytes.count ? try varint() : nil
    }

    mutating func varint() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            value |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
            if shift > 63 { break }
        }
        throw GenerationError("storebus.options.v1.rules: a truncated or overlong varint")
    }
}

/// What the field checks of the contract need to know about its messages: which have rules, or hold
/// messages that have them, and which messages are requests.
struct RuleIndex {
    private(set) var rules: [String: FieldRules] = [:]
    private var checks: [String: Bool] = [:]
    private var principals: [String: Bool] = [:]

    init(files: [FileDescriptor]) throws {
        for file in files {
            for message in Self.allMessages(of: file) {
                for field in message.fields {
                    if let found = try FieldRules.of(field) { rules[field.fullName] = found }
                }
            }
        }
    }

    /// Every message of `file`, nested ones included.
    static func allMessages(of file: FileDescriptor) -> [Descriptor] {
        func walk(_ message: Descriptor) -> [Descriptor] { [message] + message.messages.flatMap(walk) }
        return file.messages.flatMap(walk)
    }

    /// Whether checking `message` checks any value (its own fields' or its messages').
    mutating func hasChecks(_ message: Descriptor) -> Bool {
        transitive(message, memo: \.checks) { $0.checksValue }
    }

    /// Whether `message` or a message it holds has a principal field.
    mutating func hasPrincipal(_ message: Descriptor) -> Bool {
        transitive(message, memo: \.principals) { $0.principal != 0 }
    }

    private mutating func transitive(_ message: Descriptor, memo: WritableKeyPath<RuleIndex, [String: Bool]>, _ test: (FieldRules) -> Bool) -> Bool {
        if let known = self[keyPath: memo][message.fullName] { return known }
        self[keyPath: memo][message.fullName] = false // a cycle adds nothing
        var found = false
        for field in message.fields {
            if let rules = rules[field.fullName], test(rules) { found = true }
            if field.type == .message, !field.isMap, transitive(field.messageType, memo: memo, test) { found = true }
        }
        self[keyPath: memo][message.fullName] = found
        return found
    }
}
