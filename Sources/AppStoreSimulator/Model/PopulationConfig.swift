/// What population to generate. The same configuration always gives the same subscribers.
public struct PopulationConfig: Sendable, Hashable {
    /// Number of subscriptions (one `originalTransactionId` each).
    public var subscribers: Int
    public var seed: UInt64
    /// The simulation's start (ms since 1970): every subscription's first purchase is before it.
    public var start: Int64
    /// How far after ``start`` timelines are generated, in days; beyond it nothing changes.
    public var horizonDays: Int = 400
    /// How far before ``start`` first purchases reach, in days.
    public var historyDays: Int = 730
    /// Share of customers whose purchases are in the Sandbox environment.
    public var sandboxShare: Double = 0.03
    /// Share of subscriptions that a family member shares (`FAMILY_SHARED`).
    public var familyShare: Double = 0.05
    /// Share of subscriptions whose customer also subscribes in the other group.
    public var bothGroupsShare: Double = 0.08
    /// Share of customers that have legacy receipt data (verifyReceipt).
    public var receiptShare: Double = 0.10
    /// Share of billing failures that get a Billing Grace Period.
    public var graceShare: Double = 0.5
    /// Share of refunds that a refund request (`CONSUMPTION_REQUEST`) precedes, 14–60 h before.
    public var consumptionRequestShare: Double = 0.6
    /// Probability per paid period of a refund request that Apple declines (`REFUND_DECLINED`).
    public var refundDeclinedRate: Double = 0.004
    /// Every subscriber in Sandbox (an app under test) instead of the ``sandboxShare`` mix.
    public var allSandbox: Bool = false
    public var bundleId: String = "com.example.churnwatch"
    public var appAppleId: Int64 = 1_234_567_890
    /// Which of the simulator's apps this population is (1 is the first; see ``forApp(_:)``):
    /// app k's ids are app 1's plus (k - 1) × ``Population/appIdStride``.
    public var app: Int = 1

    public init(subscribers: Int, seed: UInt64, start: Int64) {
        self.subscribers = subscribers
        self.seed = seed
        self.start = start
    }

    /// The configuration of app `k` of a simulator serving several apps under one team key: app 1
    /// is this configuration itself; app k ≥ 2 has bundle id `<bundleId>.app<k>`, app Apple id
    /// `appAppleId + k - 1`, the same size, start and rates, and a seed derived from (seed, k), so
    /// its subscribers are its own; its ids never meet another app's (``Population/appIdStride``).
    public func forApp(_ k: Int) -> PopulationConfig {
        precondition(k >= 1, "apps are numbered from 1")
        guard k > 1 else { return self }
        var c = self
        c.app = k
        c.bundleId = "\(bundleId).app\(k)"
        c.appAppleId = appAppleId + Int64(k - 1)
        var r = SimRandom(seed, UInt64(k), 60)
        c.seed = r.next()
        return c
    }

    /// The default start, `2026-01-01T00:00:00Z`.
    public static let defaultStart: Int64 = SimTime.parse("2026-01-01T00:00:00Z")!
}
