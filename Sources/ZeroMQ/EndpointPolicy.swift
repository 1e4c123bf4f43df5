/// What the sockets of a ``Context`` do before they bind or connect an endpoint: the place for a
/// program's transport policy (which links are encrypted, with which keys, where plain TCP may go).
/// The binding has no policy of its own; StoreBus's is `TCPSecurity`, in module StoreBus.
public protocol EndpointPolicy: Sendable {
    /// Sets what `socket` needs before it binds (`binding`) or connects `endpoint`, with
    /// ``Socket/applyPolicyOption(_:)``, or refuses the endpoint by throwing.
    func prepare(_ socket: Socket, endpoint: String, binding: Bool) throws(ZMQError)
}
