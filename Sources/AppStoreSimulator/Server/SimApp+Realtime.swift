import AppStoreModels
import Foundation

extension SimApp {
    struct RealtimeSignBody: Decodable {
        var original_transaction_id: String
        var product_id: String?
        var user_locale: String?
        var request_identifier: String?
        /// ISO 8601; default: the simulator's clock.
        var signed_date: String?
        var environment: String?
        var app_apple_id: Int64?
    }

    /// `POST /_sim/realtime/sign`: a Get Retention Message request for a subscription, signed as
    /// the App Store signs it (`{"signedPayload": JWS}`), to post where a test wants. Fields left
    /// out are the subscription's: its product at the moment, `en-US`, a fresh UUID, the clock,
    /// its environment and this app's app Apple id (nil: bad input).
    func realtimeSign(_ req: SimRequest) -> SimResponse? {
        guard let body = try? JSONDecoder().decode(RealtimeSignBody.self, from: Data(req.body)),
              let loc = population.locate(transactionId: body.original_transaction_id), loc.transaction == 0 else { return nil }
        let at = body.signed_date.map(SimTime.parse) ?? clock.now()
        guard let at else { return nil }
        let state = population.state(loc.subscriber, at: at)
        let request = DecodedRealtimeRequestBody(
            originalTransactionId: body.original_transaction_id, appAppleId: body.app_apple_id ?? population.config.appAppleId,
            productId: body.product_id ?? population.catalog.products[state.latest.product].id, userLocale: body.user_locale ?? "en-US",
            requestIdentifier: body.request_identifier ?? UUID().uuidString.lowercased(), signedDate: EpochMilliseconds(rawValue: at),
            rawEnvironment: body.environment ?? population.environment(loc.subscriber))
        guard let signed = try? identity.chain.sign(request) else { return nil }
        return .json(200, ["signedPayload": signed])
    }
}
