import Foundation
import Hummingbird
import Logging
import NIOCore
import ReceiptFormat
import ServiceLifecycle
import StoreBusHost

/// `POST /verifyReceipt` over HTTP, as Apple's endpoint takes it: a JSON body with `receipt-data`,
/// `password` and `exclude-old-transactions`, answered 200 with a JSON body whose `status` says what
/// was found. Server code written for buy.itunes.apple.com or sandbox.itunes.apple.com works by
/// changing its URL. The answer is the bus method's, in Apple's JSON form.
enum VerifyReceiptHTTP {
    /// Largest request body read (a receipt with thousands of purchases stays well under it).
    static let maxBody = 4 << 20

    /// The HTTP server on `address`, as a service of the process.
    static func application(book: ReceiptBook, address: HTTPAddress, logger: Logger) -> some Service {
        let router = Router()
        router.post("/verifyReceipt") { request, _ -> Response in
            /// 21000: Apple's answer to a request it cannot read.
            func unreadable(_ message: String) -> Response {
                json(["status": ReceiptVerification.Status.malformedRequest.rawValue, "environment": book.configuration.environment.rawValue, "message": message])
            }
            guard let body = try? await request.body.collect(upTo: maxBody) else { return unreadable("the request body is over \(maxBody) bytes") }
            guard let fields = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] else {
                return unreadable("the body is not a JSON object")
            }
            guard let receiptData = fields["receipt-data"] as? String else { return unreadable("receipt-data is missing or not a string") }
            let verification = await book.verify(
                receiptData: receiptData, password: fields["password"] as? String,
                excludeOldTransactions: fields["exclude-old-transactions"] as? Bool ?? false
            )
            return json(verification.appleJSON())
        }
        logger.info("Serving verifyReceipt over HTTP", metadata: ["http.address": "\(address.host):\(address.port)"])
        return Application(
            router: router,
            configuration: .init(address: .hostname(address.host, port: address.port), serverName: "storebus-receipt"),
            logger: logger
        )
    }

    static func json(_ object: [String: Any]) -> Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data(#"{"status":21005}"#.utf8)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
