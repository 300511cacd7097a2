import AppStoreModels
import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation
import Logging

/// What a sync, an ingest or the inbox did.
public struct FeedSummary: Sendable, Equatable {
    /// Notifications read (history records, lines, inbox rows).
    public var read = 0
    /// History pages read.
    public var pages = 0
    public var applied = 0
    public var duplicates = 0
    public var stale = 0
    public var quarantined = 0
    public var ignored = 0
    /// Subscriptions first heard of through a notification.
    public var registered = 0
    public var events = 0
    public var enqueued = 0
    /// Of `applied`, notifications signed before the stored state and placed by their
    /// `signedDate` (``ObservationSequence``); events they showed logged from the wrong
    /// neighbours, superseded.
    public var late = 0
    public var superseded = 0
    /// Refund requests first read after their deadline (recorded as not sent, `expired`): the
    /// refund line counts them with those whose deadline passed while pending.
    public var lateRefundRequests = 0
    /// Signed in this stretch but no longer in Apple's history (a cursor older than its
    /// retention): the windows cover it.
    public var gap: Range<Date>?
    /// Why the sync ended before its window's end (nil: it read the window through). A stop
    /// asked for (``RunStop/isAskedFor``: a signal, the time budget) ends the invocation; what
    /// was read is committed and the next sync resumes on the stored page token. Any other is
    /// Apple's failure (an outage, a refused key): the cursor stays where it was and the caller
    /// plans by the windows.
    public var stop: RunStop?
    /// The environments whose history was read through to the sync's moment with no gap: their
    /// subscriptions may be planned by the feed.
    public var readThrough: Set<AppStoreEnvironment> = []
    /// In a Production deployment, why the Sandbox history ended early (Apple's failure there:
    /// an outage, a refused connection, a proxy that allows only Production). Reported, never
    /// ``stop``: Production's history was read before it, and a Sandbox outage must not stop a
    /// Production night. The Sandbox cursor stays where it was; the next sync retries from it.
    public var sandboxFailure: RunStop?

    public init() {}

    public mutating func add(_ other: FeedSummary) {
        read += other.read; pages += other.pages; applied += other.applied; duplicates += other.duplicates
        stale += other.stale; quarantined += other.quarantined; ignored += other.ignored
        registered += other.registered; events += other.events; enqueued += other.enqueued
        late += other.late; superseded += other.superseded
        lateRefundRequests += other.lateRefundRequests
    }

    /// Another environment's history sync: its counts added, its gap and stop kept when this
    /// one has none (the first environment's win, but a stop asked for wins over a failure),
    /// the environments read through joined.
    public mutating func merge(_ other: FeedSummary) {
        add(other)
        gap = gap ?? other.gap
        if stop == nil || (stop?.isAskedFor == false && other.stop?.isAskedFor == true) { stop = other.stop ?? stop }
        readThrough.formUnion(other.readThrough)
        sandboxFailure = sandboxFailure ?? other.sandboxFailure
    }
}

/// The change feed's I/O: reads Apple's notification history from the stored cursor (and the
/// inbox, and ingested files), verifies every notification and its inner JWS, and commits what
/// ``FeedApplier`` decides. Every step is safe to repeat: notifications are deduplicated on
/// their UUID, so a sync killed anywhere resumes from its last stored page.
public struct FeedSync: Sendable {
    public struct Settings: Sendable {
        /// How far back of the cursor each sync reads again (Apple files some records late).
        public var overlap: TimeInterval = 6 * 3600
        /// How far back the first sync of a database reads (Apple keeps 180 days, Sandbox 30).
        public var firstLookback: TimeInterval = 180 * 86_400
        /// Notifications verified and committed together.
        public var batchSize = 1000
        /// Connections that apply and commit at once (each its share of the subscriptions).
        public var applyLanes = 2

        public init() {}
    }

    public let client: AppStoreServerAPIClient
    public let store: ChurnStore
    public var applier: FeedApplier
    public var settings: Settings
    /// The notification stored in the inbox as `notificationUUID`, as this process verified it
    /// moments ago (`serve`'s receiver, before storing it) for this feed's app, taken: the
    /// drain neither reads its payload back nor verifies it again. nil: read and verify (the
    /// default, and always for a row another process stored).
    public var verifiedBefore: @Sendable (_ notificationUUID: UUID) -> VerifiedNotification? = { _ in nil }
    let logger: Logger

