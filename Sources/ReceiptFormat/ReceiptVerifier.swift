import Foundation
import SwiftASN1
import X509

/// Checks StoreBus receipts and signed transactions offline, given the root certificate to trust
/// (the receipt service's `GetSigningCertificates`, or `storectl receipt root-certificate`): what an
/// app or its server does with Apple's receipts and Apple's root.
///
/// ```swift
/// let verifier = try ReceiptVerifier(rootCertificatePEM: pem)
/// let receipt = try await verifier.verify(receiptBytes, bundleID: "com.example.app", deviceID: deviceID)
/// for purchase in receipt.inApp { print(purchase.productID, purchase.transactionID) }
/// ```
public struct ReceiptVerifier: Sendable {
    /// Why a receipt or signed transaction was not accepted.
    public enum Failure: Error, Equatable, CustomStringConvertible, Sendable {
        /// The bytes are not a receipt (verifyReceipt's 21002).
        case malformed(String)
        /// The signature does not chain to a trusted root, or the content was changed (21003).
        case notAuthenticated(String)
        /// A receipt of another app.
        case otherApp(String)
        /// A receipt issued for another device (its hash does not match).
        case otherDevice
        /// A receipt of the other environment (verifyReceipt's 21007 for a sandbox receipt sent to
        /// production, 21008 for the reverse).
        case otherEnvironment(ReceiptEnvironment)

        public var description: String {
            switch self {
            case .malformed(let why): "not a receipt: \(why)"
            case .notAuthenticated(let why): "not authentic: \(why)"
            case .otherApp(let app): "a receipt of \(app)"
            case .otherDevice: "a receipt of another device"
            case .otherEnvironment(let environment): "a \(environment.rawValue.lowercased()) receipt"
            }
        }
    }

    /// The roots trusted.
    public let roots: [Certificate]
    /// Whether a receipt's payload is read by walking its DER in place (``AppReceipt/init(der:walking:)``).
    let walksPayload: Bool
    /// The signers this verifier has seen validated, whose receipts it checks without
    /// swift-certificates' CMS parser (``KnownSigners``); nil: every receipt checked the plain way.
    let knownSigners: KnownSigners?

    /// A verifier trusting `roots`; `walksPayload` false reads payloads the plain way, and
    /// `remembersSigners` false checks every signature the plain way. Keep one verifier for many
    /// receipts: it remembers the signers it has validated.
    public init(rootCertificates roots: [Certificate], walksPayload: Bool = true, remembersSigners: Bool = true) {
        self.roots = roots
        self.walksPayload = walksPayload
        knownSigners = remembersSigners ? KnownSigners(roots: roots) : nil
    }

    /// A verifier trusting the root in `pem`.
    public init(rootCertificatePEM pem: String, walksPayload: Bool = true, remembersSigners: Bool = true) throws {
        self.init(rootCertificates: [try Certificate(pemEncoded: pem)], walksPayload: walksPayload, remembersSigners: remembersSigners)
    }

    /// The receipt in `der` (an app receipt's bytes) once its signature is checked against the
    /// roots, at its creation date; with `bundleID`, it must be that app's, and with `deviceID`,
    /// issued for that device; with `environment`, of that environment.
    ///
    /// The one order of checks, the receipt service's verifyReceipt's too: not a signed message
    /// (malformed); a message whose structure is damaged (not authenticated: a changed byte); a
    /// payload that is not a receipt (malformed when the signature holds, else not authenticated);
    /// a receipt type of neither environment (malformed); the other environment; the signature at
    /// the receipt's creation date (not authenticated); then the app and the device.
    public func verify(
        _ der: [UInt8], bundleID: String? = nil, deviceID: String? = nil, environment: ReceiptEnvironment? = nil, now: Date = Date()
    ) async throws(Failure) -> AppReceipt {
        guard ReceiptSignature.looksSigned(der) else { throw .malformed("not a PKCS#7 signed message") }
        let payload: [UInt8]
        do {
            payload = try ReceiptSignature.attachedPayload(of: der)
        } catch {
            throw .notAuthenticated("the signed message is damaged: \(error)")
        }
        let receipt: AppReceipt
        do {
            receipt = try AppReceipt(der: payload, walking: walksPayload)
        } catch {
            if let problem = await ReceiptSignature.check(der, payload: payload, roots: roots, at: now) {
                throw .notAuthenticated("the payload is not a receipt and the signature does not verify: \(problem)")
            }
            throw .malformed("\(error)")
        }
        guard let own = receipt.environment else {
            throw .malformed("the receipt type \(receipt.receiptType.prefix(64)) is not one of Production, ProductionSandbox")
        }
        if let environment, own != environment { throw .otherEnvironment(own) }
        if let problem = await checkSignature(der, payload: payload, at: receipt.creationDate) {
            throw .notAuthenticated(problem)
        }
        if let bundleID, bundleID != receipt.bundleID { throw .otherApp(receipt.bundleID) }
        if let deviceID {
            let expected = try? AppReceipt.hash(deviceID: deviceID, opaque: receipt.opaqueValue, bundleID: receipt.bundleID)
            guard expected == receipt.sha1Hash else { throw .otherDevice }
        }
        return receipt
    }

    /// Why the signature of `der` (its content `payload`) does not hold at `time`, or nil: by a
    /// known signer when there is one (``KnownSigners``), else the plain way, remembering the signer
    /// it validated.
    func checkSignature(_ der: [UInt8], payload: [UInt8], at time: Date) async -> String? {
        guard let knownSigners else { return await ReceiptSignature.check(der, payload: payload, roots: roots, at: time) }
        if knownSigners.accepts(der, payload: payload, at: time) { return nil }
        switch await ReceiptSignature.validate(der, payload: payload, roots: roots, at: time) {
        case .success(let signer):
            knownSigners.remember(der, signer: signer)
            return nil
        case .failure(let problem):
            return problem.description
        }
    }

    /// The payload of a signed transaction (JWS) once its chain and signature are checked.
    public func verifyTransaction(_ jws: String) async throws(Failure) -> JWSTransactionDecodedPayload {
        do {
            return try await JWS.verify(jws, as: JWSTransactionDecodedPayload.self, roots: roots)
        } catch {
            throw .notAuthenticated(error.description)
        }
    }

    /// The payload of an App Store Server Notification's signedPayload (JWS) once its chain and
    /// signature are checked.
    public func verifyNotification(_ jws: String) async throws(Failure) -> ResponseBodyV2DecodedPayload {
        do {
            return try await JWS.verify(jws, as: ResponseBodyV2DecodedPayload.self, roots: roots)
        } catch {
            throw .notAuthenticated(error.description)
        }
    }

    /// The payload of a signed renewal info (JWS) once its chain and signature are checked.
    public func verifyRenewalInfo(_ jws: String) async throws(Failure) -> JWSRenewalInfoDecodedPayload {
        do {
            return try await JWS.verify(jws, as: JWSRenewalInfoDecodedPayload.self, roots: roots)
        } catch {
            throw .notAuthenticated(error.description)
        }
    }
}
