import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif
import ChurnServe
import ChurnStore
import Foundation
import Logging
import Polling

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Receive Apple's App Store Server Notifications V2 at POST /apple/notifications and apply them within seconds; answer Get Retention Message at POST /apple/retention-message.",
        discussion: """
            Long-running. Each notification is verified (chain, bundle id of an app of the database, environment) before \
            anything is written, stored in the inbox, then answered 200; a background applier applies it through the change \
            feed's own code path. A notification already known answers 200 and changes nothing; one that fails verification \
            is not stored (4xx); the database down answers 503 (Apple delivers again). The cancel page's requests are verified, \
            answered by the rules of `churnwatch messages rules` within --answer-within (from the cached rules when the \
            database is slow or down), recorded and logged as cancel_page_viewed. Also GET /healthz and GET /metrics. \
            SIGTERM: stops accepting, answers what is in flight, ends the applier after its batch in progress (the rest stays \
            in the inbox for the next start) and records the cancel page's answers, all within --shutdown-grace; exit 0. \
            Prints "churnwatch serve: listening on URL" when ready (and tells systemd, under Type=notify). \
            Several serve processes may share one database. See docs/contracts.md "serve" and the runbook.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @OptionGroup var feedOptions: FeedOptions

    @Option(name: .customLong("listen"), help: ArgumentHelp("Where to listen (port 0: a free port, printed).", valueName: "host:port"))
    var listen = "127.0.0.1:8080"

    @Option(name: .customLong("tls-cert"), help: ArgumentHelp("Serve HTTPS with this PEM certificate chain (leaf first); with --tls-key. Without both: plain HTTP, for behind a TLS proxy.", valueName: "file"))
    var tlsCert: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "file"))
    var tlsKey: String?

    @Option(name: .customLong("max-body"), help: ArgumentHelp("The largest request body read, in bytes; more is a 413.", valueName: "bytes"))
    var maxBody = 64 * 1024

    @Option(name: .customLong("max-connections"), help: ArgumentHelp("Connections open at once; one more is closed at once.", valueName: "n"))
    var maxConnections = 512

    @Option(name: .customLong("header-timeout"), parsing: .unconditional, help: ArgumentHelp("How long a connection may take to send a request's headers (from its opening or the previous answer: idle connections close then too); then it is closed.", valueName: "duration"))
    var headerTimeout = "10s"

    @Option(name: .customLong("body-timeout"), parsing: .unconditional, help: ArgumentHelp("How long a request's body may take after its headers; then 408.", valueName: "duration"))
    var bodyTimeout = "10s"

    @Option(name: .customLong("store-within"), parsing: .unconditional, help: ArgumentHelp("How long storing a notification may take before the answer is 503 (the database down or slow).", valueName: "duration"))
    var storeWithin = "3s"

    @Option(name: .customLong("answer-within"), parsing: .unconditional, help: ArgumentHelp("How long a cancel-page answer (POST /apple/retention-message) may take, verification included; past it, the cached rules answer without the database.", valueName: "duration"))
    var answerWithin = "300ms"

    @Option(name: .customLong("retention-max-skew"), parsing: .unconditional, help: ArgumentHelp("How far a cancel-page request's signedDate may be from now before it is refused as stale; off: not checked (only for a simulated App Store, whose clock is not the wall's).", valueName: "duration"))
    var retentionMaxSkew = "5m"

    @Option(name: .customLong("shutdown-grace"), parsing: .unconditional, help: ArgumentHelp("After SIGTERM/SIGINT, how long the whole stop may take: requests in flight, the applier's batch in progress, the cancel page's records.", valueName: "duration"))
    var shutdownGrace = "30s"

    @OptionGroup var sending: WebhookSendingOptions

    @Flag(name: .customLong("no-webhooks"), help: "Do not send webhooks from this process (another serve, or `webhooks send` from cron, does).")
    var noWebhooks = false

    func run() async throws {
        global.bootstrapLogging()
        ServeCommand.fewerMallocArenas()
        try await reportingErrors {
            let logger = Logger(label: "churnwatch.serve")
            let settings = try validated()
            let url = try global.resolvedDatabaseURL()
            let (database, apps) = try await NightSetup.App.load(url: url, apple: apple, selection: app, feedOn: true, logger: logger,
                                                                  connections: 16)
            guard !apps.isEmpty else {
                throw CLIError.configuration("no app to serve: add one with `churnwatch apps add`, or set APPSTORE_BUNDLE_ID and run `churnwatch migrate`")
            }
            let verified = VerifiedCache()
            let served = ServeApps(try await ServeParts.open(apps, url: url, options: feedOptions, verified: verified, logger: logger)) { [self] known in
                // An app added since: its settings read as at the start, and its feed opened.
                let all = try await NightSetup.App.read(database, apple: apple, selection: app, feedOn: true,
                                                        deployment: try apple.configuration(logger: logger).bundleId, logger: logger)
                let added = all.filter { !known.contains($0.record.bundleId.lowercased()) }
                if !added.isEmpty { logger.notice("serving apps added since the start", metadata: ["apps": "\(added.map(\.record.bundleId))"]) }
                return try await ServeParts.open(added, url: url, options: feedOptions, verified: verified, logger: logger)
            }
            let metrics = ServeMetrics(door: DoorCounters())
            let migrations = BuildMigrations.names()
            let health = ServeHealth { try await database.schemaCheck(migrations: migrations) }
            let applier = InboxApplier(apps: served, database: database, metrics: metrics, health: health,
                                       doorInFlight: { metrics.door.inFlight.load(ordering: .relaxed) }, logger: logger)
            let receiver = NotificationReceiver(apps: served, database: database, metrics: metrics, budget: settings.storeWithin,
                                                logger: logger, verified: verified) { applier.wake() }
            var answering = RetentionAnswerer.Settings()
            answering.budget = settings.answerWithin
            answering.maxSkew = settings.retentionMaxSkew
            let retention = RetentionAnswerer(settings: answering, metrics: RetentionMetrics(), logger: logger) { await served.retention($0) }
            let webhooks = noWebhooks ? nil : try await sending.sender(database, logger: logger)
            let service = ServeService(receiver: receiver, retention: retention, health: health, metrics: metrics, webhooks: webhooks?.2)
            let door: HTTPDoor
            do {
                door = try await HTTPDoor.start(host: settings.host, port: settings.port, limits: settings.limits, tls: settings.tls,
                                                counters: metrics.door) { await service.handle($0) }
            } catch {
                throw CLIError.configuration("--listen \(listen): cannot listen there: \(error) (another process on that port? choose another)")
            }
            let scheme = settings.tls == nil ? "http" : "https"
            let names = apps.map(\.record.bundleId).joined(separator: ", ")
            let line = "churnwatch serve: listening on \(scheme)://\(settings.host):\(door.port) for \(names)\n"
            let announcement = StopAnnouncement()
            let group = ServeGroup(door: door, applier: applier, retention: retention, webhooks: webhooks?.0, grace: settings.grace,
                                   logger: logger) {
                FileHandle.standardOutput.write(Data(line.utf8))
                SystemdNotify.send("READY=1")
            } stopping: {
                announcement.stopping()
            }
            let stopped = try await group.run()
            if !stopped.applierStopped {
                logger.notice("the applier's batch in progress did not end within --shutdown-grace: its rows stay in the inbox for the next start")
            }
            if !stopped.webhooksStopped {
                logger.notice("webhook attempts in flight did not end within --shutdown-grace: they are sent again (same ids) after their lease")
            }
            if !stopped.recorded {
                logger.error("serve stopped with cancel-page answers not recorded: the database did not take them within --shutdown-grace")
            }
            guard stopped.idle else { throw CLIError.resumable("serve stopped with requests still in flight after --shutdown-grace: they were not answered 200 (Apple delivers again)") }
            FileHandle.standardError.write(Data("churnwatch serve: stopped\n".utf8))
        }
    }
}

extension ServeCommand {
    /// Two malloc arenas, not eight per core: a long-running server's freed memory is reused
    /// instead of kept in per-thread arenas (peak RSS under load 224 MB, then 128 MB).
    static func fewerMallocArenas() {
        #if canImport(Glibc)
        // mallopt is not in Swift's Glibc module: found by name, as the C library exports it.
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }
        let mallopt = unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
        let arenaMax: Int32 = -8  // glibc's M_ARENA_MAX (malloc.h)
        _ = mallopt(arenaMax, 2)
        #endif
    }
}
