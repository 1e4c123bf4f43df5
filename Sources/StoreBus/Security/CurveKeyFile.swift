import Foundation
import ZeroMQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// StoreBus's CURVE key files: text, one `name = "value"` line a key, `#` comments.
///
/// A service's key pair lives in `<name>.key` (mode 0600: its secret key is the service's
/// identity), its public key in `<name>.pub` (0644: given to the services that talk to it).
///
/// ```text
/// # StoreBus CURVE key pair "catalog" ...
/// public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
/// secret-key = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
/// ```
public enum CurveKeyFile {
    /// The key pair file's name for `name`.
    public static func keyPairFileName(_ name: String) -> String { "\(name).key" }
    /// The public key file's name for `name`.
    public static func publicFileName(_ name: String) -> String { "\(name).pub" }

    /// Writes a new key pair for `name` into `directory` (created 0700 if missing): `<name>.key`
    /// (0600) and `<name>.pub` (0644). Refuses to overwrite a key pair that exists.
    @discardableResult
    public static func make(name: String, in directory: URL) throws -> CurveKeyPair {
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." }), !name.hasPrefix(".") else {
            throw StartupError("a key name is letters, digits, '-', '_' and '.': \"\(name)\"")
        }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let keyPair: CurveKeyPair
        do { keyPair = try CurveKeyPair.generate() } catch { throw StartupError("cannot make a CURVE key pair: \(error)") }
        let secretPath = directory.appendingPathComponent(keyPairFileName(name)).path
        try write(
            "# StoreBus CURVE key pair \"\(name)\". The secret key is this service's identity: keep this file\n"
                + "# mode 0600, readable by the service's user only, and never copy it off its host.\n"
                + "public-key = \"\(keyPair.publicKey)\"\nsecret-key = \"\(keyPair.secretKey)\"\n",
            to: secretPath, mode: 0o600
        )
        try write(
            "# StoreBus CURVE public key \"\(name)\": list it in the configurations of the services that\n"
                + "# talk to this one (allowedKeys, serverKeys).\npublic-key = \"\(keyPair.publicKey)\"\n",
            to: directory.appendingPathComponent(publicFileName(name)).path, mode: 0o644
        )
        return keyPair
    }

    /// Reads the key pair at `path`, refusing a file that others than its owner may read and a
    /// secret key that does not match the public key written beside it.
    public static func readKeyPair(at path: String) throws -> CurveKeyPair {
        var status = stat()
        guard stat(path, &status) == 0 else { throw StartupError("cannot read the key file \(path): \(String(cString: strerror(errno)))") }
        guard status.st_mode & 0o077 == 0 else {
            throw StartupError("the key file \(path) may be read by others (mode \(String(status.st_mode & 0o777, radix: 8))): chmod 600 it")
        }
        let fields = try read(path)
        guard let secret = fields["secret-key"] else { throw StartupError("the key file \(path) has no secret-key") }
        let derived: String
        do { derived = try CurveKeyPair.publicKey(forSecretKey: secret) } catch {
            throw StartupError("the key file \(path) has a secret-key that is not 40 characters of Z85")
        }
        if let written = fields["public-key"], written != derived {
            throw StartupError("the key file \(path): its public-key does not belong to its secret-key")
        }
        return CurveKeyPair(publicKey: derived, secretKey: secret)
    }

    /// The public key in the file at `path` (a `.pub` or a `.key` file).
    public static func readPublicKey(at path: String) throws -> String {
        guard let key = try read(path)["public-key"] else { throw StartupError("the key file \(path) has no public-key") }
        guard isZ85Key(key) else { throw StartupError("the key file \(path) has a public-key that is not 40 characters of Z85") }
        return key
    }

    /// A public key given as a file's path or as the key itself (40 characters of Z85).
    public static func publicKey(fileOrKey value: String) throws -> String {
        if FileManager.default.fileExists(atPath: value) { return try readPublicKey(at: value) }
        guard isZ85Key(value) else { throw StartupError("\(value) is neither a key file nor a 40-character Z85 key") }
        return value
    }

    /// Whether `text` is 40 characters of Z85 that decode to 32 bytes.
    public static func isZ85Key(_ text: String) -> Bool {
        CurveKeyPair.isValidKey(text)
    }

    private static func read(_ path: String) throws -> [String: String] {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw StartupError("cannot read the key file \(path): \(error.localizedDescription)")
        }
        var fields: [String: String] = [:]
        for line in text.split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#") else { continue }
            let parts = trimmed.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, parts[1].count >= 2, parts[1].hasPrefix("\""), parts[1].hasSuffix("\"") else {
                throw StartupError("the key file \(path) is not valid: \"\(trimmed.prefix(20))…\" is not name = \"value\"")
            }
            fields[parts[0]] = String(parts[1].dropFirst().dropLast())
        }
        return fields
    }

    private static func write(_ text: String, to path: String, mode: mode_t) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            throw StartupError(errno == EEXIST ? "\(path) exists already: keys are never overwritten (remove it first to replace it)" : "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        // The umask may have taken bits off the mode asked for; set it exactly.
        _ = fchmod(descriptor, mode)
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ Foundation.write(descriptor, $0.baseAddress, $0.count) }) == bytes.count, fsync(descriptor) == 0 else {
            throw StartupError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
