import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation
import Logging

struct WinbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "winback",
        abstract: "Drain the win-back queue: claim entries (JSON lines), ack them once sent, release them if not.",
        discussion: """
            A consumer claims a batch, sends its messages, then acks the ids it sent and releases the rest. \
            A claim holds entries for --lease; entries of a consumer that crashed become claimable again after it.

            Campaigns: save_offer, billing_fix, winback_offer, resubscribe_prompt.

            Exit codes: 0 done; 65 some ids were not acked or released (one line names them and why); \
            78 a bad value (campaign, id, duration, time); 64 a malformed command line; 69 database unreachable.
            """,
        subcommands: [Claim.self, Ack.self, Release.self, List.self]
    )

    static func campaign(_ text: String) throws -> WinbackCampaign {
        guard let c = WinbackCampaign(rawValue: text) else {
            throw CLIError.configuration("unknown campaign \"\(text)\": use one of \(WinbackCampaign.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return c
    }

    /// The entry ids of ack and release. They are parsed after the flags (`-5` is an id to
    /// refuse, not an unknown short flag), so a word starting with `--` is an unknown flag (64).
    static func ids(_ texts: [String]) throws -> [Int64] {
        if let flag = texts.first(where: { $0.hasPrefix("--") }) {
            throw CLIError(description: "unknown option \"\(flag.prefix(40))\" (see --help)", exitCode: ExitStatus.usage)
        }
        let nonPositive = texts.filter { Int64($0).map { $0 <= 0 } ?? false }
        guard nonPositive.isEmpty else {
            throw CLIError.configuration("entry ids must be positive integers, not negative or zero: \(nonPositive.prefix(5).joined(separator: ", "))")
        }
        let bad = texts.filter { Int64($0) == nil }
        guard bad.isEmpty else {
            throw CLIError.configuration("not an entry id (a positive integer): \(bad.prefix(5).map { "\"\($0)\"" }.joined(separator: ", "))")
        }
        return texts.compactMap { Int64($0) }
    }

    static func consumer(_ text: String) throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.count <= 200, !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw CLIError.configuration("--consumer must be a non-empty name of at most 200 printable characters")
        }
        return trimmed
    }

    static func store(_ global: GlobalOptions) throws -> DatabaseStore {
        DatabaseStore.open(try global.resolvedDatabaseURL())
    }

    /// Prints what was settled on stdout and, when some ids were refused, exits 65 with one line.
    /// ack and release: validate the ids and consumer, settle them, report in one line.
    static func settle(
        _ texts: [String], consumer: String?, global: GlobalOptions, verb: String,
        _ operation: (DatabaseStore, [Int64], String?) async throws -> WinbackSettlement
    ) async throws {
        try await reportingErrors {
            let ids = try Self.ids(texts)
            guard !ids.isEmpty else { throw CLIError.configuration("give at least one entry id") }
            let consumer = try consumer.map(Self.consumer)
            let store = try Self.store(global)
            try await store.schemaCheck()
            try Self.report(try await operation(store, ids, consumer), verb: verb)
        }
    }

    static func report(_ result: WinbackSettlement, verb: String) throws {
        var line = "\(verb) \(result.settled.count)"
        if !result.alreadyDone.isEmpty { line += " (\(result.alreadyDone.count) already done)" }
        print(line)
        guard result.refused.isEmpty else {
            let list = result.refused.prefix(20).map { "\($0.id) (\($0.why))" }.joined(separator: ", ")
            let more = result.refused.count > 20 ? ", and \(result.refused.count - 20) more" : ""
            throw CLIError(description: "not \(verb): \(list)\(more)", exitCode: ExitStatus.dataError)
        }
    }

    struct Claim: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Claim due entries of one campaign; prints each as one JSON object per line, oldest first.",
            discussion: """
                Claims pending entries whose not_before has come and whose expires_at has not passed, and entries whose \
                claim lease ran out. Entries past expires_at become expired first. Concurrent consumers never get the \
                same entry.

                Fields: id, original_transaction_id, app_account_token, customer_ref, campaign, product_id, \
                reason, offer_ids, not_before, expires_at, episode, status, claimed_by, claimed_at, claim_expires_at, \
                created_at, opened_at, offer_id, holdout, outcome, outcome_reason, outcome_at, and offer: for an entry with a \
                promotional offer, {"offer_id", "product_id", "key_id", "nonce", "timestamp", "signature", "jws"} \
                signed now with a fresh nonce (good for 24 hours; claim again for a fresh one), else null \
                (times in ISO 8601 UTC; absent values are null).
                """
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var app: AppOptions

        @Option(name: .customLong("campaign"), help: "save_offer, billing_fix, winback_offer or resubscribe_prompt.")
        var campaign: String

        @Option(name: .customLong("consumer"), help: "This consumer's name, recorded as claimed_by.")
        var consumer: String

        @Option(name: .customLong("limit"), parsing: .unconditional, help: "Most entries to claim (1...10000).")
        var limit = 100

        @Option(name: .customLong("lease"), parsing: .unconditional, help: ArgumentHelp("How long the claim holds before others may take the entries (e.g. 15m, 1h).", valueName: "duration"))
        var lease = "15m"

        @Option(name: .customLong("as-of"), help: ArgumentHelp("The moment to claim at, ISO 8601 (default: now); offers are still signed at the real time, as Apple requires.", valueName: "time"))
        var asOf: String?

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let campaign = try WinbackCommand.campaign(self.campaign)
                let consumer = try WinbackCommand.consumer(self.consumer)
                guard (1...10_000).contains(limit) else { throw CLIError.configuration("--limit \(limit) is not between 1 and 10000") }
                let lease = try parseDurationSetting("--lease", self.lease, positive: true)
                let at = try TimeArgument.parse(asOf, flag: "--as-of") ?? Date()
                let store = try WinbackCommand.store(global)
                try await store.schemaCheck()
                let apps = try await app.named(store)
                if let endpoint = try await store.webhookConsumer(campaign: campaign.rawValue, apps: apps) {
                    throw CLIError.configuration("campaign \(campaign.rawValue) is consumed by webhook endpoint \(endpoint) (one consumer per campaign): `churnwatch webhooks set \(endpoint) --no-campaigns` first, or claim another campaign")
                }
                // The key is checked before anything is claimed: a campaign with offers needs it.
                let signer = try await store.offersConfigured(campaign: campaign, apps: apps) ? try await OffersCommand.signers(store) : nil
                let claim = try await store.winbackClaim(campaign: campaign, consumer: consumer, limit: limit, lease: lease, asOf: at,
                                                     apps: apps)
                if claim.expired > 0 {
                    Logger(label: "churnwatch.winback").info("expired entries past their window", metadata: [
                        "campaign": "\(campaign.rawValue)", "expired": "\(claim.expired)"])
                }
                for entry in claim.entries {
                    var json = WinbackQueueEntryJSON(entry)
                    json.withOffer = true
                    // Signed at the wall clock's time, whatever --as-of says: Apple accepts a
                    // signature for 24 hours after its timestamp, in real time.
                    if let signer { json.offer = try OffersCommand.sign(entry, signer, now: Date()).map(SignedOfferJSON.init) }
                    print(try JSONOutput.line(json))
                }
            }
        }
    }

    struct Ack: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Mark claimed entries done (their messages were sent).",
            discussion: """
                Prints "acked N". Acking an entry already done again is not an error (a retried ack). \
                Ids that are not claimed (pending, obsolete, expired, unknown, or claimed by another consumer when \
                --consumer is given) are left alone and named on one line; the exit code is then 65. \
                Entry ids are unique across apps: no --app.
                """
        )

        @OptionGroup var global: GlobalOptions

        @Option(name: .customLong("consumer"), help: "Only ack entries claimed by this consumer.")
        var consumer: String?

        @Argument(parsing: .allUnrecognized, help: "Entry ids.")
        var ids: [String]

        func run() async throws {
            global.bootstrapLogging()
            try await WinbackCommand.settle(self.ids, consumer: consumer, global: global, verb: "acked") { store, ids, consumer in
                try await store.winbackAck(ids: ids, consumer: consumer)
            }
        }
    }

    struct Release: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give claimed entries back (pending again, for any consumer).",
            discussion: """
                Prints "released N". Ids that are not claimed (or claimed by another consumer when --consumer is given) \
                are left alone and named on one line; the exit code is then 65. Entry ids are unique across apps: no --app.
                """
        )

        @OptionGroup var global: GlobalOptions

        @Option(name: .customLong("consumer"), help: "Only release entries claimed by this consumer.")
        var consumer: String?

        @Argument(parsing: .allUnrecognized, help: "Entry ids.")
        var ids: [String]

        func run() async throws {
            global.bootstrapLogging()
            try await WinbackCommand.settle(self.ids, consumer: consumer, global: global, verb: "released") { store, ids, consumer in
                try await store.winbackRelease(ids: ids, consumer: consumer)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List entries as JSON lines, oldest first (changes nothing)."
        )

        @OptionGroup var global: GlobalOptions
        @OptionGroup var app: AppOptions

        @Option(name: .customLong("campaign"), help: "Only this campaign.")
        var campaign: String?

        @Option(name: .customLong("status"), help: "Only this status: pending, claimed, done, obsolete, expired or held_out.")
        var status: String?

        @Option(name: .customLong("limit"), parsing: .unconditional, help: "Most entries to list (1...100000).")
        var limit = 1000

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let campaign = try self.campaign.map(WinbackCommand.campaign)
                let status = try self.status.map { text -> WinbackQueueEntry.Status in
                    guard let s = WinbackQueueEntry.Status(rawValue: text) else {
                        throw CLIError.configuration("unknown status \"\(text)\": use one of \(WinbackQueueEntry.Status.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                    return s
                }
                guard (1...100_000).contains(limit) else { throw CLIError.configuration("--limit \(limit) is not between 1 and 100000") }
                let store = try WinbackCommand.store(global)
                try await store.schemaCheck()
                for entry in try await store.winbackList(campaign: campaign, status: status, limit: limit, apps: try await app.named(store)) {
                    print(try JSONOutput.line(WinbackQueueEntryJSON(entry)))
                }
            }
        }
    }
}

