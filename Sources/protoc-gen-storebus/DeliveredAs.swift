import SwiftProtobuf
import SwiftProtobufPluginLibrary

/// The contract's `delivered_as` option (options.proto): a member of an event message's oneof names
/// the member of another message's oneof it is delivered as (the payment queue's QueueEvent members
/// as the gateway's ObserverEvent callbacks). Written into module StoreSchema, per event message and
/// delivered message:
/// - `deliveredAs<Target>`: the target's oneof value for an event (nil for a member delivered as
///   none), its fields copied;
/// - `deliveredVerbatimAs<Target>`: the members whose message has exactly the target's fields, by
///   proto3 JSON name, so that a reader of JSON may copy such a member's JSON as it is.
/// The generator refuses a target member whose fields the event member does not all have with the
/// same number, name, type and label: the copy could then lose or misread a field.
struct DeliveredAs {
    /// `delivered_as`: field 50104 of FieldOptions.
    static let extensionField = MessageExtension<OptionalExtensionField<ProtobufString>, Google_Protobuf_FieldOptions>(
        _protobuf_fieldNumber: 50104, fieldName: "storebus.options.v1.delivered_as"
    )

    /// One event member and the member it is delivered as.
    struct Delivery {
        let source: FieldDescriptor
        let target: FieldDescriptor
        /// The target's message has exactly the source's fields.
        let verbatim: Bool
    }

    let files: [FileDescriptor]
    let namer: SwiftProtobufNamer

    /// The `delivered_as` target named by `field`'s option, nil without one.
    func target(of field: FieldDescriptor) throws -> FieldDescriptor? {
        let options = try Google_Protobuf_FieldOptions(
            serializedBytes: try field.options.serializedBytes() as [UInt8], extensions: SimpleExtensionMap([Self.extensionField])
        )
        guard let name = options.getExtensionValue(ext: Self.extensionField), !name.isEmpty else { return nil }
        let place = field.fullName
        guard let dot = name.lastIndex(of: ".") else { throw GenerationError("\(place): delivered_as \(name) is not Message.field") }
        let messageName = String(name[..<dot]), fieldName = String(name[name.index(after: dot)...])
        guard let message = files.lazy.flatMap(\.messages).first(where: { $0.fullName == messageName }) else {
            throw GenerationError("\(place): delivered_as names \(messageName), which no file given to protoc declares")
        }
        guard let target = message.fields.first(where: { $0.name == fieldName }), target.realContainingOneof != nil else {
            throw GenerationError("\(place): delivered_as names \(name), which is not a member of a oneof")
        }
        guard field.realContainingOneof != nil, field.type == .message, target.type == .message else {
            throw GenerationError("\(place): delivered_as is for oneof members of message type, delivered as the same")
        }
        return target
    }

    /// Whether `source` carries every field of `target` (same number, name, type, label and type
    /// name), and whether it has no other.
    static func compatibility(_ source: Descriptor, _ target: Descriptor) -> (compatible: Bool, exact: Bool) {
        for field in target.fields {
            guard let same = source.fields.first(where: { $0.number == field.number }),
                  same.name == field.name, same.type == field.type, same.isRepeated == field.isRepeated,
                  same.messageType?.fullName == field.messageType?.fullName, same.enumType?.fullName == field.enumType?.fullName
            else { return (false, false) }
        }
        return (true, source.fields.count == target.fields.count)
    }

