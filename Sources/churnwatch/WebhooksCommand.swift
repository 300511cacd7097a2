import ArgumentParser
import ChurnModel
import ChurnServe
import ChurnStore
import Foundation

struct WebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "Signed webhooks (Standard Webhooks) to the team's tools: endpoints, their secrets, sending, replaying.",
        discussion: """
            Once an app has an endpoint, every event, segment move and cancel-page view of that app writes a message \
            in the same transaction; `serve` sends them within seconds (or `webhooks send` from cron), at least once, \
            in order per subscription and endpoint, retried over about 27 hours (0, 5s, 5m, 30m, 2h, 5h, 10h, 10h). \
            Messages: churn_event.created, churn_event.superseded, segment.changed, cancel_page.viewed, winback.ready \
            (only to the endpoint that consumes the campaign), webhook.test (docs/contracts.md "Webhooks").

            Exit codes: 0 done; 75 `send` stopped (--max-duration, a signal) with deliveries still due; 69 database \
            unreachable, or `test` not answered 2xx; 78 a bad value, an endpoint that exists or does not; 64 a \
            malformed command line.
            """,
        subcommands: [Add.self, List.self, Set.self, Remove.self, Enable.self, Disable.self, RotateSecret.self,
                      Test.self, Send.self, Replay.self]
    )

    static func store(_ global: GlobalOptions) async throws -> DatabaseStore {
        let store = DatabaseStore.open(try global.resolvedDatabaseURL())
        try await store.schemaCheck(migrations: BuildMigrations.names())
        return store
    }

    /// A command on one endpoint by name: the name checked, the schema checked, `body`'s line printed.
    static func onEndpoint(_ name: String, _ global: GlobalOptions, _ body: (DatabaseStore, String) async throws -> String) async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let name = try named(name)
            print(try await body(try await store(global), name))
        }
    }

    static func named(_ name: String) throws -> String {
        if let problem = WebhookEndpointRules.nameProblem(name) { throw CLIError.configuration(problem) }
        return name
    }

    /// What `add` and `set` take.
    struct Settings: ParsableArguments {
        @Argument(help: "The endpoint's name (letters, digits, '.', '_', '-').")
        var name: String

        @Option(name: .customLong("url"), help: ArgumentHelp("Where to POST (https; http only with --allow-http).", valueName: "url"))
        var url: String?

        @Option(name: .customLong("types"), help: ArgumentHelp("Message types it takes, comma-separated (default: every type).", valueName: "types"))
        var types: [String] = []

        @Option(name: .customLong("campaign"), help: ArgumentHelp("A win-back campaign it consumes (winback.ready; one consumer per campaign); repeat for several.", valueName: "campaign"))
        var campaigns: [String] = []

        @Flag(name: .customLong("no-campaigns"), help: "Consume no campaign any more (set only).")
        var noCampaigns = false

        @Flag(name: .customLong("allow-http"), inversion: .prefixedNo, help: "Allow a plain http URL (tests, a receiver on loopback).")
        var allowHTTP: Bool?

        @Flag(name: .customLong("allow-private"), inversion: .prefixedNo, help: "Allow an address on loopback or a private or link-local network.")
        var allowPrivate: Bool?

        @Option(name: .customLong("max-in-flight"), help: ArgumentHelp("Requests at once to this endpoint (1...64; default 8).", valueName: "n"))
        var maxInFlight: Int?

        /// `endpoint` with the options given applied, checked.
        func applied(to endpoint: WebhookEndpoint) throws -> WebhookEndpoint {
            var e = endpoint
            if let url { e.url = url }
            if let allowHTTP { e.allowHTTP = allowHTTP }
            if let allowPrivate { e.allowPrivate = allowPrivate }
            if let maxInFlight {
                guard (1...64).contains(maxInFlight) else { throw CLIError.configuration("--max-in-flight \(maxInFlight) is not between 1 and 64") }
                e.maxInFlight = maxInFlight
            }
            if !types.isEmpty {
                switch WebhookEndpointRules.types(types) {
                case .success(let t): e.types = t.map(\.rawValue)
                case .failure(let problem): throw CLIError.configuration(problem.description)
                }
            }
            if noCampaigns { e.campaigns = [] }
            if !campaigns.isEmpty { e.campaigns = try campaigns.map { try WinbackCommand.campaign($0).rawValue } }
            if let problem = WebhookEndpointRules.urlProblem(e.url, allowHTTP: e.allowHTTP) { throw CLIError.configuration(problem) }
            return e
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add an endpoint; prints its new secret once (give it to the receiver).")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var app: AppOptions
        @OptionGroup var settings: Settings

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let name = try WebhooksCommand.named(settings.name)
                guard settings.url != nil else { throw CLIError.configuration("--url is required: where the endpoint's messages are POSTed") }
                let store = try await WebhooksCommand.store(global)
                let endpoint = try settings.applied(to: WebhookEndpoint(name: name, bundleId: try await app.single(store), url: ""))
                let secret = WebhookSigning.newSecret()
                try await store.webhookSave(endpoint, secret: secret, replace: false)
                print("endpoint added: \(WebhooksText.line(endpoint))")
                print("secret: \(secret)")
                print("(shown once, never again: give it to the receiver; `churnwatch webhooks rotate-secret \(name)` makes a new one)")
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change an endpoint's URL, types, campaigns or allowances; its secret and deliveries stay.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var settings: Settings

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let name = try WebhooksCommand.named(settings.name)
                let store = try await WebhooksCommand.store(global)
                guard let current = try await store.webhookEndpoints().first(where: { $0.name == name }) else {
                    throw CLIError.configuration("no endpoint \(name) (`churnwatch webhooks list` shows them)")
                }
                let endpoint = try settings.applied(to: current)
                try await store.webhookSave(endpoint, secret: nil, replace: true)
                print("endpoint changed: \(WebhooksText.line(endpoint))")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The endpoints, each with its deliveries: pending, oldest, dead, delivered in 24 h, last error.")

        @OptionGroup var global: GlobalOptions

        @Flag(name: .customLong("json"), help: "One JSON object per line.")
        var json = false

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let store = try await WebhooksCommand.store(global)
                let stats = try await store.webhookStats()
                if stats.isEmpty, !json { print("no webhook endpoints: add one with `churnwatch webhooks add NAME --url URL`") }
                for s in stats {
                    let secrets = try await store.webhookSecrets(s.endpoint.name)
                    if json {
                        print(try JSONOutput.line(WebhookEndpointJSON(s, secrets: secrets)))
                    } else {
                        print(WebhooksText.line(s.endpoint) + " | " + WebhooksText.counts(s, secrets: secrets, now: Date()))
                    }
                }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove an endpoint, its secret and its deliveries (the messages stay for other endpoints and replays).")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The endpoint's name.") var name: String

        func run() async throws {
            try await WebhooksCommand.onEndpoint(name, global) { store, name in
                try await store.webhookRemove(name)
                return "endpoint removed: \(name)"
            }
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable an endpoint again: its waiting deliveries go on (replay covers what was written while it was disabled).")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The endpoint's name.") var name: String

        func run() async throws {
            try await WebhooksCommand.onEndpoint(name, global) { store, name in
                try await store.webhookEnable(name, enabled: true, reason: nil)
                return "endpoint enabled: \(name)"
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an endpoint: nothing is sent to it, its waiting deliveries are kept.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The endpoint's name.") var name: String
        @Option(name: .customLong("reason"), help: "Why, shown by list.") var reason = "disabled by an operator"

        func run() async throws {
            let reason = String(self.reason.prefix(200))
            try await WebhooksCommand.onEndpoint(name, global) { store, name in
                try await store.webhookEnable(name, enabled: false, reason: reason)
                return "endpoint disabled: \(name)"
            }
        }
    }

    struct RotateSecret: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-secret",
            abstract: "A new secret for an endpoint, printed once; the old one keeps signing beside it for --keep-old.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The endpoint's name.") var name: String
        @Option(name: .customLong("keep-old"), parsing: .unconditional, help: ArgumentHelp("How long messages carry the old secret's signature too (0: not at all).", valueName: "duration"))
        var keepOld = "24h"

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let keep = try parseDurationSetting("--keep-old", keepOld)
                let store = try await WebhooksCommand.store(global)
                let secret = WebhookSigning.newSecret()
                let until = Date().addingTimeInterval(keep)
                try await store.webhookRotate(try WebhooksCommand.named(name), secret: secret, keepOldUntil: until)
                print("secret rotated: \(name); the old secret signs beside it until \(isoTime(until))")
                print("secret: \(secret)")
                print("(shown once, never again: give it to the receiver before \(isoTime(until)))")
            }
        }
    }
}