/// One entry as consumers read it: the contract's column names, nulls kept.
struct WinbackQueueEntryJSON: Encodable {
    var entry: WinbackQueueEntry

    /// The signed offer (claim only; printed, never stored).
    var offer: SignedOfferJSON?
    var withOffer = false

    init(_ entry: WinbackQueueEntry) { self.entry = entry }

    enum Key: String, CodingKey {
        case id, original_transaction_id, app_account_token, customer_ref, campaign, product_id, reason, offer_ids,
             not_before, expires_at, episode, status, claimed_by, claimed_at, claim_expires_at, created_at, opened_at
        case offer_id, holdout, outcome, outcome_reason, outcome_at, offer, bundle_id
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(entry.id, forKey: .id)
        try c.encode(entry.originalTransactionId, forKey: .original_transaction_id)
        try c.encode(entry.bundleId, forKey: .bundle_id)
        try c.encode(entry.appAccountToken?.uuidString.lowercased(), forKey: .app_account_token)
        try c.encode(entry.customerRef, forKey: .customer_ref)
        try c.encode(entry.campaign.rawValue, forKey: .campaign)
        try c.encode(entry.productId, forKey: .product_id)
        try c.encode(entry.reason, forKey: .reason)
        try c.encode(entry.offerIds, forKey: .offer_ids)
        try c.encode(entry.notBefore, forKey: .not_before)
        try c.encode(entry.expiresAt, forKey: .expires_at)
        try c.encode(entry.episode, forKey: .episode)
        try c.encode(entry.status.rawValue, forKey: .status)
        try c.encode(entry.claimedBy, forKey: .claimed_by)
        try c.encode(entry.claimedAt, forKey: .claimed_at)
        try c.encode(entry.claimExpiresAt, forKey: .claim_expires_at)
        try c.encode(entry.createdAt, forKey: .created_at)
        try c.encode(entry.openedAt, forKey: .opened_at)
        try c.encode(entry.offerId, forKey: .offer_id)
        try c.encode(entry.holdout, forKey: .holdout)
        try c.encode(entry.outcome, forKey: .outcome)
        try c.encode(entry.outcomeReason, forKey: .outcome_reason)
        try c.encode(entry.outcomeAt, forKey: .outcome_at)
        if withOffer { try c.encode(offer, forKey: .offer) }
    }
}
