import AppStoreModels
import AppStoreServerAPI
import ChurnStore
import Foundation
import Logging

/// What the `messages` commands that call Apple share: the app's client (its key, base URL and
/// limits, as every other Apple call) and Apple's refusals as one line.
enum MessagesApple {
    static func open(_ global: GlobalOptions, _ app: AppOptions, _ apple: AppleOptions, marking: Bool = false) async throws
        -> (client: AppStoreServerAPIClient, store: ChurnStore) {
        let store = try await app.singleStore(global, marking: marking)
        let logger = Logger(label: "churnwatch.messages")
        let record = try await store.database.appsList().first { $0.bundleId == store.app }
        let config = try record.map { try apple.configuration(for: $0, deploymentApp: AppOptions.deploymentApp(), logger: logger) }
            ?? apple.configuration(logger: logger)
        return (AppStoreServerAPIClient(configuration: config, logger: Logger(label: "churnwatch.appstore")), store)
    }

    /// Apple's codes for the Retention Messaging API, named (Apple's documentation calls them so).
    static let codes: [Int64: String] = [
        4_000_161: "the image is not a usable PNG", 4_000_162: "the header is too long", 4_000_163: "the body is too long",
        4_000_164: "the locale is not valid", 4_000_175: "the alt text is too long", 4_000_211: "the performance test request is not valid",
        4_000_212: "no such performance test", 4_000_213: "a performance test is running already", 4_000_215: "the realtime URL is not valid",
        4_000_216: "the image has the wrong size", 4_000_218: "too many bullet points", 4_000_219: "a bullet point's text is too long",
        4_000_224: "a header above the image needs an image", 4_030_014: "the app has as many images as Apple allows",
        4_030_016: "the app has as many messages as Apple allows", 4_030_017: "the message is not approved (yet)",
        4_030_018: "the image is not approved (yet)", 4_030_019: "the image is used by a message: delete the message first",
        4_030_026: "the Production realtime URL needs a passed performance test first (messages performance-test)",
        4_040_014: "no such image", 4_040_015: "no such message", 4_040_018: "no such performance test",
        4_040_020: "no default message for that product and locale", 4_040_021: "no realtime URL is set",
    ]

    /// The value, or one line saying what Apple answered (exit 65 for a refusal, 75 when Apple is
    /// unavailable: run again, 78 for a key or server setting).
    static func value<T>(_ outcome: AppStoreOutcome<T>, _ what: String) throws -> T {
        switch outcome {
        case .success(let v): return v
        case .badRequest(let code), .notFound(let code):
            let named = code.flatMap { codes[$0.rawValue] }.map { ": \($0)" } ?? ""
            throw CLIError(description: "\(what): Apple refused (\(code?.description ?? "no code"))\(named)", exitCode: ExitStatus.dataError)
        case .rateLimited, .retryable, .malformedResponse:
            throw CLIError(description: "\(what): \(outcome) (run again later)", exitCode: ExitStatus.resumable)
        case .unauthorized, .untrustedServer, .verificationFailed:
            throw CLIError.configuration("\(what): \(outcome)")
        }
    }

    /// Whether `data` is a PNG: its signature, then an IHDR chunk with a width and a height.
    static func pngProblem(_ data: Data) -> String? {
        let bytes = [UInt8](data.prefix(24))
        guard bytes.count == 24, bytes[0..<8] == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] else { return "is not a PNG (no PNG signature)" }
        guard bytes[12..<16] == [0x49, 0x48, 0x44, 0x52] else { return "is not a PNG (its first chunk is not IHDR)" }
        let width = bytes[16..<20].reduce(0) { $0 << 8 | Int($1) }, height = bytes[20..<24].reduce(0) { $0 << 8 | Int($1) }
        guard width > 0, height > 0 else { return "is a PNG of no size (\(width)×\(height))" }
        guard data.count <= 5 << 20 else { return "is over 5 MB" }
        return nil
    }

    /// The identifier of a message or image: a UUID, lowercased.
    static func identifier(_ text: String, _ flag: String) throws -> String {
        guard let uuid = UUID(uuidString: text) else { throw CLIError.configuration("\(flag) \"\(text.prefix(60))\" is not a UUID") }
        return uuid.uuidString.lowercased()
    }

    /// `text` within Apple's `limit` characters, named by `flag` when not.
    static func within(_ text: String, _ limit: Int, _ flag: String) throws -> String {
        guard !text.isEmpty, text.count <= limit else {
            throw CLIError.configuration("\(flag) is \(text.count) characters: Apple takes 1 to \(limit)")
        }
        return text
    }

    /// The states Apple gives the app's messages, by identifier (lowercased).
    static func messageStates(_ client: AppStoreServerAPIClient) async throws -> [String: String] {
        let list = try value(await client.messageList(), "reading the message list")
        return Dictionary((list.messageIdentifiers ?? []).compactMap { item in
            item.messageIdentifier.map { ($0.lowercased(), item.messageState ?? "?") }
        }, uniquingKeysWith: { a, _ in a })
    }

    /// Refuses a message Apple does not know or has not approved, in one line.
    static func requireApproved(_ messageId: String, _ client: AppStoreServerAPIClient) async throws {
        let states = try await messageStates(client)
        guard let state = states[messageId.lowercased()] else {
            throw CLIError.configuration("message \(messageId) is not one of this app's at Apple: upload it first (churnwatch messages upload)")
        }
        guard state == "APPROVED" else {
            throw CLIError.configuration("message \(messageId) is \(state) at Apple: only an APPROVED message can be shown (see churnwatch messages list)")
        }
    }
}
