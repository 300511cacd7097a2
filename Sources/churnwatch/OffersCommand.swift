import AppStoreServerAPI
import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation

struct OffersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offers",
        abstract: "Configure the promotional offer each campaign gives, with its holdout share; sign offers for entries.",
        discussion: """
            An offer applies to the entries created after it is set: each gets the offer id, and a share of them \
            (--holdout, drawn per subscription, campaign and episode) is held out: status held_out, never claimable, \
            so that `churnwatch outcomes` can tell what the offer changed.

            Exit codes: 0 done; 65 some entries could not be signed (one line names them); 78 a bad value or a \
            missing signing setting; 64 a malformed command line; 69 database unreachable.
            """,
        subcommands: [Set.self, List.self, Remove.self, Sign.self]
    )

    static func name(_ text: String, flag: String) throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.count <= 200, !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw CLIError.configuration("\(flag) must be a non-empty identifier of at most 200 printable characters")
        }
        return trimmed
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Give a campaign's entries a promotional offer (for one product, or all), with a holdout share.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var app: AppOptions

        @Option(name: .customLong("campaign"), help: "save_offer, billing_fix, winback_offer or resubscribe_prompt.")
        var campaign: String

        @Option(name: .customLong("offer-id"), help: "The promotional offer id, as in App Store Connect.")
        var offerId: String

        @Option(name: .customLong("product"), help: "Only entries of this product (default: every product).")
        var product: String?

        @Option(name: .customLong("holdout"), help: ArgumentHelp("Share of entries held out, 0 to below 1 (default 0).", valueName: "share"))
        var holdout = "0"

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let campaign = try WinbackCommand.campaign(self.campaign)
                let offerId = try OffersCommand.name(self.offerId, flag: "--offer-id")
                let product = try self.product.map { try OffersCommand.name($0, flag: "--product") }
                guard let share = Double(holdout), share >= 0, share < 1 else {
                    throw CLIError.configuration("--holdout \"\(holdout)\" is not a share from 0 to below 1 (e.g. 0.1)")
                }
                let store = try await app.singleStore(global, marking: true)
                try await store.offersSet(CampaignOffer(campaign: campaign, productId: product, offerId: offerId, holdout: share))
                print("offer set: \(campaign.rawValue) \(product ?? "(all products)") \(offerId) holdout \(share)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the configured offers.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var app: AppOptions

        @Flag(name: .customLong("json"), help: "One JSON object per line: campaign, product_id (null: all), offer_id, holdout, updated_at.")
        var json = false

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let store = try await app.singleStore(global)
                let offers = try await store.offersList()
                if json {
                    for o in offers { print(try JSONOutput.line(OfferJSON(o))) }
                    return
                }
                print("campaign             product                  offer_id                 holdout")
                for o in offers {
                    print(o.campaign.rawValue.padding(toLength: 21, withPad: " ", startingAt: 0)
                          + (o.productId ?? "(all)").padding(toLength: 25, withPad: " ", startingAt: 0)
                          + o.offerId.padding(toLength: 25, withPad: " ", startingAt: 0) + String(o.holdout))
                }
                if offers.isEmpty { print("no offers configured (churnwatch offers set --campaign C --offer-id ID)") }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a campaign's offer (for one product, or the all-products one); entries keep theirs.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var app: AppOptions

        @Option(name: .customLong("campaign"), help: "The campaign.")
        var campaign: String

        @Option(name: .customLong("product"), help: "The product's offer (default: the all-products one).")
        var product: String?

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let campaign = try WinbackCommand.campaign(self.campaign)
                let product = try self.product.map { try OffersCommand.name($0, flag: "--product") }
                let store = try await app.singleStore(global, marking: true)
                let n = try await store.offersRemove(campaign: campaign, productId: product)
                print(n == 0 ? "removed 0 (no such offer)" : "removed \(n)")
            }
        }
    }

    struct Sign: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign the offers of entries claimed with SQL: one JSON line per entry, with a fresh nonce.",
            discussion: """
                Prints {"id", "original_transaction_id", "offer": {"offer_id", "product_id", "key_id", "nonce", \
                "timestamp", "signature", "jws"}} per entry. Needs APPSTORE_ISSUER_ID, APPSTORE_KEY_ID, \
                APPSTORE_PRIVATE_KEY_PATH and APPSTORE_BUNDLE_ID. Entries without an offer, held out, obsolete, expired \
                or unknown are named on one line and the exit code is 65; the others are still printed.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var app: AppOptions

        @Option(name: .customLong("as-of"), help: ArgumentHelp("The signing time, ISO 8601 (default: now).", valueName: "time"))
        var asOf: String?

        @Argument(help: "Entry ids.")
        var ids: [String]

        func run() async throws {
            global.bootstrapLogging()
            try await reportingErrors {
                let ids = try WinbackCommand.ids(self.ids)
                guard !ids.isEmpty else { throw CLIError.configuration("give at least one entry id") }
                let at = try TimeArgument.parse(asOf, flag: "--as-of") ?? Date()
                let store = try await app.singleStore(global)
                let signer = try await OffersCommand.signers(store.database)
                let entries = try await store.winbackEntries(ids: Array(Swift.Set(ids)).sorted())
                var refused: [String] = []
                for id in Swift.Set(ids).subtracting(entries.map(\.id)).sorted() { refused.append("\(id) (unknown)") }
                for entry in entries {
                    if entry.status == .heldOut || entry.status == .obsolete || entry.status == .expired {
                        refused.append("\(entry.id) (\(entry.status.rawValue))")
                    } else if let offer = try OffersCommand.sign(entry, signer, now: at) {
                        print(try JSONOutput.line(SignedEntryJSON(id: entry.id, original_transaction_id: entry.originalTransactionId,
                                                                  offer: SignedOfferJSON(offer))))
                    } else {
                        refused.append("\(entry.id) (no offer)")
                    }
                }
                if !refused.isEmpty {
                    throw CLIError(description: "not signed: \(refused.prefix(20).joined(separator: ", "))", exitCode: ExitStatus.dataError)
                }
            }
        }
    }

    /// The signer from the environment; exit 78 naming the missing setting.
    static func signer(_ env: [String: String] = ProcessInfo.processInfo.environment) throws -> PromotionalOfferSigner {
        do {
            return try PromotionalOfferSigner.fromEnvironment(env)
        } catch {
            throw CLIError.configuration("\(error)")
        }
    }

    /// A signer per app: an offer is signed for its entry's app (its bundle id, and its own key
    /// when `churnwatch apps` gave it one; the deployment's otherwise).
    static func signers(_ store: DatabaseStore) async throws -> @Sendable (String) throws -> PromotionalOfferSigner {
        typealias V = AppStoreConfiguration.Variable
        let env = ProcessInfo.processInfo.environment
        let deployment = try signer()
        let deploymentApp = env[V.bundleId]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let apps = try await store.appsList()
        var signers = [deploymentApp: deployment]
        for app in apps where app.bundleId != deploymentApp || app.keyId != nil {
            var own = env.merging(try AppleOptions.keyOverrides(app, env: env)) { _, own in own }
            own[V.bundleId] = app.bundleId
            signers[app.bundleId] = try signer(own)
        }
        let ready = signers
        return { bundleId in
            guard let signer = ready[bundleId] else {
                throw CLIError.configuration("an entry of app \(bundleId), which is not in churnwatch.apps: add it with `churnwatch apps add`")
            }
            return signer
        }
    }

    /// The entry's offer signed at `now` with a fresh nonce; nil when the entry has no offer.
    static func sign(_ entry: WinbackQueueEntry, _ signers: (String) throws -> PromotionalOfferSigner, now: Date) throws -> PromotionalOfferSigner.SignedOffer? {
        guard let offerId = entry.offerId, let productId = entry.productId, !entry.holdout else { return nil }
        return try signers(entry.bundleId).sign(productId: productId, offerId: offerId, appAccountToken: entry.appAccountToken?.uuidString,
                               transactionId: entry.originalTransactionId, now: now)
    }
}

/// The `offer` object of `winback claim` and `offers sign` lines.
struct SignedOfferJSON: Encodable {
    var offer_id: String, product_id: String, key_id: String, nonce: String, timestamp: Int64, signature: String, jws: String

    init(_ o: PromotionalOfferSigner.SignedOffer) {
        offer_id = o.offerId
        product_id = o.productId
        key_id = o.keyId
        nonce = o.nonce
        timestamp = o.timestamp
        signature = o.signature
        jws = o.jws
    }
}

struct SignedEntryJSON: Encodable {
    var id: Int64
    var original_transaction_id: String
    var offer: SignedOfferJSON
}

struct OfferJSON: Encodable {
    var campaign: String, product_id: String?, offer_id: String, holdout: Double, updated_at: Date?

    init(_ o: CampaignOffer) {
        campaign = o.campaign.rawValue
        product_id = o.productId
        offer_id = o.offerId
        holdout = o.holdout
        updated_at = o.updatedAt
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(campaign, forKey: .campaign)
        try c.encode(product_id, forKey: .product_id)
        try c.encode(offer_id, forKey: .offer_id)
        try c.encode(holdout, forKey: .holdout)
        try c.encode(updated_at, forKey: .updated_at)
    }

    enum CodingKeys: String, CodingKey { case campaign, product_id, offer_id, holdout, updated_at }
}
