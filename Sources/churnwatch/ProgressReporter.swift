import ChurnStore
import Foundation
import Logging
import Polling
import Synchronization

/// Shows how a run is going. On a terminal: one line on stderr, redrawn in place (`\r`), with
/// items finished of total, failures, Apple calls per second by endpoint and an ETA. Otherwise
/// (or with `--log-format json`): a `progress` log line every `interval`. Either way, a `run
/// summary` log line at the end, with durations. Only counts and rates: never a payload, a key
/// or a connection string.
///
/// Counts are the run's (every worker's, resumed work included): read from the database when
/// the first batch lands and every 10 s, and moved on by this process's own batches between
/// reads. Rates are this process's, over the last 30 s.
final class ProgressReporter: Sendable {
    enum Mode: Sendable, Equatable {
        /// A live line redrawn in place (stderr is a terminal).
        case terminal
        /// Log lines (cron, systemd, a pipe).
        case log
    }

    private let mode: Mode
    private let interval: TimeInterval
    private let store: ChurnStore
    private let logger: Logger
    private let clock: any RunClock
    private let started: Date
    private let state = Mutex(State())
    private let ticker = Mutex<Task<Void, Never>?>(nil)

    /// How often the run's counts are read from the database.
    static let refreshInterval: TimeInterval = 10
    /// The span rates are measured over.
    static let rateWindow: TimeInterval = 30

    struct Sample: Sendable {
        var at: Date
        var finished: Int
        var calls: [String: Int]
    }

    struct State {
        var latest: RunProgressReport?
        var firstBatchAt: Date?
        var lastBatchAt: Date?
        /// The run's counts at the last read, and this process's own at that moment.
        var run: RunProgress?
        var mineAtRead = (polled: 0, failed: 0)
        /// The highest `done` shown. Items polled never become unpolled, but the estimate can
        /// dip: a batch committed between the database's snapshot and `mineAtRead` is in neither
        /// figure until the next read. Only `failed` may fall (429 failures go back to pending).
        var doneShown = 0
        /// The first and the latest read of the run's finished items (for the run's own pace).
        var reads: [(at: Date, finished: Int)] = []
        var reading = false
        var samples: [Sample] = []
        var lastDraw: Date?
        var finished = false
    }

    /// `clock`: the run engine's, so progress and the summary keep the engine's time.
    init(mode: Mode, interval: TimeInterval, store: ChurnStore, clock: any RunClock = SystemRunClock(), logger: Logger) {
        self.clock = clock
        started = clock.now()
        self.mode = mode
        self.interval = interval
        self.store = store
        self.logger = logger
    }

    /// The run this process works, once a batch has landed.
    var runId: Int64? { state.withLock { $0.latest?.runId } }

    /// Starts the clock that redraws the line (every second) or logs (every `interval`).
    func start() {
        let period = mode == .terminal ? 1.0 : max(0.1, interval)
        let task = Task { [weak self] in
            while !Task.isCancelled {
                guard let clock = self?.clock else { return }
                try? await clock.sleep(until: clock.now().addingTimeInterval(period))
                guard let self, !Task.isCancelled else { return }
                await self.tick()
            }
        }
        ticker.withLock { $0 = task }
    }

    /// The engine's callback after every committed batch.
    func record(_ report: RunProgressReport) {
        let now = clock.now()
        let readNow: Bool = state.withLock { state in
            guard !state.finished else { return false }
            state.latest = report
            if state.firstBatchAt == nil { state.firstBatchAt = now }
            state.lastBatchAt = now
            state.samples.append(Sample(at: now, finished: report.polled + report.failed, calls: report.calls))
            Self.trim(&state.samples, now: now)
            let readNow = state.run == nil && !state.reading
            if readNow { state.reading = true }
            if mode == .terminal, now.timeIntervalSince(state.lastDraw ?? .distantPast) >= 0.2 {
                state.lastDraw = now
                show(snapshot(&state, now: now))
            }
            return readNow
        }
        if readNow { Task { await self.readRun(report.runId) } }
    }

    /// Stops the clock; on a terminal, leaves the last line in place and moves to the next.
    /// Nothing is drawn or logged as progress after it.
    func finish() {
        ticker.withLock { $0?.cancel() }
        state.withLock { state in
            guard !state.finished else { return }
            state.finished = true
            guard mode == .terminal, state.latest != nil else { return }
            show(snapshot(&state, now: clock.now()))
            FileHandle.standardError.write(Data("\n".utf8))
        }
    }

