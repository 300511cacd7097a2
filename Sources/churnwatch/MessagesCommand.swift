import ArgumentParser
import ChurnModel
import ChurnStore
import Foundation

struct MessagesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "messages",
        abstract: "The cancel page: the rules that choose what `serve` answers to Apple's Get Retention Message, and the default messages.",
        discussion: """
            Rules are tried by priority (then name); the first that matches the request (product, subscription group, \
            segment, tenure, locale) answers with its message, switch-plan suggestion or promotional offer; a share \
            (--holdout, drawn once per subscriber) gets the default message instead. `serve` uses a change from its next \
            request on. See docs/contracts.md "The cancel page".

            upload, upload-image, list, delete, url and performance-test call Apple's Retention Messaging API with the \
            app's key, as every other Apple call; a rule or a per-product default must name a message Apple APPROVED.

            Exit codes: 0 done; 65 Apple refused (one line names Apple's code), or the performance test failed; 75 Apple \
            unavailable (run again); 78 a bad value or setting; 64 a malformed command line; 69 database unreachable.
            """,
        subcommands: [MessageUpload.self, ImageUpload.self, MessageList.self, MessageDelete.self, Rules.self, Defaults.self,
                      RealtimeURLCommand.self, PerformanceTestCommand.self]
    )

    struct Rules: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Set, list and remove the cancel page's rules.",
                                                        subcommands: [RuleSet.self, RuleList.self, RuleRemove.self])
    }

    struct Defaults: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "default", abstract: "Set, list and remove the default message per product and locale.",
            subcommands: [DefaultSet.self, DefaultList.self, DefaultRemove.self])
    }

    /// A comma-separated list, trimmed, empty items dropped.
    static func list(_ text: String?) -> [String] {
        (text ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    static func locale(_ text: String) throws -> String {
        let ok = text.range(of: #"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$"#, options: .regularExpression) != nil
        guard ok else { throw CLIError.configuration("locale \"\(text.prefix(40))\" is not a locale such as en-US, or a language such as en") }
        return text
    }

    static func message(_ text: String) throws -> String {
        guard let uuid = UUID(uuidString: text) else {
            throw CLIError.configuration("--message \"\(text.prefix(60))\" is not a message identifier (the UUID the message was uploaded with)")
        }
        return uuid.uuidString.lowercased()
    }
}

struct RuleSet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "set", abstract: "Create or replace a rule (by --name); its message must be APPROVED at Apple.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions

    @Option(name: .customLong("name"), help: "The rule's name (unique per app).") var name: String
    @Option(name: .customLong("priority"), help: "Lower is tried first (default 100).") var priority = 100
    @Option(name: .customLong("kind"), help: "message, alternate_product or promotional_offer.") var kind: String
    @Option(name: .customLong("message"), help: "The message shown (its identifier, a UUID).") var message: String
    @Option(name: .customLong("product"), help: "Only customers on this product.") var product: String?
    @Option(name: .customLong("group"), help: "Only customers in this subscription group.") var group: String?
    @Option(name: .customLong("segments"), help: "Only these segments (comma-separated, e.g. will_not_renew,billing_retry).") var segments: String?
    @Option(name: .customLong("min-tenure-days"), help: "Only customers subscribed at least this many days.") var minTenure: Int?
    @Option(name: .customLong("max-tenure-days"), help: "Only customers subscribed at most this many days.") var maxTenure: Int?
    @Option(name: .customLong("locales"), help: "Only these locales or languages (comma-separated, e.g. en,fr-FR).") var locales: String?
    @Option(name: .customLong("viewed-before"), help: ArgumentHelp("Only a first visit (never: no view recorded before), a repeated one (within:N: a view within the N days before), or any.", valueName: "any|never|within:N")) var viewedBefore = "any"
    @Option(name: .customLong("alternate-product"), help: "alternate_product: the product suggested.") var alternateProduct: String?
    @Option(name: .customLong("billing-plan-type"), help: "alternate_product: its billing plan type (optional).") var billingPlanType: String?
    @Option(name: .customLong("offer-id"), help: "promotional_offer: the offer's identifier.") var offerId: String?
    @Option(name: .customLong("holdout"), help: ArgumentHelp("Share held out (shown the default), 0 to below 1.", valueName: "share")) var holdout = "0"

    func rule() throws -> RetentionRule {
        guard let kind = RetentionAnswerKind(rawValue: kind) else {
            throw CLIError.configuration("--kind \"\(kind.prefix(40))\" is not one of message, alternate_product, promotional_offer")
        }
        let segments = try MessagesCommand.list(self.segments).map { text in
            guard let s = Segment(rawValue: text) else {
                throw CLIError.configuration("--segments: \"\(text.prefix(40))\" is not a segment (docs/contracts.md \"Segments\")")
            }
            return s
        }
        guard let viewed = ViewedBefore(viewedBefore) else {
            throw CLIError.configuration("--viewed-before \"\(viewedBefore.prefix(40))\" is not any, never or within:N (N days, 1 to 9999)")
        }
        guard let share = Double(holdout) else { throw CLIError.configuration("--holdout \"\(holdout)\" is not a share from 0 to below 1 (e.g. 0.1)") }
        let rule = RetentionRule(
            name: try OffersCommand.name(name, flag: "--name"), priority: priority, productId: try product.map { try OffersCommand.name($0, flag: "--product") },
            subscriptionGroupId: try group.map { try OffersCommand.name($0, flag: "--group") }, segments: segments,
            minTenureDays: minTenure, maxTenureDays: maxTenure, locales: try MessagesCommand.list(locales).map(MessagesCommand.locale),
            viewedBefore: viewed, kind: kind, messageId: try MessagesCommand.message(message),
            alternateProductId: try alternateProduct.map { try OffersCommand.name($0, flag: "--alternate-product") },
            billingPlanType: billingPlanType, offerId: try offerId.map { try OffersCommand.name($0, flag: "--offer-id") }, holdout: share)
        if let problem = rule.problem { throw CLIError.configuration(problem) }
        return rule
    }

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let rule = try rule()
            let (client, store) = try await MessagesApple.open(global, app, apple, marking: true)
            try await MessagesApple.requireApproved(rule.messageId, client)
            try await store.retentionRuleSet(rule)
            print("rule set: \(rule.name) (priority \(rule.priority)): \(rule.kind.rawValue) \(rule.messageId) holdout \(rule.holdout)")
        }
    }
}