    public init(client: AppStoreServerAPIClient, store: ChurnStore, applier: FeedApplier, settings: Settings = Settings(), logger: Logger) {
        self.client = client
        self.store = store
        self.applier = applier
        self.settings = settings
        self.logger = logger
    }

    var environment: AppStoreEnvironment { client.configuration.environment }

    /// The histories a sync reads: the configured environment's and, in Production, Sandbox's
    /// too. Apple keeps one history per environment, and a Production app has Sandbox
    /// subscribers (TestFlight testers, App Review) whose notifications only the Sandbox
    /// history holds; without it their changes waited for a poll by the safety net.
    public var environments: [AppStoreEnvironment] { environment == .production ? [.production, .sandbox] : [environment] }

    /// Verifies payloads (several at once), in order: in `environment` (a history's), or, for
    /// notifications from a file or the inbox (nil), in the configured environment and, when the
    /// payload says Sandbox in a Production deployment, in Sandbox (``environments``).
    func verify(_ payloads: [(payload: String, inboxId: Int64?)], source: NotificationSource,
                environment: AppStoreEnvironment? = nil) async -> [FeedInput] {
        let alsoSandbox = environment == nil && environments.contains(.sandbox) && self.environment != .sandbox
        let lanes = max(1, ProcessInfo.processInfo.activeProcessorCount)
        let chunk = max(1, (payloads.count + lanes - 1) / lanes)
        return await withTaskGroup(of: (Int, [FeedInput]).self) { group in
            for (lane, start) in stride(from: 0, to: payloads.count, by: chunk).enumerated() {
                let slice = Array(payloads[start..<min(start + chunk, payloads.count)])
                group.addTask {
                    var out: [FeedInput] = []
                    out.reserveCapacity(slice.count)
                    for (payload, inboxId) in slice {
                        out.append(await self.verifyOne(payload, inboxId: inboxId, source: source, environment: environment,
                                                        alsoSandbox: alsoSandbox))
                    }
                    return (lane, out)
                }
            }
            var lanesOut: [(Int, [FeedInput])] = []
            for await r in group { lanesOut.append(r) }
            return lanesOut.sorted { $0.0 < $1.0 }.flatMap(\.1)
        }
    }

    /// Applies verified (or rejected) notifications: what is already known is a duplicate,
    /// the rest is decided against the stored state and committed. A subscription another
    /// writer changed meanwhile (a run polling it) is decided again from what that writer left,
    /// up to `round` 5 (a sixth conflict in a row is an error: the sync stops, resumable).
    func apply(_ inputs: [FeedInput], establishOnly: Bool, runId: Int64?, now: Date, round: Int = 1) async throws -> FeedSummary {
        var summary = FeedSummary()
        summary.read = inputs.count
        guard !inputs.isEmpty else { return summary }
        var uuids: [UUID] = []
        var ids: [String] = []
        var digests: [String] = []
        for input in inputs {
            guard case .verified(let v) = input.verdict else {
                if let d = input.digest { digests.append(d) }
                continue
            }
            if let u = UUID(uuidString: v.notificationUUID) { uuids.append(u) }
            if let id = v.originalTransactionId { ids.append(id) }
        }
        let known = try await store.notificationsKnown(uuids, rejectedDigests: digests)
        let stored = try await store.feedSubscriptions(Array(Set(ids)))
        let plan = applier.plan(inputs, known: known.uuids, knownRejected: known.digests, stored: stored.items,
                                neverPolled: stored.neverPolled, establishOnly: establishOnly, now: now)
        summary.duplicates = plan.duplicates
        summary.quarantined = plan.quarantinedAgain
        var conflicted = Set<String>()
        for decided in plan.batches {
            // A later batch of a subscription that conflicted was decided from a state that never was.
            let batch = decided.without(conflicted)
            let counts = try await store.feedCommit(runId: runId, asOf: now, detectedAt: now, batch)
            conflicted.formUnion(counts.conflicted)
            summary.registered += counts.registered
            summary.events += counts.events
            summary.enqueued += counts.enqueued
            summary.lateRefundRequests += counts.lateRefundRequests
            summary.late += counts.placedLate
            summary.superseded += counts.superseded
            // Late ones that could not be placed were recorded stale at commit.
            summary.applied -= counts.stale
            summary.stale += counts.stale
            for r in batch.records {
                switch r.outcome {
                case .applied: summary.applied += 1
                case .stale: summary.stale += 1
                case .quarantined: summary.quarantined += 1
                case .ignored: summary.ignored += 1
                case .duplicate: summary.duplicates += 1
                }
            }
        }
        guard !conflicted.isEmpty else { return summary }
        guard round < 5 else { throw FeedConflict(subscriptions: conflicted.count) }
        logger.info("notifications of subscriptions another process wrote meanwhile, decided again",
                    metadata: ["subscriptions": "\(conflicted.count)"])
        let again = inputs.filter { input in
            guard case .verified(let v) = input.verdict, let id = v.originalTransactionId else { return false }
            return conflicted.contains(id)
        }
        var retried = try await apply(again, establishOnly: establishOnly, runId: runId, now: now, round: round + 1)
        // What this call committed itself is no duplicate: the retry read only the conflicted.
        retried.read = 0
        retried.duplicates = 0
        summary.add(retried)
        return summary
    }

