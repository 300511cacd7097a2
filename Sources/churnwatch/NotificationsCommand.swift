import AppStoreServerAPI
import ArgumentParser
import ChurnInput
import ChurnStore
import Foundation
import Logging
import Polling

struct NotificationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifications",
        abstract: "The change feed: Apple's notification history and the V2 notifications an app's server received.",
        subcommands: [NotificationsSyncCommand.self, NotificationsIngestCommand.self]
    )
}

/// What `sync` and `ingest` share: the store and the feed, from the usual settings.
struct FeedContext {
    var store: ChurnStore
    var feed: FeedSync
    var asOf: Date
    var client: AppStoreServerAPIClient { feed.client }

    /// The feed of the deployment's app (`ingest`).
    static func open(global: GlobalOptions, apple: AppleOptions, options: FeedOptions, asOf: Date, logger: Logger) async throws -> FeedContext {
        try await open(url: try global.resolvedDatabaseURL(), config: try apple.configuration(logger: logger), options: options,
                       asOf: asOf, markingDefault: true, logger: logger)
    }

    /// The feed of the app `config` is for (`markingDefault`: the deployment's, kept the default app).
    static func open(url: String, config: AppStoreConfiguration, options: FeedOptions, asOf: Date, markingDefault: Bool = false,
                     logger: Logger) async throws -> FeedContext {
        let settings = try options.settings()
        // One per apply lane, and one for the shared rate budget while a lane commits.
        let database = DatabaseStore.open(url, connections: settings.applyLanes + 1, logger: logger)
        try await database.schemaCheck(migrations: BuildMigrations.names())
        if markingDefault { try await database.appsMarkDefault(config.bundleId) }
        let store = try await database.app(config.bundleId)
        let limiter = SharedBudgetLimiter(store: store, limits: config.rateLimits, namespace: config.bundleId,
                                          maxPause: config.retryPolicy.maxTotalWait, logger: logger)
        let client = AppStoreServerAPIClient(configuration: config, limiter: limiter, logger: Logger(label: "churnwatch.appstore"))
        let feed = FeedSync(client: client, store: store, applier: FeedApplier(), settings: settings, logger: logger)
        return FeedContext(store: store, feed: feed, asOf: asOf)
    }
}

