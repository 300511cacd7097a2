/// A cancel-page view's potential outcomes (docs/simulator.md, "Potential outcomes"), computed
/// when the view is decided, before its own answer changes anything, on the timeline as revised
/// so far: whether the subscription is subscribed past ``horizon`` (the end of the period it was
/// in at the view) with no answer changing anything from the view on (``yDefault``), and with
/// every view of the subscription in [view, horizon) showing one answer of probability p
/// (``y(_:)``).
///
/// Common random numbers: an answer saves a cancelling view exactly when the view's
/// ``CancelPagePlan/effectDraw(_:_:)`` is below its probability, the draw the real decision uses,
/// so the outcome under p is `yDefault || saveDraw < p` with ``saveDraw`` the smallest draw of the
/// views that an answer could save; an answer of higher probability saves whenever one of lower
/// does.
struct CancelPagePotential: Sendable, Hashable {
    var horizon: Int64
    var yDefault: Bool
    /// The smallest effect draw among the views in [view, horizon) of a customer who means to
    /// cancel, whose cancellation is still in the timeline, active with auto-renew on at the view
    /// and renewing before the generation horizon when saved; nil: none.
    var saveDraw: Double?
    /// The product and price tier of the renewal the subscription would have at the horizon
    /// (revenue per save's unit).
    var renewProduct: Int
    var renewTier: Int

    /// Subscribed past the horizon when every view in [view, horizon) shows an answer of probability `p`.
    func y(_ p: Double) -> Bool { yDefault || (saveDraw.map { $0 < p } ?? false) }

    /// Whether subscription `i`, on its timeline as revised so far, is subscribed just after `h`:
    /// active (not revoked, not in billing retry or grace) 1 s after `h` with a transaction
    /// expiring after `h`.
    static func subscribed(_ population: Population, _ i: Int, past h: Int64) -> Bool {
        let s = population.state(i, at: h + SimTime.second)
        return s.exists && s.status == 1 && s.latest.expiresDate > h
    }

    /// The potential outcomes of view `v` of `plan`, `s` being the subscription's state at the view.
    static func of(_ v: CancelPagePlan.View, state s: SubscriptionState, plan: CancelPagePlan, _ population: Population) -> Self {
        let i = Int(v.subscriber), h = s.latest.expiresDate
        let yDefault = subscribed(population, i, past: h)
        var saveDraw: Double?
        if !yDefault {
            let generationEnd = population.config.start + Int64(population.config.horizonDays) * SimTime.day
            for w in plan.cancellationViews(of: i, population) where w.time >= v.time && w.time < h {
                guard let c = CancelPagePlan.cancelAt(population, w), population.stillCancels(i, at: c) else { continue }
                let sw = w == v ? s : population.state(i, at: w.time)
                guard sw.exists, sw.status == 1, sw.autoRenew, sw.latest.expiresDate > w.time,
                      sw.latest.expiresDate < generationEnd
                else { continue }
                let d = CancelPagePlan.effectDraw(population, w)
                saveDraw = min(saveDraw ?? d, d)
            }
        }
        return CancelPagePotential(
            horizon: h, yDefault: yDefault, saveDraw: saveDraw, renewProduct: s.autoRenewProduct, renewTier: s.latest.priceTier)
    }
}
