import StoreBus

extension ServerContext {
    /// The principal the call acts for; nil for calls from inside the deployment. The router's
    /// ``PrincipalInterceptor`` fills and checks a request's fields against it.
    public var principal: Principal? { Principal(metadata: metadata) }
}
