import StoreBus
import StoreBusServer
import StoreSchema

/// The handlers of `storebus.payment_queue.v1.Subscriptions`: the store clock's rate per app and an
/// account's subscriptions.
public struct SubscriptionsHandlers: Storebus_PaymentQueue_V1_Subscriptions.Handlers {
    let store: TransactionStore
    let catalog: CatalogLookup
    let engine: RenewalEngine

    /// Handlers over `store`, asking `catalog` whether apps exist and poking `engine` when a rate
    /// changes.
    public init(store: TransactionStore, catalog: CatalogLookup, engine: RenewalEngine) {
        self.store = store
        self.catalog = catalog
        self.engine = engine
    }

    /// Every method awaits the store's threads for its reads and writes.
    public var loopSafe: LoopSafeMethods { .all(of: Storebus_PaymentQueue_V1_Subscriptions.self) }

    public func setRenewalRate(_ request: Storebus_PaymentQueue_V1_SetRenewalRateRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_SetRenewalRateResponse {
        if case .UNRECOGNIZED(let value) = request.rate {
            throw RPCError.invalidArgument(field: "rate", "\(value) is not a RenewalRate")
        }
        try await catalog.checkApp(request.appBundleID)
        let rate = try await store.setRenewalRate(request.rate, app: request.appBundleID)
        engine.poke()
        return .with { $0.rate = rate }
    }

    public func getRenewalRate(_ request: Storebus_PaymentQueue_V1_GetRenewalRateRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_GetRenewalRateResponse {
        try await catalog.checkApp(request.appBundleID)
        let (rate, own) = try await store.renewalRate(app: request.appBundleID)
        return .with {
            $0.rate = rate
            $0.setForApp = own
            $0.monthMilliseconds = rate == .realTime ? 2_592_000_000 : RenewalClock.end(of: RenewalClock.Period(unit: .month, count: 1), startingAt: 0, rate: rate)
        }
    }

    public func setBillingControls(
        _ request: Storebus_PaymentQueue_V1_SetBillingControlsRequest, context: ServerContext
    ) async throws -> Storebus_PaymentQueue_V1_SetBillingControlsResponse {
        try await catalog.checkApp(request.appBundleID)
        let controls = try await store.setBillingControls(request.controls, app: request.appBundleID)
        engine.poke()
        return .with { $0.controls = controls }
    }

    public func renewNow(_ request: Storebus_PaymentQueue_V1_SubscriptionRef, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_AdjustSubscriptionResponse {
        try await adjust(.renewNow, request)
    }

    public func expireNow(_ request: Storebus_PaymentQueue_V1_SubscriptionRef, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_AdjustSubscriptionResponse {
        try await adjust(.expireNow, request)
    }

    public func extendRenewalDate(
        _ request: Storebus_PaymentQueue_V1_ExtendRenewalDateRequest, context: ServerContext
    ) async throws -> Storebus_PaymentQueue_V1_AdjustSubscriptionResponse {
        guard request.hasSubscription else { throw RPCError.invalidArgument(field: "subscription", "is required") }
        guard request.extendByDays >= 1 else { throw RPCError.invalidArgument(field: "extendByDays", "must be from 1 to 90") }
        return try await adjust(.extend(days: Int(request.extendByDays), requestID: request.requestIdentifier), request.subscription)
    }

    private func adjust(
        _ control: TransactionStore.SubscriptionControl, _ ref: Storebus_PaymentQueue_V1_SubscriptionRef
    ) async throws
        -> Storebus_PaymentQueue_V1_AdjustSubscriptionResponse
    {
        try await catalog.checkApp(ref.appBundleID)
        let subscription = try await store.control(control, app: ref.appBundleID, account: ref.accountID, group: ref.subscriptionGroupIdentifier)
        engine.poke()
        return .with { $0.subscription = subscription }
    }

    public func setAutoRenew(_ request: Storebus_PaymentQueue_V1_SetAutoRenewRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_SetAutoRenewResponse {
        try await catalog.checkApp(request.appBundleID)
        let subscription = try await store.setAutoRenew(
            request.autoRenewStatus, app: request.appBundleID, account: request.accountID, group: request.subscriptionGroupIdentifier)
        engine.poke()
        return .with { $0.subscription = subscription }
    }

    public func listSubscriptions(_ request: Storebus_PaymentQueue_V1_ListSubscriptionsRequest, context: ServerContext) async throws -> Storebus_PaymentQueue_V1_ListSubscriptionsResponse {
        try await catalog.checkApp(request.appBundleID)
        let subscriptions = try await store.subscriptions(app: request.appBundleID, account: request.accountID)
        return .with { $0.subscriptions = subscriptions }
    }
}
