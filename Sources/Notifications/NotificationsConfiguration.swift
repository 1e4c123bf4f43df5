import Foundation
import StoreBus
import StoreBusHost
import StoreBusStorage

/// The notification service's own settings: the config file's `service` section for
/// `storebus-notifications`. Every setting has its default here; a config file names only what it
/// changes.
public struct NotificationsConfiguration: Sendable, Equatable, Decodable {
    /// RPC endpoints of storebus-payment-queue, whose event log the notifications come from.
    /// Default `tcp://127.0.0.1:7302`.
    public var paymentQueueEndpoints = [ServiceRegistry.paymentQueue.rpcEndpoint]
    /// Doorbell endpoints of storebus-payment-queue (none: poll). Default `tcp://127.0.0.1:7312`.
    public var paymentQueueEventEndpoints = ServiceRegistry.paymentQueue.eventEndpoint.map { [$0] } ?? []
    /// RPC endpoints of storebus-receipt, which signs the notifications. Default `tcp://127.0.0.1:7303`.
    public var receiptEndpoints = [ServiceRegistry.receipt.rpcEndpoint]
    /// SQLite durability: `full` or `normal`. Default `full`: a notification a backend has read
    /// is on disk.
    public var durability = Durability.full

    /// Where and how the process serves by default: RPC on `tcp://127.0.0.1:7305`, data in
    /// `data/notifications`.
    public static let defaultHost = ServiceRegistry.notifications.defaultHost

    /// The defaults.
    public init() {}

    enum CodingKeys: String, CodingKey {
        case paymentQueueEndpoints, paymentQueueEventEndpoints, receiptEndpoints, durability
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = Self()
        paymentQueueEndpoints = try container.value(.paymentQueueEndpoints, default: defaults.paymentQueueEndpoints)
        paymentQueueEventEndpoints = try container.value(.paymentQueueEventEndpoints, default: defaults.paymentQueueEventEndpoints)
        receiptEndpoints = try container.value(.receiptEndpoints, default: defaults.receiptEndpoints)
        durability = try container.value(.durability, default: defaults.durability)
    }

    /// Throws a ``StartupError`` naming the first setting that cannot work.
    public func validate() throws {
        guard !paymentQueueEndpoints.isEmpty else {
            throw StartupError("service.paymentQueueEndpoints is an empty list: name at least one endpoint, or leave the key out for the default")
        }
        guard !receiptEndpoints.isEmpty else {
            throw StartupError("service.receiptEndpoints is an empty list: name at least one endpoint, or leave the key out for the default")
        }
    }
}
