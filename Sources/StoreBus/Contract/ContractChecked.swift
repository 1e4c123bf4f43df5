import StoreSchema
import SwiftProtobuf

/// A request message with the checks its fields' `storebus.options.v1.rules` ask for
/// (proto-schemas/storebus/options/v1/options.proto), written by protoc-gen-storebus into
/// `Generated/*.client.swift` for every request of the contract and every message such checks reach.
/// Servers run them in their interceptor chain before any handler sees the request; a client may run
/// them before sending. A message without rules keeps the defaults, which check nothing.
public protocol ContractChecked: SwiftProtobuf.Message {
    /// Fills the fields that name the principal's app, account or device when they are empty, then
    /// refuses with PERMISSION_DENIED any that names another (reasons OTHER_APP, OTHER_ACCOUNT,
    /// OTHER_DEVICE), in field order, nested messages included.
    mutating func applyPrincipal(_ principal: Principal) throws(RPCError)
    /// Refuses with INVALID_ARGUMENT, naming the field (`prefix` + its JSON name), the first field
    /// that breaks its rules: lengths, counts, ranges, enum values, queue names.
    func checkFields(prefix: String) throws(RPCError)
    /// The field holding the request's idempotency key, if it has one.
    static var idempotencyKeyField: WritableKeyPath<Self, String>? { get }
    /// That field's JSON name.
    static var idempotencyKeyName: String { get }
}

extension ContractChecked {
    public mutating func applyPrincipal(_ principal: Principal) throws(RPCError) {}
    public func checkFields(prefix: String) throws(RPCError) {}
    public static var idempotencyKeyField: WritableKeyPath<Self, String>? { nil }
    public static var idempotencyKeyName: String { "idempotencyKey" }
}
