import ArgumentParser
import Foundation

@main
struct Churnwatch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "churnwatch",
        abstract: "Polls Apple's App Store Server API for subscriptions near the start or end of their period and writes churn segments, events and win-back queues to PostgreSQL.",
        discussion: """
            Configuration comes from environment variables (DATABASE_URL, APPSTORE_*); flags override them.
            Exit codes: 0 done, 75 stopped early but resumable, 78 bad configuration, \
            69 a dependency (database, Apple) unreachable at start, 1 a bug.
            """,
        subcommands: [
            MigrateCommand.self,
            AppsCommand.self,
            ImportCommand.self,
            PlanCommand.self,
            RunCommand.self,
            NotificationsCommand.self,
            ServeCommand.self,
            MessagesCommand.self,
            BackfillCommand.self,
            StatusCommand.self,
            SegmentsCommand.self,
            WinbackCommand.self,
            WebhooksCommand.self,
            ExperimentsCommand.self,
            OffersCommand.self,
            OutcomesCommand.self,
            RefundsCommand.self,
            PruneCommand.self,
            InspectCommand.self,
            ReportCommand.self,
        ]
    )
}
