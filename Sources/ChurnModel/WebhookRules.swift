import Foundation

/// The message types churnwatch sends (docs/contracts.md "Webhooks").
public enum WebhookType: String, Sendable, CaseIterable {
    case churnEventCreated = "churn_event.created"
    case churnEventSuperseded = "churn_event.superseded"
    case segmentChanged = "segment.changed"
    case cancelPageViewed = "cancel_page.viewed"
    case winbackReady = "winback.ready"
    case webhookTest = "webhook.test"

    /// The types an endpoint can choose (a test message is sent whatever it chose).
    public static let selectable: [WebhookType] = allCases.filter { $0 != .webhookTest }
}

/// When a failed delivery is tried again: Standard Webhooks' example schedule (at once, then 5 s,
/// 5 min, 30 min, 2 h, 5 h, 10 h and 10 h after each failure), with jitter. A delivery that failed
/// as many times as the schedule has steps is dead.
public struct WebhookSchedule: Sendable, Equatable {
    /// The wait before attempt k+1 (index 0: the first attempt, at once).
    public var steps: [TimeInterval]
    /// The share of a wait drawn at random either side (0.1: ±10 %), so a receiver's outage does
    /// not bring every line back in the same second.
    public var jitter: Double

    public static let standard = WebhookSchedule(steps: [0, 5, 300, 1_800, 7_200, 18_000, 36_000, 36_000], jitter: 0.1)

    public init(steps: [TimeInterval], jitter: Double = 0.1) {
        (self.steps, self.jitter) = (steps, jitter)
    }

    /// Attempts before a delivery is dead.
    public var attempts: Int { steps.count }

    /// The wait after the `failed`-th failed attempt (1: the first), or nil when it was the
    /// last (the delivery is dead). `draw` is a number in [0, 1) (the caller's randomness).
    public func wait(afterFailure failed: Int, draw: Double) -> TimeInterval? {
        guard failed >= 1, failed < steps.count else { return nil }
        let base = steps[failed]
        return max(0, base * (1 + jitter * (2 * draw - 1)))
    }

    /// "0,5s,5m,30m,2h,5h,10h,10h": the steps as durations (s, m, h, d; a bare number is seconds).
    public static func parse(_ text: String) -> WebhookSchedule? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard (1...20).contains(parts.count) else { return nil }
        var steps: [TimeInterval] = []
        for part in parts {
            guard let seconds = Self.seconds(part), seconds >= 0, seconds <= 7 * 86_400 else { return nil }
            steps.append(seconds)
        }
        return WebhookSchedule(steps: steps)
    }

    static func seconds(_ text: String) -> TimeInterval? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        if let last = text.last, let unit = units[last] { return Double(text.dropLast()).map { $0 * unit } }
        return Double(text)
    }
}

/// What a sender does with a delivery after an attempt (or without one).
public enum WebhookNext: Sendable, Equatable {
    case delivered
    /// Tried again after `wait` seconds; the whole endpoint waits `pause` seconds when set (a
    /// Retry-After).
    case retry(wait: TimeInterval, pause: TimeInterval?)
    /// The last attempt failed: kept, visible, replayable.
    case dead
    /// 410: the endpoint is disabled, the delivery waits for it.
    case gone
    /// Not attempted (the sender stopped first): the lease is given back, nothing counted.
    case released

    /// The step after an attempt that ended in `outcome`, the delivery having failed
    /// `failedBefore` times already; `draw` in [0, 1) is the jitter's randomness.
    public static func after(_ outcome: WebhookOutcome, failedBefore: Int, schedule: WebhookSchedule, draw: Double) -> WebhookNext {
        switch outcome {
        case .delivered: return .delivered
        case .gone: return .gone
        case .failed(let notBefore, let pauseEndpoint):
            guard let wait = schedule.wait(afterFailure: failedBefore + 1, draw: draw) else { return .dead }
            return .retry(wait: max(wait, notBefore ?? 0), pause: pauseEndpoint ? notBefore : nil)
        }
    }
}

/// What an answer (or its absence) means for a delivery and its endpoint.
public enum WebhookOutcome: Sendable, Equatable {
    /// 2xx: delivered.
    case delivered
    /// Tried again by the schedule; `notBefore` seconds at least (a Retry-After), and the whole
    /// endpoint waits as long when `pauseEndpoint`.
    case failed(notBefore: TimeInterval?, pauseEndpoint: Bool)
    /// 410 Gone: the receiver says the endpoint is no more; it is disabled, the delivery kept.
    case gone

    /// The longest Retry-After obeyed: a receiver cannot park an endpoint for longer than a day.
    public static let longestRetryAfter: TimeInterval = 86_400

    /// Classifies an HTTP status (nil: no answer: refused, timed out, closed) and its
    /// Retry-After header (delta-seconds or an HTTP date), obeyed on 429 and 503.
    public static func classify(status: Int?, retryAfter: String?, now: Date) -> WebhookOutcome {
        guard let status else { return .failed(notBefore: nil, pauseEndpoint: false) }
        switch status {
        case 200..<300: return .delivered
        case 410: return .gone
        case 429, 503:
            guard let wait = retryAfter.flatMap({ Self.retryAfter($0, now: now) }) else {
                return .failed(notBefore: nil, pauseEndpoint: false)
            }
            return .failed(notBefore: min(wait, longestRetryAfter), pauseEndpoint: true)
        default: return .failed(notBefore: nil, pauseEndpoint: false)
        }
    }

    /// Seconds from `now`: "120", or "Wed, 21 Oct 2026 07:28:00 GMT"; nil when neither.
    public static func retryAfter(_ text: String, now: Date) -> TimeInterval? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(trimmed) { return seconds >= 0 ? TimeInterval(seconds) : nil }
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = TimeZone(identifier: "GMT")
        format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = format.date(from: trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}

/// An endpoint's name and URL, checked before anything is written.
public enum WebhookEndpointRules {
    public static func nameProblem(_ name: String) -> String? {
        let ok = name.range(of: "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", options: .regularExpression) != nil
        return ok ? nil : "endpoint name \"\(name.prefix(80))\" must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
    }

    /// Why `url` cannot be an endpoint's, or nil: an absolute http(s) URL with a host, no user
    /// or password in it, at most 2,000 characters; `https` unless `allowHTTP`.
    public static func urlProblem(_ text: String, allowHTTP: Bool) -> String? {
        guard (8...2_000).contains(text.count), let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(),
              let host = url.host, !host.isEmpty else {
            return "--url \"\(text.prefix(120))\" is not an absolute http(s) URL with a host"
        }
        guard url.user == nil, url.password == nil else { return "--url must not carry a user or password (the signature authenticates churnwatch)" }
        guard url.fragment == nil else { return "--url must not have a #fragment" }
        switch scheme {
        case "https": return nil
        case "http": return allowHTTP ? nil : "--url is http: use https, or add the endpoint with --allow-http (tests, a receiver on loopback)"
        default: return "--url scheme \(scheme) is not http or https"
        }
    }

    /// The types an endpoint takes, from `--types a,b` (empty: every type).
    public static func types(_ texts: [String]) -> Result<[WebhookType], EndpointError> {
        var out: [WebhookType] = []
        for text in texts.flatMap({ $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }) where !text.isEmpty {
            guard let type = WebhookType(rawValue: text), type != .webhookTest else {
                return .failure(EndpointError("unknown message type \"\(text.prefix(60))\": use \(WebhookType.selectable.map(\.rawValue).joined(separator: ", "))"))
            }
            if !out.contains(type) { out.append(type) }
        }
        return .success(out)
    }

    public struct EndpointError: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }
}
