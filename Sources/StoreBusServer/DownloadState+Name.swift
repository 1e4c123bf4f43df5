import StoreSchema

extension Storebus_PaymentQueue_V1_DownloadState {
    /// The state in words, as messages say it.
    public var name: String {
        switch self {
        case .waiting: return "waiting"
        case .active: return "active"
        case .paused: return "paused"
        case .finished: return "finished"
        case .failed: return "failed"
        case .cancelled: return "cancelled"
        default: return "in an unknown state"
        }
    }
}
