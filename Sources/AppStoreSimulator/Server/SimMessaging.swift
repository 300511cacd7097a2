import Synchronization

/// One app's Retention Messaging configuration as Apple keeps it, in memory: images and messages
/// with their review, the default message per product and locale, the Get Retention Message URL
/// per environment, and performance tests. Review times are simulated: an upload is PENDING for
/// ``RetentionOptions/approvalDelayMs`` of the clock, then APPROVED (or REJECTED: a message with
/// a word of ``RetentionOptions/rejectWords``).
final class SimMessaging: Sendable {
    enum Review: String, Sendable {
        case pending = "PENDING"
        case approved = "APPROVED"
        case rejected = "REJECTED"
    }

    struct Image: Sendable {
        var uploadedAt: Int64
        var size: String
    }

    struct Message: Sendable {
        var body: RetentionWire.UploadMessageRequestBody
        var uploadedAt: Int64
        var rejected: Bool
        /// The images it shows (its image and its bullet points').
        var images: [String]
    }

    struct DefaultKey: Hashable, Sendable {
        var productId: String
        var locale: String
    }

    /// A URL and the simulated moment it was set: views before it are not posted to it.
    struct URLSetting: Sendable, Hashable {
        var url: String
        var since: Int64
    }

    /// One request of a performance test: its SendAttemptResult, and its time (nil: never sent).
    struct TestOutcome: Sendable {
        var latencyMs: Int64?
        var result: String
    }

    struct TestRun: Sendable {
        var config: RetentionWire.PerformanceTestConfig
        var target: String
        var outcomes: [TestOutcome] = []
        var finished = false
        var task: Task<Void, Never>?
    }

    struct State: Sendable {
        var images: [String: Image] = [:]
        var messages: [String: Message] = [:]
        var defaults: [DefaultKey: String] = [:]
        var urls: [SimEnvironment: URLSetting] = [:]
        /// A performance test passed (or `--retention-url` was given): the Production URL may be set.
        var passedTest = false
        var tests: [String: TestRun] = [:]
        var running: String?
    }

    let state: Mutex<State>
    let approvalDelay: Int64
    let rejectWords: Set<String>

    init(options: RetentionOptions) {
        var s = State()
        for env in [SimEnvironment.production, .sandbox] {
            if let url = options.url(sandbox: env == .sandbox) { s.urls[env] = URLSetting(url: url, since: .min) }
        }
        s.passedTest = options.productionURL != nil
        state = Mutex(s)
        approvalDelay = max(0, options.approvalDelayMs)
        rejectWords = Set(options.rejectWords.map { $0.lowercased() }.filter { !$0.isEmpty })
    }

    // MARK: Review

    func review(uploadedAt: Int64, rejected: Bool, at now: Int64) -> Review {
        if now < uploadedAt + approvalDelay { return .pending }
        return rejected ? .rejected : .approved
    }

    /// Whether the review rejects this text: one of its words (letters and digits) is a reject word.
    func rejects(_ m: RetentionWire.UploadMessageRequestBody) -> Bool {
        guard !rejectWords.isEmpty else { return false }
        let texts = [m.header, m.body] + (m.bulletPoints ?? []).map(\.text)
        return texts.contains { text in
            text.lowercased().split { !$0.isLetter && !$0.isNumber }.contains { rejectWords.contains(String($0)) }
        }
    }

    /// Whether the message may be shown at `t`: it exists and it and its images are APPROVED.
    func isShowable(_ id: String, at t: Int64) -> Bool {
        state.withLock { s in
            guard let m = s.messages[id], review(uploadedAt: m.uploadedAt, rejected: m.rejected, at: t) == .approved else {
                return false
            }
            return m.images.allSatisfy { s.images[$0].map { review(uploadedAt: $0.uploadedAt, rejected: false, at: t) == .approved } ?? false }
        }
    }

    /// Whether the message is configured as a default message (of any product and locale).
    func isDefaultMessage(_ id: String) -> Bool {
        state.withLock { $0.defaults.values.contains(id) }
    }

    /// The default message of a product and locale, if configured.
    func defaultMessage(productId: String, locale: String) -> String? {
        state.withLock { $0.defaults[DefaultKey(productId: productId, locale: locale)] }
    }

    func url(_ environment: SimEnvironment) -> URLSetting? {
        state.withLock { $0.urls[environment] }
    }

    // MARK: Performance tests

    func record(_ id: String, _ outcome: TestOutcome) {
        state.withLock { $0.tests[id]?.outcomes.append(outcome) }
    }

    /// The test is over: PASS or FAIL from here on; a PASS lets the Production URL be set.
    func finish(_ id: String) {
        state.withLock { s in
            guard var run = s.tests[id] else { return }
            run.finished = true
            run.task = nil
            s.tests[id] = run
            if s.running == id { s.running = nil }
            if Self.result(run).result == "PASS" { s.passedTest = true }
        }
    }

    /// The test's task, to wait for its end (tests).
    func testTask(_ id: String) -> Task<Void, Never>? {
        state.withLock { $0.tests[id]?.task }
    }

    /// `PerformanceTestResultResponse` of a run so far.
    static func result(_ run: TestRun) -> RetentionWire.PerformanceTestResult {
        let total = run.config.totalRequests
        let successes = run.outcomes.filter { $0.result == "SUCCESS" }.count
        let rate = total > 0 ? successes * 100 / total : 0
        var failures: [String: Int] = [:]
        for o in run.outcomes where o.result != "SUCCESS" { failures[o.result, default: 0] += 1 }
        let status = !run.finished ? "PENDING" : rate >= run.config.successRateThreshold ? "PASS" : "FAIL"
        return RetentionWire.PerformanceTestResult(
            config: run.config, target: run.target, result: status, successRate: rate,
            numPending: max(0, total - run.outcomes.count), responseTimes: responseTimes(run.outcomes.compactMap(\.latencyMs)),
            failures: failures)
    }

    /// Average and nearest-rank percentiles of the requests sent; nil before any answer.
    static func responseTimes(_ times: [Int64]) -> RetentionWire.ResponseTimes? {
        guard !times.isEmpty else { return nil }
        let sorted = times.sorted()
        func p(_ q: Int) -> Int64 { sorted[max(0, (sorted.count * q + 99) / 100 - 1)] }
        return RetentionWire.ResponseTimes(
            average: sorted.reduce(0, +) / Int64(sorted.count), p50: p(50), p90: p(90), p95: p(95), p99: p(99))
    }

    // MARK: Images

    /// Whether `bytes` is a PNG: the signature, then an IHDR chunk with a width and height above
    /// zero and a valid bit depth and color type. The image's dimensions, when it is.
    static func pngSize(_ bytes: [UInt8]) -> (width: UInt32, height: UInt32)? {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        guard bytes.count >= 33, Array(bytes[0..<8]) == signature else { return nil }
        func be32(_ at: Int) -> UInt32 { bytes[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        guard be32(8) == 13, Array(bytes[12..<16]) == Array("IHDR".utf8) else { return nil }
        let (width, height) = (be32(16), be32(20))
        let depth = bytes[24], color = bytes[25]
        let depths: [UInt8: Set<UInt8>] = [0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16]]
        guard width > 0, height > 0, width <= 1 << 31, height <= 1 << 31, depths[color]?.contains(depth) == true,
              bytes[26] == 0, bytes[27] == 0, bytes[28] <= 1 else { return nil }
        return (width, height)
    }
}
