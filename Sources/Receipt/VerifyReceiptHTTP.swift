import Foundation
import Hummingbird
import Logging
import NIOCore
import ReceiptFormat
import ServiceLifecycle
import StoreBus
import StoreBusHost

/// `POST /verifyReceipt` over HTTP, as Apple's endpoint takes it: a JSON body with `receipt-data`,
/// `password` and `exclude-old-transactions`, answered 200 with a JSON body whose `status` says what
/// was found. Server code written for buy.itunes.apple.com or sandbox.itunes.apple.com works by
/// changing its URL. The answer is the bus method's, in Apple's JSON form.
enum VerifyReceiptHTTP {
    /// Largest request body read (a receipt with thousands of purchases stays well under it).
    static let maxBody = 4 << 20

    /// The HTTP server on `address`, as a service of the process; `bound` is called once it listens
    /// (``Listeners/expect()``: the process's ready line waits for it).
    static func application(book: ReceiptBook, address: HTTPAddress, logger: Logger, bound: @escaping @Sendable () -> Void) -> some Service {
        let router = Router()
        router.post("/verifyReceipt") { request, _ -> Response in
            /// 21000: Apple's answer to a request it cannot read.
            func unreadable(_ message: String) -> Response {
                var json = JSONObjectWriter()
                json.set("status", ReceiptVerification.Status.malformedRequest.rawValue)
                json.set("environment", book.configuration.environment.rawValue)
                json.set("message", message)
                return answer(json)
            }
            guard let body = try? await request.body.collect(upTo: maxBody) else { return unreadable("the request body is over \(maxBody) bytes") }
            let fields: VerifyRequest
            do {
                let bytes = Array(buffer: body)
                fields = try VerifyRequest.direct(bytes) ?? JSONDecoder().decode(VerifyRequest.self, from: Data(bytes))
            } catch let error as VerifyRequest.NoReceiptData {
                return unreadable(error.message)
            } catch {
                return unreadable("the body is not a JSON object")
            }
            let verification = await book.verify(
                receiptData: fields.receiptData, password: fields.password, excludeOldTransactions: fields.excludeOldTransactions ?? false)
            return answer(verification.appleJSON())
        }
        logger.info("Serving verifyReceipt over HTTP", metadata: ["http.address": "\(address.host):\(address.port)"])
        return Application(
            router: router,
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "storebus-receipt"),
            onServerRunning: { _ in bound() },
            logger: logger
        )
    }

    /// A request's body as Apple documents it: `receipt-data` a string; `password` and
    /// `exclude-old-transactions` taken when they are a string and a boolean, left out otherwise.
    struct VerifyRequest: Decodable, Equatable {
        var receiptData: String
        var password: String?
        var excludeOldTransactions: Bool?

        enum CodingKeys: String, CodingKey {
            case receiptData = "receipt-data"
            case password
            case excludeOldTransactions = "exclude-old-transactions"
        }

        init(receiptData: String, password: String?, excludeOldTransactions: Bool?) {
            self.receiptData = receiptData
            self.password = password
            self.excludeOldTransactions = excludeOldTransactions
        }

        /// The request read directly when it has the plain shape (an ASCII object, no name given
        /// twice; strings with escapes decoded, as clients that write `/` as `\/` send base64):
        /// `receipt-data` a string, `password` and
        /// `exclude-old-transactions` taken when a string and a boolean, any other member
        /// ignored, as the decoder takes them. Nil for any other shape (and with fast paths off):
        /// JSONDecoder reads it then. `VerifyReceiptHTTPTests` holds the two to the same requests.
        static func direct(_ body: [UInt8], fast: Bool = FastPaths.enabled) -> VerifyRequest? {
            guard fast, let members = JSONScanner.plainMembers(body) else { return nil }
            var receiptData: String?, password: String?, exclude: Bool?
            for member in members {
                let value = member.value
                let isString = body[value.lowerBound] == UInt8(ascii: "\"")
                switch member.name {
                case "receipt-data":
                    guard let text = JSONScanner.text(body, value) else { return nil }
                    receiptData = text
                case "password" where isString:
                    guard let text = JSONScanner.text(body, value) else { return nil }
                    password = text
                case "exclude-old-transactions":
                    exclude = JSONScanner.bool(body, value)
                default:
                    continue
                }
            }
            guard let receiptData else { return nil }
            return VerifyRequest(receiptData: receiptData, password: password, excludeOldTransactions: exclude)
        }

        /// A JSON object without a string `receipt-data`.
        struct NoReceiptData: Error {
            let message = "receipt-data is missing or not a string"
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            guard let receiptData = try? container.decode(String.self, forKey: .receiptData) else { throw NoReceiptData() }
            self.receiptData = receiptData
            password = try? container.decodeIfPresent(String.self, forKey: .password)
            excludeOldTransactions = try? container.decodeIfPresent(Bool.self, forKey: .excludeOldTransactions)
        }
    }

    static func answer(_ json: JSONObjectWriter) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: json.body)))
    }
}
