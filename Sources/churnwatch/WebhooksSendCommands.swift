import AppStoreServerAPI
import ArgumentParser
import ChurnModel
import ChurnServe
import ChurnStore
import Foundation
import Logging

extension WebhooksCommand {
    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send one signed webhook.test message to an endpoint now (enabled or not) and print its answer.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The endpoint's name.") var name: String

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let store = try await WebhooksCommand.store(global)
                let name = try WebhooksCommand.named(self.name)
                guard let endpoint = try await store.webhookEndpoints().first(where: { $0.name == name }),
                      let secrets = try await store.webhookSecrets(name) else {
                    throw CLIError.configuration("no endpoint \(name) (`churnwatch webhooks list` shows them)")
                }
                let now = Date()
                let id = "msg_\(try await store.webhookInstance())_test\(Int64(now.timeIntervalSince1970 * 1000))"
                let data: [String: String] = ["endpoint": name, "bundle_id": endpoint.bundleId, "sent_at": isoTime(now)]
                let body = "{\"type\":\"webhook.test\",\"timestamp\":\"\(isoTime(now))\",\"data\":\(try JSONOutput.line(data))}"
                let keys = ([secrets.current] + [secrets.previous].compactMap { $0 }).compactMap(WebhookSigning.key)
                let timestamp = Int64(now.timeIntervalSince1970)
                let http = WebhookHTTP()
                let answer = await http.post(url: endpoint.url, allowPrivate: endpoint.allowPrivate, id: id, timestamp: timestamp, body: body,
                                             signature: WebhookSigning.signature(id: id, timestamp: timestamp, body: body, keys: keys))
                await http.shutdown()
                let ms = Int(answer.seconds * 1000)
                guard let status = answer.status, (200..<300).contains(status) else {
                    throw CLIError.unavailable("\(name): \(answer.error ?? "no answer") (after \(ms) ms, webhook-id \(id))")
                }
                let shown = answer.body.prefix(500) + (answer.bodyTruncated ? "..." : "")
                print("\(name): HTTP \(status) in \(ms) ms (webhook-id \(id))\(shown.isEmpty ? "" : ": \(shown)")")
            }
        }
    }

    struct Send: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send what is due now, for deployments without serve (cron): ends when nothing more is due.",
            discussion: """
                Several senders (serve processes, this command) share the work: none sends a delivery another holds. \
                Deliveries waiting for a later attempt stay for the next run. Exit 75 when --max-duration or a signal \
                stopped it with deliveries still due.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var sending: WebhookSendingOptions

        @Option(name: .customLong("max-duration"), parsing: .unconditional, help: ArgumentHelp("Stop after this long (e.g. 10m).", valueName: "duration"))
        var maxDuration: String?

        @Option(name: .customLong("metrics-file"), help: ArgumentHelp("Write the run's figures here for node_exporter's textfile collector (*.prom).", valueName: "path"))
        var metricsFile: String?

        @Option(name: .customLong("as-of"), help: ArgumentHelp("The moment win-back entries are due at, ISO 8601 (default: now); offers are still signed at the real time.", valueName: "time"))
        var asOf: String?

        func run() async throws {
            global.bootstrapLogging()
            let logger = Logger(label: "churnwatch.webhooks")
            try await reportingErrors {
                let limit = try maxDuration.map { try parseDurationSetting("--max-duration", $0, positive: true) }
                let file = try metricsFile.map(MetricsFile.init(path:))
                let store = try await WebhooksCommand.store(global)
                let (sender, http, metrics) = try await sending.sender(store, logger: logger, winbackAsOf: try TimeArgument.parse(asOf, flag: "--as-of"))
                let signals = SignalHandler { sender.stop() }
                let deadline = limit.map { ContinuousClock.now + .milliseconds(Int64($0 * 1000)) }
                let summary = await sender.run(untilIdle: true, deadline: deadline)
                withExtendedLifetime(signals) {}
                await http.shutdown()
                if let file {
                    var text = PrometheusText()
                    metrics.render(&text, stats: (try? await store.webhookStats()) ?? [], unsequenced: try? await store.webhookUnsequenced(), now: Date())
                    try file.write(text.text)
                }
                print("webhooks: \(summary.delivered) delivered, \(summary.failed) failed (tried again later), \(summary.dead) dead, \(summary.gone) endpoints gone")
                if summary.stoppedEarly { throw CLIError.resumable("stopped with deliveries still due: run `churnwatch webhooks send` again") }
            }
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send an endpoint again every message of its app and types written since a time (also an endpoint added later: its history).",
            discussion: "The same webhook-id and body as before: a receiver that keeps ids sees duplicates, not new facts.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The endpoint's name.") var name: String
        @Option(name: .customLong("since"), help: ArgumentHelp("ISO 8601 time, or a duration ago (e.g. 24h).", valueName: "time"))
        var since: String

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let from: Date
                if case .success(let ago) = Durations.checked(since) {
                    from = Date().addingTimeInterval(-ago)
                } else {
                    guard let at = try TimeArgument.parse(since, flag: "--since") else { throw CLIError.configuration("--since is required") }
                    from = at
                }
                let store = try await WebhooksCommand.store(global)
                let queued = try await store.webhookReplay(try WebhooksCommand.named(name), since: from)
                print("replay: \(queued) messages since \(isoTime(from)) queued for \(name) (sent by serve, or `churnwatch webhooks send`)")
            }
        }
    }
}

/// The sender's settings, shared by `serve` and `webhooks send`.
struct WebhookSendingOptions: ParsableArguments {
    @Option(name: .customLong("webhook-retry-schedule"), help: ArgumentHelp("Waits before each attempt, comma-separated (default 0,5s,5m,30m,2h,5h,10h,10h; shorter only for tests and benchmarks).", valueName: "durations"))
    var retrySchedule: String?

    @Option(name: .customLong("webhook-timeout"), parsing: .unconditional, help: ArgumentHelp("The bound on one attempt: connect, send, answer.", valueName: "duration"))
    var timeout = "10s"

    func sender(_ store: DatabaseStore, logger: Logger, winbackAsOf: Date? = nil) async throws -> (WebhookSender, WebhookHTTP, WebhookMetrics) {
        var settings = WebhookSender.Settings()
        settings.winbackAsOf = winbackAsOf
        if let text = retrySchedule {
            guard let schedule = WebhookSchedule.parse(text) else {
                throw CLIError.configuration("--webhook-retry-schedule \"\(text.prefix(100))\" is not 1 to 20 durations separated by commas (e.g. 0,5s,5m)")
            }
            settings.schedule = schedule
        }
        let timeout = try parseDurationSetting("--webhook-timeout", self.timeout, positive: true)
        let http = WebhookHTTP(timeout: timeout, connectTimeout: min(5, timeout))
        let metrics = WebhookMetrics()
        let body = await Self.winbackBody(store, logger: logger)
        return (WebhookSender(store: store, http: http, metrics: metrics, settings: settings, logger: logger, winbackBody: body), http, metrics)
    }

    /// winback.ready's body: the entry as `winback claim` prints it, its offer signed now. Nil
    /// (with a line) when this process has no key to sign offers: campaign consumers are then
    /// not served by it.
    static func winbackBody(_ store: DatabaseStore, logger: Logger) async -> (@Sendable (WinbackQueueEntry) throws -> String)? {
        let signers: @Sendable (String) throws -> PromotionalOfferSigner
        do {
            signers = try await OffersCommand.signers(store)
        } catch {
            // Said only where it matters: an endpoint consumes a campaign.
            let consumers = (try? await store.webhookEndpoints(enabledOnly: true).contains { !$0.campaigns.isEmpty }) ?? true
            if consumers { logger.notice("webhooks: winback.ready is not sent from this process (no key to sign offers): \(error)") }
            return nil
        }
        return { entry in
            var json = WinbackQueueEntryJSON(entry)
            json.withOffer = true
            let now = Date()
            json.offer = try OffersCommand.sign(entry, signers, now: now).map(SignedOfferJSON.init)
            return "{\"type\":\"winback.ready\",\"timestamp\":\"\(isoTime(now))\",\"data\":\(try JSONOutput.line(json))}"
        }
    }
}

/// One endpoint in words.
enum WebhooksText {
    static func line(_ e: WebhookEndpoint) -> String {
        var parts = ["\(e.name) → \(e.url)", "app \(e.bundleId)", "types \(e.types.isEmpty ? "all" : e.types.joined(separator: ","))"]
        if !e.campaigns.isEmpty { parts.append("consumes \(e.campaigns.joined(separator: ","))") }
        if e.allowHTTP { parts.append("http allowed") }
        if e.allowPrivate { parts.append("private addresses allowed") }
        parts.append(e.enabled ? "enabled" : "DISABLED (\(e.disabledReason ?? "?"))")
        return parts.joined(separator: ", ")
    }

    static func counts(_ s: WebhookEndpointStats, secrets: WebhookSecrets?, now: Date) -> String {
        var parts = ["pending \(s.pending)"]
        if let oldest = s.oldestPending { parts.append("oldest \(Int(now.timeIntervalSince(oldest)))s") }
        parts += ["dead \(s.dead)", "delivered in 24h \(s.delivered24h)"]
        if s.endpoint.consecutiveFailures > 0 { parts.append("failing since \(s.endpoint.failingSince.map(isoTime) ?? "?") (\(s.endpoint.consecutiveFailures) failures)") }
        if let error = s.lastError { parts.append("last error: \(error.prefix(160))") }
        if let secrets {
            parts.append("secret \(WebhookSigning.fingerprint(secrets.current))"
                         + (secrets.previousUntil.map { " (old one signs until \(isoTime($0)))" } ?? ""))
        }
        return parts.joined(separator: ", ")
    }
}

struct WebhookEndpointJSON: Encodable {
    var name: String, bundle_id: String, url: String, types: [String], campaigns: [String], enabled: Bool, disabled_reason: String?
    var allow_http: Bool, allow_private: Bool, max_in_flight: Int, consecutive_failures: Int, failing_since: Date?, paused_until: Date?
    var pending: Int, oldest_pending: Date?, dead: Int, delivered_24h: Int, last_delivered_at: Date?, last_error: String?
    var secret_fingerprint: String?, previous_secret_until: Date?

    init(_ s: WebhookEndpointStats, secrets: WebhookSecrets?) {
        let e = s.endpoint
        (name, bundle_id, url, types, campaigns, enabled, disabled_reason) = (e.name, e.bundleId, e.url, e.types, e.campaigns, e.enabled, e.disabledReason)
        (allow_http, allow_private, max_in_flight, consecutive_failures) = (e.allowHTTP, e.allowPrivate, e.maxInFlight, e.consecutiveFailures)
        (failing_since, paused_until) = (e.failingSince, e.pausedUntil)
        (pending, oldest_pending, dead, delivered_24h, last_delivered_at, last_error) = (s.pending, s.oldestPending, s.dead, s.delivered24h, s.lastDeliveredAt, s.lastError)
        secret_fingerprint = secrets.map { WebhookSigning.fingerprint($0.current) }
        previous_secret_until = secrets?.previousUntil
    }
}
