import AppStoreModels
import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Crypto
import Foundation
import Synchronization

/// One app's cancel page in `serve`: how its requests are verified, its store, its offer signer,
/// and its rules and defaults cached in memory (so that an answer needs no database: when it is
/// slow or down, the cached rules still choose). Each request's lookup also reads the rules'
/// version; a change (`messages rules set`, ...) is read before that request is answered.
public final class RetentionDoor: Sendable {
    public let client: AppStoreServerAPIClient
    public let store: ChurnStore
    let signer: PromotionalOfferSigner
    let alsoSandbox: Bool
    /// How old the cached rules may be before a request reads them again (in the background).
    let refreshEvery: Duration

    private struct Cache {
        var rules: [RetentionRule] = []
        var defaults: [RetentionDefault] = []
        var experiments: [Experiment] = []
        var version: String?
        var readAt: ContinuousClock.Instant?
        var reading = false
    }
    private let cache = Mutex(Cache())

    public init(client: AppStoreServerAPIClient, store: ChurnStore, signer: PromotionalOfferSigner, alsoSandbox: Bool,
                refreshEvery: Duration = .seconds(5)) {
        (self.client, self.store, self.signer, self.alsoSandbox, self.refreshEvery) = (client, store, signer, alsoSandbox, refreshEvery)
    }

    /// Reads the rules now (at start, so that the first answer has them).
    public func load() async throws {
        let (rules, defaults, version) = try await store.retentionRulesVersioned()
        // Read after the version: a change in between makes the next lookup's version differ (read again).
        let experiments = try await store.experiments(runningOnly: true).map(\.experiment)
        cache.withLock {
            $0 = Cache(rules: rules, defaults: defaults, experiments: experiments, version: version, readAt: .now, reading: false)
        }
    }

    /// Whether the rules cached are those of `version` (what the request's lookup saw).
    func isCurrent(_ version: String) -> Bool { cache.withLock { $0.version == version } }

    /// The rules as cached; a read of fresh ones starts in the background when they are older
    /// than `refreshEvery` (the answer never waits for it).
    func rules() -> (rules: [RetentionRule], defaults: [RetentionDefault], experiments: [Experiment]) {
        let (current, stale) = cache.withLock { c -> ((rules: [RetentionRule], defaults: [RetentionDefault], experiments: [Experiment]), Bool) in
            let stale = !c.reading && c.readAt.map { ContinuousClock.now - $0 >= refreshEvery } ?? true
            if stale { c.reading = true }
            return ((c.rules, c.defaults, c.experiments), stale)
        }
        if stale {
            Task {
                do { try await self.load() } catch {
                    // Kept: the rules read last. Tried again at the next request after refreshEvery.
                    self.cache.withLock { $0.reading = false; $0.readAt = .now }
                }
            }
        }
        return current
    }
}

/// The subscriber's holdout draw for the cancel page, in [0, 1): the same function as the
/// win-back queue's `churnwatch.holdout_draw(original_transaction_id, 'cancel_page', '')`
/// (the first 52 bits of SHA-256 over the three joined by newlines), computed here so that the
/// arm is known without the database. One draw per subscriber: every view lands in one arm.
public enum RetentionDraw {
    public static let campaign = "cancel_page"

    public static func draw(_ originalTransactionId: String, campaign: String = campaign) -> Double {
        let digest = Array(SHA256.hash(data: Data((originalTransactionId + "\n" + campaign + "\n").utf8)))
        // 13 hex digits = 52 bits: the first six bytes and the high half of the seventh.
        var bits: UInt64 = 0
        for byte in digest.prefix(6) { bits = bits << 8 | UInt64(byte) }
        bits = bits << 4 | UInt64(digest[6] >> 4)
        return Double(bits) / 4_503_599_627_370_496.0
    }
}

/// The subscriber's arm draw in an experiment, in [0, 1): the same function with the campaign
/// `experiment:<name>`, so it is independent of the holdout draw and of other experiments' draws.
public enum ExperimentDraw {
    public static func draw(_ originalTransactionId: String, experiment: String) -> Double {
        RetentionDraw.draw(originalTransactionId, campaign: "experiment:" + experiment)
    }
}
