import Foundation
import Logging
import Synchronization

/// What a payload's claim says about its app, read before verification and only to choose
/// whose keys verify it.
enum ClaimRead<Key: Sendable>: Sendable {
    /// Not a JWS whose payload is JSON: it cannot verify.
    case unreadable
    /// Readable, but naming no app.
    case none
    case names(Key)
}

/// The app a claim names, as serve holds it.
public enum AppLookup<App: Sendable>: Sendable {
    case open(App)
    /// An app of the database whose settings cannot be used: the one line saying why.
    case misconfigured(String)
    case unknown
}

/// The steps both of serve's Apple routes (`/apple/notifications`, `/apple/retention-message`)
/// take before their own work, the same way: the body's `signedPayload`, the claim, the app,
/// and the refusal of what does not pass. Each refusal is counted with its reason and logged
/// at most once per 10 seconds per route (a forger cannot fill the log), with the true reason.
final class AppleDoor: Sendable {
    /// "notification" or "request": how the refusals name what was posted.
    private let noun: String
    private let count: @Sendable (String) -> Void
    private let logger: Logger
    /// When a refusal was last logged, and how many were not logged since.
    private let logged = Mutex<(at: ContinuousClock.Instant?, quiet: Int)>((nil, 0))

    init(noun: String, logger: Logger, count: @escaping @Sendable (String) -> Void) {
        (self.noun, self.logger, self.count) = (noun, logger, count)
    }

    /// The body's `signedPayload` and the app its claim names, or the answer that refuses it:
    /// 400 (no `signedPayload`), 403 (unreadable: did not verify; names no app of this
    /// database), 503 (an app whose settings cannot be used: Apple delivers again once fixed).
    func admit<Key: Sendable, App: Sendable>(
        _ body: [UInt8], claim: (String) -> ClaimRead<Key>, find: (Key) async -> AppLookup<App>
    ) async -> Result<(payload: String, app: App), Refusal> {
        guard let payload = Self.signedPayload(body), !payload.isEmpty else {
            return .failure(refuse("body", 400, "the body is not a JSON object with a signedPayload string"))
        }
        let key: Key
        switch claim(payload) {
        case .unreadable: return .failure(refuse("verification", 403, "the \(noun) did not verify: it is not a JWS whose payload is JSON"))
        case .none: return .failure(refuse("unknown_app", 403, "the \(noun) names no app of this database"))
        case .names(let k): key = k
        }
        switch await find(key) {
        case .open(let app):
            return .success((payload, app))
        case .misconfigured(let why):
            return .failure(refuse("misconfigured_app", 503, "this app's settings cannot be used here: the operator must fix them",
                                   detail: why, level: .error))
        case .unknown:
            return .failure(refuse("unknown_app", 403, "the \(noun) names no app of this database (\(String(describing: key).prefix(160)))"))
        }
    }

    /// An answer that refuses what was posted (also for the route's own later checks).
    struct Refusal: Error {
        var response: ServeResponse
    }

    /// Counted, and logged at most once per 10 seconds.
    func refuse(_ reason: String, _ status: Int, _ why: String, detail: String? = nil, level: Logger.Level = .warning) -> Refusal {
        count(reason)
        let now = ContinuousClock.now
        let quiet: Int? = logged.withLock { state in
            if let at = state.at, now - at < .seconds(10) {
                state.quiet += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.quiet
        }
        if let quiet {
            var metadata: Logger.Metadata = ["status": "\(status)", "why": "\(why)", "refused_unlogged_before": "\(quiet)"]
            if let detail { metadata["error"] = "\(detail)" }
            logger.log(level: level, "a \(noun) was refused", metadata: metadata)
        }
        return Refusal(response: .text(status, why))
    }

    struct Body: Decodable {
        var signedPayload: String
    }

    /// The body's `signedPayload`: read directly when the body is exactly Apple's
    /// `{"signedPayload":"..."}` with a value free of escapes (a JWS always is), else by
    /// JSONDecoder (other spacing, other members).
    static func signedPayload(_ body: [UInt8]) -> String? {
        if let direct = plainSignedPayload(body) { return direct }
        return try? JSONDecoder().decode(Body.self, from: Data(body)).signedPayload
    }

    private static let member = Array(#""signedPayload""#.utf8)

    static func plainSignedPayload(_ body: [UInt8]) -> String? {
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }
        var i = 0
        func skip() { while i < body.count, isSpace(body[i]) { i += 1 } }
        func take(_ b: UInt8) -> Bool {
            skip()
            guard i < body.count, body[i] == b else { return false }
            i += 1
            return true
        }
        guard take(0x7B) else { return nil }
        skip()
        guard body.count - i >= member.count, body[i..<(i + member.count)].elementsEqual(member) else { return nil }
        i += member.count
        guard take(0x3A), take(0x22) else { return nil }
        let start = i
        while i < body.count, body[i] != 0x22 {
            // Escapes and control characters: JSONDecoder's to read.
            guard body[i] != 0x5C, body[i] >= 0x20 else { return nil }
            i += 1
        }
        guard i < body.count else { return nil }
        let value = body[start..<i]
        i += 1
        guard take(0x7D) else { return nil }
        skip()
        guard i == body.count else { return nil }
        return String(decoding: value, as: UTF8.self)
    }
}