    /// The closing log line: how the run ended, with durations, counts and average rates.
    func summary(outcome: String, exitCode: Int32, stats: WorkerStats) {
        let (first, last, runId) = state.withLock { ($0.firstBatchAt, $0.lastBatchAt, $0.latest?.runId) }
        let now = clock.now()
        let duration = now.timeIntervalSince(started)
        var metadata: Logger.Metadata = [
            "outcome": "\(outcome)",
            "exit_code": "\(exitCode)",
            "duration_s": "\(Self.decimal(duration))",
            "polled": "\(stats.polled)",
            "failed": "\(stats.failed)",
            "events": "\(stats.events)",
            "enqueued": "\(stats.enqueued)",
        ]
        if let runId { metadata["run"] = "\(runId)" }
        if let first { metadata["until_first_batch_s"] = "\(Self.decimal(first.timeIntervalSince(started)))" }
        if let first, let last { metadata["polling_s"] = "\(Self.decimal(last.timeIntervalSince(first)))" }
        if let last { metadata["after_last_batch_s"] = "\(Self.decimal(now.timeIntervalSince(last)))" }
        for (endpoint, n) in stats.calls {
            metadata["calls_\(endpoint)"] = "\(n)"
            if duration > 0 { metadata["rate_\(endpoint)"] = "\(Self.decimal(Double(n) / duration))" }
        }
        if duration > 0 { metadata["items_per_s"] = "\(Self.decimal(Double(stats.polled + stats.failed) / duration))" }
        logger.info("run summary", metadata: metadata)
    }

    // MARK: The clock

    private func tick() async {
        let now = clock.now()
        let (runId, due): (Int64?, Bool) = state.withLock { state in
            guard let latest = state.latest, !state.finished else { return (nil, false) }
            let last = state.reads.last?.at ?? .distantPast
            let due = !state.reading && now.timeIntervalSince(last) >= Self.refreshInterval
            if due { state.reading = true }
            return (latest.runId, due)
        }
        if let runId, due { await readRun(runId) }
        // Drawn and logged under the lock, so nothing comes after `finish()`.
        state.withLock { state in
            guard state.latest != nil, !state.finished else { return }
            let current = snapshot(&state, now: clock.now())
            switch mode {
            case .terminal:
                state.lastDraw = clock.now()
                show(current)
            case .log:
                logger.info("progress", metadata: current.metadata)
            }
        }
    }

    /// Reads the run's counts (all workers); a failed read keeps the last figures.
    private func readRun(_ runId: Int64) async {
        let progress = try? await store.runProgress(runId)
        state.withLock { state in
            state.reading = false
            guard let progress else { return }
            state.run = progress
            // Taken after the read: a batch committed meanwhile is counted at the next read, not twice.
            state.mineAtRead = (state.latest?.polled ?? 0, state.latest?.failed ?? 0)
            let read = (at: clock.now(), finished: progress.done + progress.failed)
            if state.reads.count < 2 { state.reads.append(read) } else { state.reads[1] = read }
        }
    }

    // MARK: Figures

    /// Keeps the samples of the last `rateWindow` seconds, plus one older as the base.
    static func trim(_ samples: inout [Sample], now: Date) {
        let cutoff = now.addingTimeInterval(-rateWindow)
        if let firstInside = samples.firstIndex(where: { $0.at >= cutoff }), firstInside > 1 {
            samples.removeFirst(firstInside - 1)
        }
    }

    /// Called under the lock (with its state); records the `done` it shows.
    private func snapshot(_ state: inout State, now: Date) -> ProgressSnapshot {
        guard let latest = state.latest else { return ProgressSnapshot(runId: 0, done: 0, failed: 0, total: 0, elapsed: 0) }
        var s = ProgressSnapshot(runId: latest.runId, done: latest.polled, failed: latest.failed, total: latest.due,
                                 elapsed: now.timeIntervalSince(started))
        if let run = state.run {
            s.total = run.total
            s.failed = min(run.total, run.failed + max(0, latest.failed - state.mineAtRead.failed))
            s.done = min(run.total - s.failed, run.done + max(0, latest.polled - state.mineAtRead.polled))
        }
        s.done = max(s.done, state.doneShown)
        state.doneShown = s.done
        s.total = max(s.total, s.done + s.failed)
        s.calls = latest.calls
        // This process's rates over the window (since its first batch while the window fills).
        let base = state.samples.first
        let span = base.map { now.timeIntervalSince($0.at) } ?? 0
        if let base, span >= 1, state.samples.count >= 2 {
            for (endpoint, n) in latest.calls {
                s.callRates[endpoint] = Double(n - (base.calls[endpoint] ?? 0)) / span
            }
            s.itemRate = Double(latest.polled + latest.failed - base.finished) / span
        } else if latest.elapsed > 0 {
            for (endpoint, n) in latest.calls { s.callRates[endpoint] = Double(n) / latest.elapsed }
            s.itemRate = Double(latest.polled + latest.failed) / latest.elapsed
        }
        // With other workers on the run, the run's own pace (between database reads) is faster.
        if let first = state.reads.first, let last = state.reads.last, last.at.timeIntervalSince(first.at) >= 5 {
            let runRate = Double(last.finished - first.finished) / last.at.timeIntervalSince(first.at)
            if runRate > (s.itemRate ?? 0) { s.itemRate = runRate }
        }
        let left = s.total - s.done - s.failed
        if left == 0 {
            s.eta = 0
        } else if let rate = s.itemRate, rate > 0 {
            s.eta = Double(left) / rate
        }
        return s
    }

