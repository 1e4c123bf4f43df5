import CZeroMQ

/// A CURVE key pair in Z85 text form (40 characters each), for encrypted and authenticated ZeroMQ
/// connections (`SocketOption.curveServer` and `.curveClient`).
public struct CurveKeyPair: Sendable, Equatable {
    /// The public key, safe to share.
    public let publicKey: String
    /// The secret key; never log it.
    public let secretKey: String

    /// A key pair from its two keys (Z85); see ``publicKey(forSecretKey:)`` to derive the first.
    public init(publicKey: String, secretKey: String) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// Generates a new key pair with libzmq (which uses libsodium). Throws `ENOTSUP` when libzmq was
    /// built without CURVE.
    public static func generate() throws(ZMQError) -> CurveKeyPair {
        var publicKey = [CChar](repeating: 0, count: 41)
        var secretKey = [CChar](repeating: 0, count: 41)
        if zmq_curve_keypair(&publicKey, &secretKey) != 0 { throw ZMQError.last("zmq_curve_keypair") }
        return CurveKeyPair(
            publicKey: publicKey.withUnsafeBufferPointer { String(cString: $0.baseAddress!) },
            secretKey: secretKey.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        )
    }

    /// Derives the public key that belongs to a Z85 secret key.
    public static func publicKey(forSecretKey secretKey: String) throws(ZMQError) -> String {
        var publicKey = [CChar](repeating: 0, count: 41)
        if zmq_curve_public(&publicKey, secretKey) != 0 { throw ZMQError.last("zmq_curve_public") }
        return publicKey.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Whether `key` is a CURVE key in Z85 text form: 40 characters that decode to 32 bytes.
    public static func isValidKey(_ key: String) -> Bool {
        guard key.utf8.count == 40 else { return false }
        var bytes = [UInt8](repeating: 0, count: 32)
        return zmq_z85_decode(&bytes, key) != nil
    }
}
