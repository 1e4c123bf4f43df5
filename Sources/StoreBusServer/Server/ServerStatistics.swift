import StoreBus
import StoreSchema
import Synchronization

/// Counters of an RPC server, readable from any thread (Diagnostics/GetServerStats serves them).
public final class ServerStatistics: Sendable {
    let requestsReceived = Atomic<UInt64>(0)
    let requestsSucceeded = Atomic<UInt64>(0)
    let requestsFailed = Atomic<UInt64>(0)
    let deadlineExceeded = Atomic<UInt64>(0)
    let cancelled = Atomic<UInt64>(0)
    let malformedMessages = Atomic<UInt64>(0)
    let repliesDropped = Atomic<UInt64>(0)
    /// Handlers running right now (a cancelled handler stops counting when its task really ends).
    let handlersRunning = Atomic<UInt64>(0)

    /// Fresh counters.
    public init() {}

    static func bump(_ counter: borrowing Atomic<UInt64>) {
        counter.wrappingAdd(1, ordering: .relaxed)
    }

    /// The counters as the Diagnostics service reports them.
    public var snapshot: Storebus_Diagnostics_V1_ServerStats {
        .with {
            $0.requestsReceived = requestsReceived.load(ordering: .relaxed)
            $0.requestsSucceeded = requestsSucceeded.load(ordering: .relaxed)
            $0.requestsFailed = requestsFailed.load(ordering: .relaxed)
            $0.deadlineExceeded = deadlineExceeded.load(ordering: .relaxed)
            $0.cancelled = cancelled.load(ordering: .relaxed)
            $0.malformedMessages = malformedMessages.load(ordering: .relaxed)
            $0.repliesDropped = repliesDropped.load(ordering: .relaxed)
            $0.inFlight = handlersRunning.load(ordering: .relaxed)
        }
    }
}