struct RuleList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the rules in the order they are tried (JSON lines).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let (rules, _) = try await app.singleStore(global).retentionRules()
            for r in rules { print(try JSONOutput.line(r)) }
            if rules.isEmpty { print("no rules (churnwatch messages rules set --name N --kind message --message UUID)") }
        }
    }
}

struct RuleRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a rule; its past answers stay recorded.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @Option(name: .customLong("name"), help: "The rule's name.") var name: String

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let n = try await app.singleStore(global, marking: true).retentionRuleRemove(name)
            print(n == 0 ? "removed 0 (no such rule)" : "removed \(n)")
        }
    }
}

struct DefaultSet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Set the default message of a product and locale, at Apple and here (without both: churnwatch's own, for every product or locale).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @Option(name: .customLong("message"), help: "The message (its identifier, a UUID).") var message: String
    @Option(name: .customLong("product"), help: "The product (default: every product).") var product: String?
    @Option(name: .customLong("locale"), help: "The locale, e.g. en-US (default: every locale).") var locale: String?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let d = RetentionDefault(productId: try product.map { try OffersCommand.name($0, flag: "--product") },
                                     locale: try locale.map(MessagesCommand.locale), messageId: try MessagesCommand.message(message))
            let (client, store) = try await MessagesApple.open(global, app, apple, marking: true)
            try await MessagesApple.requireApproved(d.messageId, client)
            if let product = d.productId, let locale = d.locale {
                // Apple's default for the product and locale: what the App Store shows when an answer fails.
                _ = try MessagesApple.value(await client.setDefaultMessage(productId: product, locale: locale, messageId: d.messageId),
                                            "setting the default message of \(product) \(locale) at Apple")
            }
            try await store.retentionDefaultSet(d)
            print("default set: \(d.productId ?? "(every product)") \(d.locale ?? "(every locale)") \(d.messageId)")
        }
    }
}

struct DefaultList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the default messages (JSON lines).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let (_, defaults) = try await app.singleStore(global).retentionRules()
            for d in defaults { print(try JSONOutput.line(d)) }
            if defaults.isEmpty { print("no default messages (churnwatch messages default set --message UUID)") }
        }
    }
}

struct DefaultRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove the default message of a product and locale (at Apple too), or churnwatch's own.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var app: AppOptions
    @OptionGroup var apple: AppleOptions
    @Option(name: .customLong("product"), help: "The product (default: the every-product one).") var product: String?
    @Option(name: .customLong("locale"), help: "The locale (default: the every-locale one).") var locale: String?

    func run() async throws {
        global.bootstrapLogging()
        try await reportingErrors {
            let (client, store) = try await MessagesApple.open(global, app, apple, marking: true)
            if let product, let locale {
                switch await client.deleteDefaultMessage(productId: product, locale: locale) {
                case .notFound: break  // Apple had none: churnwatch's row is still removed
                case let outcome: _ = try MessagesApple.value(outcome, "removing the default message of \(product) \(locale) at Apple")
                }
            }
            let n = try await store.retentionDefaultRemove(productId: product, locale: locale)
            print(n == 0 ? "removed 0 (no such default)" : "removed \(n)")
        }
    }
}
