import ArgumentParser
import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

/// `storectl notifications`: an app's App Store Server Notifications, as its backend sees them.
struct NotificationCommands: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifications", abstract: "Follow an app's signed App Store Server Notifications, as its backend does (the app's server key).",
        subcommands: [WatchNotifications.self, TestNotification.self])

    /// The local deployment's demo server key (deploy/local/gateway.json); for local use only.
    static let localServerKey = "storebus-local-demo-server-key"

    /// A server session's options: the gateways, the app and its server key.
    struct ServerOptions: ParsableArguments {
        @OptionGroup var gateway: GatewayOptions

        @Option(name: .customLong("server-key"), help: "The app's server key. Default: STOREBUS_SERVER_KEY or the local demo server key.")
        var serverKey: String?

        @Option(help: "The app's bundle identifier.")
        var app: String = "com.storebus.demo.puzzle"

        func connection() throws -> StoreConnection {
            let key = serverKey ?? ProcessInfo.processInfo.environment["STOREBUS_SERVER_KEY"] ?? NotificationCommands.localServerKey
            var configuration = try gateway.configuration(key: key, app: app, account: "", device: "")
            configuration.accountID = ""
            configuration.deviceID = ""
            return try StoreConnection(configuration: configuration)
        }
    }

    /// `storectl notifications watch`: every notification after a position, verified, one line each.
    struct WatchNotifications: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "watch", abstract: "Print the app's notifications after a position, each verified against the store's root, and wait for more.")

        @OptionGroup var server: ServerOptions

        @Option(help: "Start after this position (0: from the first).")
        var after: UInt64 = 0

        @Option(help: "Stop after this many notifications (default: wait for more until interrupted).")
        var count: Int?

        func run() async throws {
            let connection = try server.connection()
            var printed = 0
            if count == 0 { return }
            try await sentence {
                for try await notification in NotificationStream(connection: connection, after: after) {
                    print(Self.line(notification))
                    printed += 1
                    if let count, printed >= count { break }
                }
            }
            await connection.close()
        }

        /// `7 DID_RENEW/BILLING_RECOVERY 4f0c… account=nina transaction=… original=… status=1`.
        static func line(_ notification: VerifiedNotification) -> String {
            var text = "\(notification.position) \(notification.notificationType)"
            if let subtype = notification.subtype { text += "/\(subtype)" }
            text += " \(notification.payload.notificationUUID ?? "")"
            if !notification.accountIdentifier.isEmpty { text += " account=\(notification.accountIdentifier)" }
            if let transaction = notification.transaction {
                text += " transaction=\(transaction.transactionId ?? "") product=\(transaction.productId ?? "") original=\(transaction.originalTransactionId ?? "")"
            }
            if let status = notification.payload.data?.status { text += " status=\(status)" }
            return text
        }
    }

    /// `storectl notifications test`: a TEST notification, appended to the app's log.
    struct TestNotification: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "test", abstract: "Append a TEST notification to the app's log (Request a Test Notification).")

        @OptionGroup var server: ServerOptions

        func run() async throws {
            let connection = try server.connection()
            let answer = try await sentence { try await connection.call(Storebus_Notifications_V1_Notifications.requestTestNotification, .init()) }
            print("TEST notification \(answer.testNotificationToken) at position \(answer.position)")
            await connection.close()
        }
    }
}