    /// Five rounds in a row lost to another writer of the same subscriptions (resumable: what
    /// was committed stays, and the cursor follows it).
    public struct FeedConflict: Error, CustomStringConvertible {
        public var subscriptions: Int
        public var description: String {
            "\(subscriptions) subscriptions kept changing under the change feed's sync (another process writing them): re-run to resume"
        }
    }

    /// Applies raw signed payloads (`notifications ingest`), batch after batch as `next` gives
    /// them (nil: no more): verified, deduplicated, applied in the order given. Each batch is
    /// verified while the one before it is applied and committed, so verification (CPU) and the
    /// commits (PostgreSQL) overlap. (Verifying two ahead measured no faster on two cores.) A
    /// lane that fails ends the ingest; what committed stays, and a re-run skips it as duplicates.
    public func ingest(now: Date, runId: Int64? = nil, next: () throws -> [String]?) async throws -> FeedSummary {
        var summary = FeedSummary()
        var verifying: Task<[FeedInput], Never>?
        defer { verifying?.cancel() }
        while true {
            let started = try next().map { batch in
                Task { await self.verify(batch.map { ($0, Int64?.none) }, source: .ingest) }
            }
            if let previous = verifying {
                verifying = nil
                summary.add(try await applyInLanes(await previous.value, establishOnly: false, runId: runId, now: now))
            }
            guard let started else { return summary }
            verifying = started
        }
    }

    /// One payload verified: in `environment`, or (nil) in the configured one and, when
    /// `alsoSandbox`, in Sandbox for a payload that says it is from there.
    /// `inner: false`: the inner JWS are left to ``completeNotification`` (serve's door).
    func verifyOne(_ payload: String, inboxId: Int64?, source: NotificationSource, environment: AppStoreEnvironment?,
                   alsoSandbox: Bool, inner: Bool = true) async -> FeedInput {
        do {
            let verified: VerifiedNotification
            do throws(JWSVerificationFailure) {
                verified = try await client.verifyNotification(payload, environment: environment, inner: inner)
            } catch {
                guard alsoSandbox, case .environmentMismatch(_, let actual) = error,
                      actual == AppStoreEnvironment.sandbox.rawValue else { throw error }
                verified = try await client.verifyNotification(payload, environment: .sandbox, inner: inner)
            }
            return FeedInput(signedPayload: payload, verdict: .verified(verified), source: source, inboxId: inboxId)
        } catch {
            return FeedInput(signedPayload: payload, verdict: .rejected("\(error)"), source: source, inboxId: inboxId,
                             digest: QuarantinedPayload.sha256Hex(payload))
        }
    }

    /// `apply` on `settings.applyLanes` connections at once, each with the notifications of its
    /// share of the subscriptions (by a hash of the original transaction id), so one
    /// subscription's notifications stay in order on one lane and no two lanes write the same
    /// rows. What is not about a subscription (rejected payloads) goes to the first lane.
    func applyInLanes(_ inputs: [FeedInput], establishOnly: Bool, runId: Int64?, now: Date) async throws -> FeedSummary {
        let shares = Self.lanes(inputs, count: settings.applyLanes)
        guard shares.count > 1 else { return try await apply(inputs, establishOnly: establishOnly, runId: runId, now: now) }
        return try await withThrowingTaskGroup(of: FeedSummary.self) { group in
            for share in shares {
                group.addTask { try await self.apply(share, establishOnly: establishOnly, runId: runId, now: now) }
            }
            var total = FeedSummary()
            for try await part in group { total.add(part) }
            return total
        }
    }

