import ArgumentParser

/// `storectl`: StoreBus at a terminal.
@main
struct Storectl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "storectl",
        abstract: "Talk to a StoreBus deployment from a terminal.",
        subcommands: [
            ProductsCommand.self, BuyCommand.self, FinishCommand.self, TransactionsCommand.self, RestoreCommand.self,
            WatchCommand.self, DemoCommand.self, ReceiptCommands.self, EntitlementsCommand.self, SubscriptionsCommand.self, NotificationCommands.self, AdminCommands.self,
            HealthCommand.self,
            CatalogCommands.self, DownloadCommands.self, KeysCommands.self
        ]
    )
}

/// Prints an error as a sentence and exits non-zero, instead of a stack trace.
struct Failure: Error, CustomStringConvertible {
    let description: String
}
