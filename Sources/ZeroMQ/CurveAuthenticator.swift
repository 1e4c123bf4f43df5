import CZeroMQ
import Foundation
import Synchronization

/// A ZAP handler (ZeroMQ RFC 27) for a context's CURVE servers: a connection completes its
/// handshake only when the client's long-term public key is on the allow-list (the Ironhouse pattern
/// of the ZeroMQ guide). libzmq asks the handler bound at `inproc://zeromq.zap.01` of the server
/// socket's context about every CURVE handshake; a client it refuses never gets a message to the
/// server's application. Other mechanisms (NULL, PLAIN) are refused too, so a server whose context
/// has an authenticator only ever talks to allowed CURVE clients.
///
/// A server socket whose ZAP domain (``SocketOption/zapDomain(_:)``) is one of `openDomains` admits
/// any CURVE client instead, whatever its key: an endpoint whose clients prove who they are another
/// way (a gateway's API keys), still encrypted.
///
/// It runs a thread of its own until ``stop()`` (or until the context terminates).
public final class CurveAuthenticator: Sendable {
    /// Where libzmq looks for the ZAP handler.
    public static let endpoint = "inproc://zeromq.zap.01"

    private let allowed: Mutex<Set<[UInt8]>>
    private let openDomains: Set<[UInt8]>
    private let stopping = Atomic<Bool>(false)
    private let refusedCount = Atomic<Int>(0)
    private let finished = DispatchSemaphore(value: 0)
    private let onRefusal: (@Sendable (_ address: String, _ reason: String) -> Void)?

    /// Starts answering for `context`'s CURVE servers, allowing the Z85 public keys `allowedPublicKeys`
    /// (and any key in `openDomains`).
    /// Throws EINVAL for a key that is not 40 characters of Z85, and EADDRINUSE when the context has a
    /// handler already. Start it before the servers bind.
    /// `onRefusal` hears each refused handshake, with the client's address and the reason, on the
    /// handler's thread.
    public init(
        context: Context, allowedPublicKeys: [String], openDomains: Set<String> = [],
        onRefusal: (@Sendable (_ address: String, _ reason: String) -> Void)? = nil
    ) throws(ZMQError) {
        allowed = Mutex(Set(try allowedPublicKeys.map(Self.decode)))
        self.openDomains = Set(openDomains.map { Array($0.utf8) })
        self.onRefusal = onRefusal
        // The socket is made, bound and used on the handler's thread, its one owner.
        let bound = DispatchSemaphore(value: 0)
        let failure = Mutex<ZMQError?>(nil)
        let started = Thread { [self] in
            defer { finished.signal() }
            let socket: Socket
            do {
                socket = try Socket(context: context, type: .rep)
            } catch {
                failure.withLock { $0 = (error as? ZMQError) ?? ZMQError(code: EINVAL, operation: "\(error)") }
                bound.signal()
                return
            }
            defer { socket.close() }
            do {
                try socket.set(.linger(0))
                try socket.bind(Self.endpoint)
            } catch {
                failure.withLock { $0 = (error as? ZMQError) ?? ZMQError(code: EINVAL, operation: "\(error)") }
                bound.signal()
                return
            }
            bound.signal()
            serve(socket)
        }
        started.name = "sb-zap"
        started.start()
        bound.wait()
        if let error = failure.withLock({ $0 }) {
            stopping.store(true, ordering: .releasing)
            throw error
        }
    }

    /// Handshakes refused so far.
    public var refused: Int { refusedCount.load(ordering: .relaxed) }

    /// Replaces the allow-list (a key added or revoked); connections made before keep going.
    public func allow(_ publicKeys: [String]) throws(ZMQError) {
        let keys = Set(try publicKeys.map(Self.decode))
        allowed.withLock { $0 = keys }
    }

    /// Stops answering and waits for the thread to end; handshakes after it fail.
    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        finished.wait()
    }

    /// The 32 bytes of a Z85 key.
    static func decode(_ key: String) throws(ZMQError) -> [UInt8] {
        guard key.utf8.count == 40 else { throw ZMQError(code: EINVAL, operation: "CurveAuthenticator: a public key is 40 characters of Z85") }
        var bytes = [UInt8](repeating: 0, count: 32)
        guard zmq_z85_decode(&bytes, key) != nil else { throw ZMQError(code: EINVAL, operation: "CurveAuthenticator: a public key is 40 characters of Z85") }
        return bytes
    }

    private func serve(_ socket: Socket) {
        var poller = Poller()
        poller.add(socket)
        while !stopping.load(ordering: .acquiring) {
            // A short poll, so that stop() is seen within a tenth of a second.
            guard let ready = try? poller.poll(timeoutMilliseconds: 100) else { return } // ETERM
            guard ready > 0, let request = try? socket.receive(dontWait: true) else { continue }
            let reply = answer(request.frames)
            do { try socket.send(Message(frames: reply)) } catch { return }
        }
    }

    /// The ZAP reply to a request: version, request id, status code and text, user id, metadata.
    func answer(_ frames: [[UInt8]]) -> [[UInt8]] {
        let version = Array("1.0".utf8)
        let address = frames.count > 3 ? String(decoding: frames[3], as: UTF8.self) : "unknown"
        func refuse(_ requestID: [UInt8], _ reason: String) -> [[UInt8]] {
            refusedCount.wrappingAdd(1, ordering: .relaxed)
            onRefusal?(address, reason)
            return [version, requestID, Array("400".utf8), Array(reason.utf8), [], []]
        }
        guard frames.count >= 6, frames[0] == version else {
            return refuse(frames.count > 1 ? frames[1] : [], "malformed ZAP request")
        }
        let requestID = frames[1]
        let mechanism = String(decoding: frames[5], as: UTF8.self)
        guard mechanism == "CURVE", frames.count >= 7, frames[6].count == 32 else {
            return refuse(requestID, "only CURVE clients with an allowed key are served (\(mechanism) was offered)")
        }
        guard openDomains.contains(frames[2]) || allowed.withLock({ $0.contains(frames[6]) }) else {
            return refuse(requestID, "the client's public key \(Self.encode(frames[6])) is not allowed")
        }
        // The user id is the client's key, in Z85: what a server may read as the peer's identity.
        return [version, requestID, Array("200".utf8), Array("OK".utf8), Array(Self.encode(frames[6]).utf8), []]
    }

    /// A 32-byte key in Z85.
    static func encode(_ key: [UInt8]) -> String {
        var text = [CChar](repeating: 0, count: 41)
        _ = key.withUnsafeBufferPointer { zmq_z85_encode(&text, $0.baseAddress, 32) }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