    /// `inputs` split into at most `count` non-empty lanes, each in the order given: a
    /// subscription's notifications all in one lane (by a hash of its original transaction id),
    /// anything not about a subscription in the first.
    static func lanes(_ inputs: [FeedInput], count: Int) -> [[FeedInput]] {
        let count = max(1, count)
        guard count > 1 else { return inputs.isEmpty ? [] : [inputs] }
        var shares = [[FeedInput]](repeating: [], count: count)
        for input in inputs {
            var lane = 0
            if case .verified(let v) = input.verdict, let id = v.originalTransactionId {
                lane = Int(laneHash(id) % UInt64(count))
            }
            shares[lane].append(input)
        }
        return shares.filter { !$0.isEmpty }
    }

    /// FNV-1a of the id's bytes: the same split in every process, so what a test checks is what
    /// a run does.
    static func laneHash(_ id: String) -> UInt64 { FNV1a.hash(id) }

    /// Applies the inbox's unprocessed rows, oldest first, and marks each processed.
    /// - Parameter between: awaited after each full batch committed: `serve` lets its door go
    ///   first there, and answers false once it is stopping (the drain ends; nothing is lost).
    public func drainInbox(now: Date, runId: Int64? = nil, between: (@Sendable () async -> Bool)? = nil) async throws -> FeedSummary {
        var summary = FeedSummary()
        var lastId: Int64 = 0
        while true {
            // Pages by id: a row that could not be marked (another process holds it) is not
            // read again by this drain.
            let rows = try await store.notificationInboxPending(limit: settings.batchSize, after: lastId)
            guard let newest = rows.last?.id else { break }
            lastId = newest
            let inputs = try await inboxInputs(rows)
            if !inputs.isEmpty { summary.add(try await applyInLanes(inputs, establishOnly: false, runId: runId, now: now)) }
            // A short page was the last one (no second query to find the inbox empty); `between`
            // false: stop here, the rest stays in the inbox for the next drain.
            guard rows.count == settings.batchSize, await between?() ?? true else { break }
        }
        return summary
    }

    /// This feed's rows of `rows`, in their order: those this process's door verified as they
    /// came in, their inner JWS verified now; the others (and any whose inner JWS fail, to be
    /// quarantined with their payload) read and verified whole.
    private func inboxInputs(_ rows: [(id: Int64, notificationUUID: UUID?)]) async throws -> [FeedInput] {
        var taken: [(id: Int64, outer: VerifiedNotification)] = []
        for row in rows {
            if let uuid = row.notificationUUID, let v = verifiedBefore(uuid) { taken.append((row.id, v)) }
        }
        let known = await completed(taken)
        let payloads = try await store.notificationInboxPayloads(rows.map(\.id).filter { known[$0] == nil })
        let read = rows.compactMap { row in payloads[row.id].map { (payload: $0, inboxId: Optional(row.id)) } }
        var checked: [Int64: FeedInput] = [:]
        for input in await verify(read, source: .inbox) {
            if let id = input.inboxId { checked[id] = input }
        }
        return rows.compactMap { row in
            // A payload verified here needs no copy: only a rejected one's is kept (quarantine).
            known[row.id].map { FeedInput(signedPayload: "", verdict: .verified($0), source: .inbox, inboxId: row.id) } ?? checked[row.id]
        }
    }

    /// The inner JWS of notifications verified by the door, on as many lanes as cores; those
    /// that fail are left out (read and verified whole by the caller).
    private func completed(_ taken: [(id: Int64, outer: VerifiedNotification)]) async -> [Int64: VerifiedNotification] {
        let client = self.client
        let lanes = max(1, ProcessInfo.processInfo.activeProcessorCount)
        let chunk = max(1, (taken.count + lanes - 1) / lanes)
        return await withTaskGroup(of: [(Int64, VerifiedNotification)].self) { group in
            for start in stride(from: 0, to: taken.count, by: chunk) {
                let slice = taken[start..<min(start + chunk, taken.count)]
                group.addTask {
                    var out: [(Int64, VerifiedNotification)] = []
                    for (id, outer) in slice {
                        if let v = try? await client.completeNotification(outer) { out.append((id, v)) }
                    }
                    return out
                }
            }
            var all: [Int64: VerifiedNotification] = [:]
            for await part in group { for (id, v) in part { all[id] = v } }
            return all
        }
    }
}