    // MARK: Output

    /// Redraws the line (the caller holds the lock, so draws never interleave).
    private func show(_ snapshot: ProgressSnapshot) {
        let line = snapshot.line(width: Self.terminalWidth())
        FileHandle.standardError.write(Data(("\r" + line + "\u{1B}[K").utf8))
    }

    /// Columns of the terminal on stderr (80 when unknown), so the line never wraps.
    static func terminalWidth() -> Int {
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 80
    }

    static func decimal(_ x: Double) -> String {
        String(format: "%.3f", x)
    }
}

/// One moment of a run's progress, as the line and the log show it.
struct ProgressSnapshot: Sendable, Equatable {
    var runId: Int64
    /// The run's items polled, failed, and in all.
    var done: Int
    var failed: Int
    var total: Int
    /// Seconds since the command started.
    var elapsed: TimeInterval
    /// Apple calls by this process so far, by endpoint.
    var calls: [String: Int] = [:]
    /// This process's calls per second by endpoint, recently.
    var callRates: [String: Double] = [:]
    /// Items finished per second, recently; nil before there is a rate.
    var itemRate: Double?
    /// Seconds left at `itemRate`; nil when unknown.
    var eta: TimeInterval?

    /// `run 7  4210/10000 42.1%  3 failed  ETA 2m 5s  1m 10s  status 49/s history 12/s`, most
    /// important first, cut to `width - 1` columns.
    func line(width: Int) -> String {
        var parts = ["run \(runId)"]
        let percent = total > 0 ? String(format: " %.1f%%", Double(done + failed) * 100 / Double(total)) : ""
        parts.append("\(done + failed)/\(total)\(percent)")
        parts.append("\(failed) failed")
        parts.append("ETA " + (eta.map { $0 == 0 ? "done" : formatDuration($0) } ?? "?"))
        parts.append(formatDuration(elapsed))
        let rates = ProgressSnapshot.endpointOrder(calls.keys).map { "\($0) \(Self.rate(callRates[$0] ?? 0))/s" }
        if !rates.isEmpty { parts.append(rates.joined(separator: " ")) }
        let text = parts.joined(separator: "  ")
        let limit = max(10, width - 1)
        return text.count > limit ? String(text.prefix(limit)) : text
    }

    /// Log metadata: every value a number or an id.
    var metadata: Logger.Metadata {
        var m: Logger.Metadata = [
            "run": "\(runId)",
            "done": "\(done)",
            "failed": "\(failed)",
            "total": "\(total)",
            "elapsed_s": "\(ProgressReporter.decimal(elapsed))",
        ]
        // The status endpoint's keys are always there (0 before its first call, e.g. while the
        // first items are receipts), so every line has the same shape for log queries.
        for endpoint in Set(calls.keys).union(["status"]) {
            m["calls_\(endpoint)"] = "\(calls[endpoint] ?? 0)"
            m["rate_\(endpoint)"] = "\(ProgressReporter.decimal(callRates[endpoint] ?? 0))"
        }
        if let itemRate { m["items_per_s"] = "\(ProgressReporter.decimal(itemRate))" }
        if let eta { m["eta_s"] = "\(Int(eta.rounded(.up)))" }
        return m
    }

    /// status, history, receipt first, then the rest by name.
    static func endpointOrder(_ names: some Sequence<String>) -> [String] {
        let known = ["status", "history", "receipt"]
        let set = Set(names)
        return known.filter(set.contains) + set.subtracting(known).sorted()
    }

    static func rate(_ r: Double) -> String {
        String(format: r >= 10 ? "%.0f" : "%.1f", r)
    }
}
