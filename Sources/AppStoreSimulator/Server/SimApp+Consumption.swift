extension SimApp {
    /// `PUT /inApps/v2/transactions/consumption/{transactionId}` (Send Consumption Information):
    /// the transaction must exist in this environment (`4000006` malformed, `4040010` unknown),
    /// the body must pass Apple's checks (``ConsumptionInfo/parse(_:)``); then 202 with an empty
    /// body. Every accepted answer is recorded, whether it answers an open request or not; one in
    /// time may change Apple's decision (``Population/answerConsumption(_:transaction:at:info:effect:)``).
    func sendConsumption(_ req: SimRequest, id: String, now: Int64) throws(AppleError) -> SimResponse {
        guard req.method == "PUT" else { throw AppleError(404, 4_040_000, "Not found.") }
        let (i, k) = try resolve(id, env: req.environment, now: now)
        let info = try ConsumptionInfo.parse(req.body)
        let (_, changed) = population.answerConsumption(i, transaction: k, at: now, info: info, effect: options.consumptionAnswerEffect)
        if changed {
            // The decision is after now, but the notification index holds future changes too.
            cache.remove(i)
            notificationIndexBox.withLock { $0 = nil }
        }
        return SimResponse(status: 202)
    }

    /// `GET /_sim/truth/consumption?from=ISO&to=ISO` (default start..now); nil for a bad time.
    func consumptionTruth(_ query: [String: String]) -> SimResponse? {
        let now = clock.now()
        guard let (from, to) = timeWindow(query) else { return nil }
        return .json(200, ConsumptionTruthReport.json(population, from: from, to: to, now: now, options: options.notifications))
    }
}