    func generate(into outputs: any GeneratorOutputs) throws {
        for file in files {
            var printer = CodePrinter(indent: "    ".unicodeScalars)
            var wrote = false
            for message in file.messages {
                var deliveries: [String: [Delivery]] = [:]
                var targets: [String: Descriptor] = [:]
                for field in message.fields {
                    guard let target = try target(of: field) else { continue }
                    let fit = Self.compatibility(field.messageType!, target.messageType!)
                    guard fit.compatible else {
                        throw GenerationError("\(field.fullName): \(field.messageType!.fullName) lacks a field of \(target.messageType!.fullName), which it is delivered as")
                    }
                    deliveries[target.containingType.fullName, default: []].append(Delivery(source: field, target: target, verbatim: fit.exact))
                    targets[target.containingType.fullName] = target.containingType
                }
                for (targetName, list) in deliveries.sorted(by: { $0.key < $1.key }) {
                    if !wrote {
                        printer.print(
                            "// DO NOT EDIT.",
                            "// Generated by protoc-gen-storebus from \(file.name).",
                            "// Regenerate with `make protos`.",
                            "",
                            newlines: true
                        )
                        wrote = true
                    }
                    try write(message: message, target: targets[targetName]!, list, into: &printer)
                }
            }
            if wrote { try outputs.add(fileName: ClientPart.base(file) + ".delivered.swift", contents: printer.content) }
        }
    }

    private func write(message: Descriptor, target: Descriptor, _ list: [Delivery], into printer: inout CodePrinter) throws {
        let oneofs = Set(list.map { $0.source.realContainingOneof!.name })
        let targetOneofs = Set(list.map { $0.target.realContainingOneof!.name })
        guard oneofs.count == 1, targetOneofs.count == 1 else {
            throw GenerationError("\(message.fullName): delivered_as members must be of one oneof, delivered into one oneof of \(target.fullName)")
        }
        let oneof = list[0].source.realContainingOneof!
        let targetOneof = list[0].target.realContainingOneof!
        let typeName = namer.fullName(message: message)
        let targetType = namer.fullName(message: target)
        let suffix = NamingUtils.toUpperCamelCase(target.name)
        let property = namer.messagePropertyName(oneof: oneof).name
        printer.print("extension \(typeName) {", newlines: true)
        printer.indent()
        printer.print(
            "/// The member of `\(target.fullName)`'s `\(targetOneof.name)` this value is delivered as (the",
            "/// contract's `delivered_as`), its fields copied; nil for a member delivered as none.",
            "public var deliveredAs\(suffix): \(namer.fullName(oneof: targetOneof))? {",
            newlines: true
        )
        printer.indent()
        printer.print("switch \(property) {", newlines: true)
        for delivery in list {
            let sourceCase = namer.messagePropertyNames(field: delivery.source, prefixed: "", includeHasAndClear: false).name
            let targetCase = namer.messagePropertyNames(field: delivery.target, prefixed: "", includeHasAndClear: false).name
            printer.print("case .\(sourceCase)(let value)?:", newlines: true)
            printer.indent()
            let copies = delivery.target.messageType!.fields.map { field -> String in
                let name = namer.messagePropertyNames(field: field, prefixed: "", includeHasAndClear: false).name
                return "$0.\(name) = value.\(name)"
            }
            printer.print("return .\(targetCase)(\(namer.fullName(message: delivery.target.messageType!)).with {", newlines: true)
            printer.indent()
            for copy in copies { printer.print(copy, newlines: true) }
            printer.outdent()
            printer.print("})", newlines: true)
            printer.outdent()
        }
        printer.print("default:", "    return nil", "}", newlines: true)
        printer.outdent()
        printer.print("}", "", newlines: true)
        let verbatim = list.filter(\.verbatim).map { "\"\($0.source.jsonName ?? $0.source.name)\": \"\($0.target.jsonName ?? $0.target.name)\"" }
        printer.print(
            "/// The members delivered as a member of exactly the same fields, by proto3 JSON name (this",
            "/// message's → `\(targetType)`'s): such a member's JSON is the delivered member's.",
            "public static let deliveredVerbatimAs\(suffix): [String: String] = [\(verbatim.isEmpty ? ":]" : "")",
            newlines: true
        )
        if !verbatim.isEmpty {
            printer.indent()
            for entry in verbatim { printer.print(entry + ",", newlines: true) }
            printer.outdent()
            printer.print("]", newlines: true)
        }
        printer.outdent()
        printer.print("}", "", newlines: true)
    }
}
