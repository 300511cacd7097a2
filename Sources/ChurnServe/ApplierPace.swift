/// Door first: how long serve's applier waits between its batches while the door is busy.
///
/// Under a burst of deliveries the door and the applier share the same cores (and the same
/// PostgreSQL). An answer that comes late makes Apple deliver again, which only adds to the
/// burst; an inbox row applied a few seconds later loses nothing (it is stored, and `/metrics`
/// shows the applier's lag). So while the door has `busyAt` or more requests in flight, the
/// applier gives way after each batch, for at most `1 / leastShare - 1` times the time the
/// batch took: it keeps at least `leastShare` of its own pace, and catches up as soon as the
/// door is quiet. With fewer requests in flight (any real App Store load) it never waits.
/// Pure: the caller measures and waits.
public struct ApplierPace: Sendable, Equatable {
    /// Requests in flight at the door from which it counts as busy.
    public var busyAt: Int
    /// The least share of its own pace the applier keeps while the door is busy (0 < x ≤ 1).
    public var leastShare: Double

    public init(busyAt: Int = 8, leastShare: Double = 0.25) {
        self.busyAt = max(1, busyAt)
        self.leastShare = min(1, max(0.01, leastShare))
    }

    /// After a batch that took `batch`, with `inFlight` requests at the door and `waited`
    /// already spent giving way: how much longer the applier may wait (zero: go on now).
    public func giveWay(inFlight: Int, batch: Duration, waited: Duration) -> Duration {
        guard inFlight >= busyAt else { return .zero }
        let most = batch * (1 / leastShare - 1)
        return waited < most ? most - waited : .zero
    }
}
