extension SimApp {
    // MARK: /_sim/retention: the cancel page's ground truth

    /// The views decided in the window (`from` ≤ time < `to`; default start..now), and up to when
    /// views were decided (nil: no viewer runs, so no view happens).
    private func cancelPageViews(_ query: [String: String]) -> (from: Int64, to: Int64, until: Int64?, [CancelPageRecord])? {
        guard let (from, to) = timeWindow(query) else { return nil }
        guard let viewer = viewer.withLock({ $0 }) else { return (from, to, nil, []) }
        let records = viewer.records(of: self).filter { $0.view.time >= from && $0.view.time < to }
        return (from, to, viewer.processedUntil, records)
    }

    /// `GET /_sim/retention/views?from=ISO&to=ISO`: every cancel-page view in the window, by time.
    func retentionViews(_ query: [String: String]) -> SimResponse? {
        guard let (from, to, until, records) = cancelPageViews(query) else { return nil }
        var w = JSONWriter(capacity: records.count * 420 + 128)
        w.beginObject()
        w.date("from", from)
        w.date("to", to)
        w.date("processed_until", until)
        w.beginArray("views")
        for r in records {
            let i = Int(r.view.subscriber)
            w.beginObject()
            w.string("original_transaction_id", population.originalTransactionId(i))
            w.string("environment", population.environment(i))
            w.date("at", r.view.time)
            w.string("request_identifier", CancelPagePlan.requestIdentifier(population, r.view))
            w.string("product_id", population.catalog.products[r.product].id)
            w.string("user_locale", r.locale)
            w.bool("intends_cancel", r.view.intendsCancel)
            w.bool("posted", r.posted)
            w.int("http_status", r.httpStatus.map(Int64.init))
            w.int("latency_ms", r.latencyMs)
            w.string("shown", r.judgement.shown.rawValue)
            w.string("message_identifier", r.judgement.messageId)
            w.string("default_reason", r.judgement.defaultReason)
            w.bool("averted", r.averted)
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return .json(200, w.bytes)
    }

    /// `GET /_sim/retention/summary[?from=ISO&to=ISO]`: counts of the views in the window, what
    /// they showed, the cancellations averted, and `true_effect` = averted ÷ views shown a
    /// non-default answer (the effect on the treated, which a holdout comparison estimates).
    func retentionSummary(_ query: [String: String]) -> SimResponse? {
        guard let (from, to, until, records) = cancelPageViews(query) else { return nil }
        let cancelling = records.filter(\.view.intendsCancel)
        let treated = records.filter { $0.judgement.shown != .standard }
        let averted = records.filter(\.averted).count
        func byKind(_ key: String, _ list: [CancelPageRecord], w: inout JSONWriter) {
            w.beginObject(key)
            for kind in CancelPageShown.allCases { w.int(kind.rawValue, Int64(list.filter { $0.judgement.shown == kind }.count)) }
            w.endObject()
        }
        var w = JSONWriter()
        w.beginObject()
        w.bool("running", until != nil)
        w.date("processed_until", until)
        w.date("from", from)
        w.date("to", to)
        w.int("views", Int64(records.count))
        w.int("intends_cancel", Int64(cancelling.count))
        w.int("posted", Int64(records.filter(\.posted).count))
        w.int("answered", Int64(records.filter { $0.httpStatus != nil }.count))
        byKind("shown", records, w: &w)
        byKind("shown_intending_cancel", cancelling, w: &w)
        w.int("averted", Int64(averted))
        byKind("averted_by_kind", records.filter(\.averted), w: &w)
        w.double("true_effect", treated.isEmpty ? nil : Double(averted) / Double(treated.count))
        let treatedCancelling = treated.filter(\.view.intendsCancel).count
        w.double("true_effect_intending_cancel", treatedCancelling == 0 ? nil : Double(averted) / Double(treatedCancelling))
        w.endObject()
        return .json(200, w.bytes)
    }
}

extension SimApp {
    /// `GET /_sim/retention/potential?from=ISO&to=ISO`: per subscription, its first posted view
    /// in the window with its potential outcomes (``CancelPagePotential``): what was shown
    /// (`answer_key`), `y_default`, `y`, `revenue_per_save` and `effect` by key (the arms, the
    /// three kinds, and the shown answer's key), and `realized` once the clock passed the horizon.
    func retentionPotential(_ query: [String: String]) -> SimResponse? {
        guard let (from, to, until, records) = cancelPageViews(query) else { return nil }
        var seen = Set<UInt32>()
        let firsts = records.filter { $0.posted && seen.insert($0.view.subscriber).inserted }
        let known = min(clock.now(), until ?? .min)
        let effect = options.retention.effect, catalog = population.catalog
        let configured = CancelPageEffect.kindKeys + effect.arms.keys.sorted()
        var w = JSONWriter(capacity: firsts.count * 700 + 128)
        w.beginObject()
        w.date("from", from)
        w.date("to", to)
        w.date("processed_until", until)
        w.beginArray("views")
        for r in firsts {
            let i = Int(r.view.subscriber), p = r.potential, j = r.judgement
            let answerKey = CancelPageEffect.answerKey(j, catalog: catalog)
            var keys = configured
            if j.shown != .standard && !keys.contains(answerKey) { keys.append(answerKey) }
            func probability(_ key: String) -> Double {
                key == answerKey ? effect.probability(j, catalog: catalog) : effect.probability(key: key) ?? 0
            }
            w.beginObject()
            w.string("original_transaction_id", population.originalTransactionId(i))
            w.date("at", r.view.time)
            w.string("request_identifier", CancelPagePlan.requestIdentifier(population, r.view))
            w.date("horizon", p.horizon)
            w.bool("intends_cancel", r.view.intendsCancel)
            w.string("shown", j.shown.rawValue)
            w.string("answer_key", answerKey)
            w.bool("y_default", p.yDefault)
            w.beginObject("y")
            for k in keys { w.bool(k, p.y(probability(k))) }
            w.endObject()
            w.beginObject("revenue_per_save")
            for k in keys {
                w.double(k, options.retention.revenuePerSave(
                    key: k, shown: j, renewProduct: p.renewProduct, renewTier: p.renewTier, catalog: catalog))
            }
            w.endObject()
            w.beginObject("effect")
            for k in keys { w.double(k, probability(k)) }
            w.endObject()
            let past = p.horizon + SimTime.second
            w.bool("realized", known > past ? CancelPagePotential.subscribed(population, i, past: p.horizon) : nil)
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return .json(200, w.bytes)
    }
}