struct NotificationsIngestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Apply notifications an app's own server stored: lines of {\"signedPayload\": \"...\"} or bare JWS (idempotent), then the inbox.",
        discussion: """
            Each notification is verified (chain, bundle id, app Apple id in Production, environment, and its inner signed \
            transaction and renewal info); one that fails is quarantined with the reason and changes nothing. Repeats \
            (by notificationUUID) are counted as duplicates. Blank lines are skipped; a line over 1 MiB is skipped and named.
            Exits 65 when the input held lines but none verified as a notification of this app.
            The app is the deployment's (APPSTORE_BUNDLE_ID), or --app's: a file holds one app's notifications.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @OptionGroup var feedOptions: FeedOptions

    @Argument(help: "The file (- for standard input).")
    var file: String

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let logger = Logger(label: "churnwatch.notifications")
            let handle: FileHandle
            if file == "-" {
                handle = FileHandle.standardInput
            } else {
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), isDirectory.boolValue {
                    throw CLIError(description: "cannot read \(file): it is a directory; give the file of notifications (JSON lines) itself",
                                   exitCode: ExitStatus.dataError)
                }
                guard let h = FileHandle(forReadingAtPath: file) else {
                    throw CLIError(description: "cannot read \(file): no such file or no permission", exitCode: ExitStatus.dataError)
                }
                handle = h
            }
            let now = Date()
            let context = try await openContext(now: now, logger: logger)
            var reader = LineReader(handle: handle, maxLineBytes: NotificationLine.maxBytes)
            let batchSize = context.feed.settings.batchSize
            var first = true
            var tooLong: [Int] = []
            let summary = try await context.feed.ingest(now: now) { () throws -> [String]? in
                var lines: [String] = []
                while lines.count < batchSize, let (number, read) = try reader.next() {
                    guard case .bytes(var line) = read else {
                        tooLong.append(number)
                        continue
                    }
                    if first {
                        // A UTF-8 byte order mark (as some editors and Windows tools write) is no part of the payload.
                        first = false
                        line = NotificationLine.droppingByteOrderMark(line)
                    }
                    if let payload = NotificationLine.payload(line) { lines.append(payload) }
                }
                return lines.isEmpty ? nil : lines
            }
            print(FeedSummaryText.line(summary, what: "notifications ingest \(file)"))
            if !tooLong.isEmpty {
                let shown = tooLong.prefix(5).map(String.init).joined(separator: ", ") + (tooLong.count > 5 ? ", ..." : "")
                FileHandle.standardError.write(Data(("churnwatch: skipped \(tooLong.count) line(s) longer than \(NotificationLine.maxBytes) bytes "
                    + "(line \(shown)): a notification is a few KB; check how the file was written\n").utf8))
            }
            let inbox = try await context.feed.drainInbox(now: now)
            if inbox.read > 0 { print(FeedSummaryText.line(inbox, what: "notification inbox")) }
            if summary.read + tooLong.count > 0, summary.applied + summary.duplicates + summary.stale + summary.ignored == 0 {
                throw CLIError(description: "nothing in \(file) verified as a notification of this app: \(summary.quarantined) quarantined "
                               + "(reasons in churnwatch.quarantine; check the file, APPSTORE_BUNDLE_ID and APPSTORE_ENVIRONMENT)",
                               exitCode: ExitStatus.dataError)
            }
        }
    }
}

extension NotificationsIngestCommand {
    /// The feed of the deployment's app, or of the one app named with `--app`.
    func openContext(now: Date, logger: Logger) async throws -> FeedContext {
        guard !app.apps.isEmpty else {
            return try await FeedContext.open(global: global, apple: apple, options: feedOptions, asOf: now, logger: logger)
        }
        let url = try global.resolvedDatabaseURL()
        let (_, apps) = try await NightSetup.App.load(url: url, apple: apple, selection: app, feedOn: true, logger: logger)
        guard apps.count == 1 else { throw CLIError.configuration("ingest works for one app: give --app once") }
        return try await FeedContext.open(url: url, config: try apps[0].configuration.get(), options: feedOptions, asOf: now, logger: logger)
    }
}

/// One line of an ingest file: `{"signedPayload": "..."}` or a bare JWS; nil for a blank line.
/// Anything else is passed on as it is, so verification rejects it and it is quarantined.
enum NotificationLine {
    /// The longest line read (1 MiB, as for `import`): a notification with its certificate chain
    /// and inner signed transaction is a few KB, and memory stays bounded whatever the file holds.
    static let maxBytes = 1 << 20

    static func payload(_ raw: ArraySlice<UInt8>) -> String? {
        var lo = raw.startIndex, hi = raw.endIndex
        while lo < hi, isSpace(raw[lo]) { lo += 1 }
        while hi > lo, isSpace(raw[hi - 1]) { hi -= 1 }
        guard lo < hi else { return nil }
        let text = raw[lo..<hi]
        guard text.first == UInt8(ascii: "{") else { return String(decoding: text, as: UTF8.self) }
        if let payload = plainSignedPayload(text) { return payload }
        struct Body: Decodable { var signedPayload: String? }
        return (try? JSONDecoder().decode(Body.self, from: Data(text)))?.signedPayload ?? String(decoding: text, as: UTF8.self)
    }

    static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }

    /// The first line without a leading UTF-8 byte order mark (EF BB BF), as `import` reads it.
    static func droppingByteOrderMark(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        line.starts(with: [0xEF, 0xBB, 0xBF]) ? line.dropFirst(3) : line
    }

    /// `{"signedPayload":"<JWS>"}` with nothing else (spaces aside), read without a JSON
    /// decoder: a JWS is base64url and dots, which JSON never escapes. nil: any other shape.
    static func plainSignedPayload(_ text: ArraySlice<UInt8>) -> String? {
        var i = text.startIndex
        func skipSpaces() { while i < text.endIndex, isSpace(text[i]) { i += 1 } }
        func take(_ literal: StaticString) -> Bool {
            let bytes = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
            guard text.endIndex - i >= bytes.count, text[i..<i + bytes.count].elementsEqual(bytes) else { return false }
            i += bytes.count
            return true
        }
        guard take("{") else { return nil }
        skipSpaces()
        guard take("\"signedPayload\"") else { return nil }
        skipSpaces()
        guard take(":") else { return nil }
        skipSpaces()
        guard take("\"") else { return nil }
        let start = i
        while i < text.endIndex, isJWSByte(text[i]) { i += 1 }
        let end = i
        guard take("\"") else { return nil }
        skipSpaces()
        guard take("}"), i == text.endIndex else { return nil }
        return String(decoding: text[start..<end], as: UTF8.self)
    }

    static func isJWSByte(_ b: UInt8) -> Bool {
        (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || (0x30...0x39).contains(b)
            || b == UInt8(ascii: "-") || b == UInt8(ascii: "_") || b == UInt8(ascii: ".")
    }
}
