import AppStoreSimulator
import ArgumentParser
import Foundation

/// Options of the Retention Messaging API and the simulated customers' cancel page (serve).
struct RetentionFlags: ParsableArguments {
    @Option(help: "The Get Retention Message URL of every app in Production (and, unless --sandbox-retention-url, Sandbox): when a simulated customer opens the cancel page, POST {\"signedPayload\": ...} of a signed DecodedRealtimeRequestBody there (one attempt, --retention-timeout). Set from the start, no performance test needed; PUT /inApps/v1/messaging/realtime/url also sets it.")
    var retentionUrl: String?

    @Option(help: "The Sandbox Get Retention Message URL (default: --retention-url); the performance test posts to it.")
    var sandboxRetentionUrl: String?

    @Option(help: "Milliseconds (real time) the App Store waits for a real-time answer before showing the default message.")
    var retentionTimeout: Int64 = 700

    @Option(help: "How long an uploaded message or image stays PENDING before it is APPROVED (or REJECTED), in simulated time: 0, 30m, 2h, 1d.")
    var messageApprovalDelay = "0"

    @Option(help: "Comma-separated words: a message whose header, body or bullet points contain one (any case) is REJECTED.")
    var rejectMessagesContaining: String?

    @Option(help: "Share of voluntary cancellations (auto-renew turned off) preceded, 1-10 minutes before, by a cancel-page view.")
    var cancelPageShare = 0.5

    @Option(help: "Cancel-page views by customers who do not mean to cancel, per active subscriber (auto-renew on) per 30 days.")
    var cancelPageBrowse = 0.02

    @Option(help: "Probability, per kind of answer shown, that a customer who came to cancel keeps renewing: message=P,alternate_product=P,promotional_offer=P (drawn per view).")
    var cancelPageEffect = "message=0.05,alternate_product=0.10,promotional_offer=0.20"

    @Option(help: "Probability per answer, overriding its kind's: message:UUID=P,product:PRODUCT_ID=P (an alternate product's target),offer:OFFER_ID=P (a promotional offer). Looked up offer, then product, then message, then the kind.")
    var cancelPageArmEffect = ""

    @Option(help: "Promotional offers' terms, for revenue per save in /_sim/retention/potential: OFFER_ID=DISCOUNTxPERIODS (SAVE50=0.5x1: half off for one period). Offers not listed: no discount.")
    var cancelPageOffer = ""

    @Option(help: "Performance test: requests sent (PerformanceTestConfig.totalRequests).")
    var performanceTestRequests = 200

    @Option(help: "Performance test: requests in flight at once (maxConcurrentRequests).")
    var performanceTestConcurrency = 10

    @Option(help: "Performance test: milliseconds an answer may take to count (responseTimeThreshold).")
    var performanceTestThresholdMs: Int64 = 700

    @Option(help: "Performance test: the success rate in percent at or above which it passes (successRateThreshold).")
    var performanceTestSuccessRate = 95

    @Option(help: "Performance test: milliseconds after which no more requests are started (totalDuration); those never sent fail.")
    var performanceTestDurationMs: Int64 = 60_000

    func options() throws -> RetentionOptions {
        var o = RetentionOptions()
        for url in [retentionUrl, sandboxRetentionUrl].compactMap({ $0 }) {
            guard url.utf8.count <= 256, let u = URL(string: url), ["http", "https"].contains(u.scheme ?? ""), u.host != nil else {
                throw ValidationError("--retention-url \(url): not an http(s) URL of at most 256 bytes")
            }
        }
        o.productionURL = retentionUrl
        o.sandboxURL = sandboxRetentionUrl
        guard retentionTimeout > 0 else { throw ValidationError("--retention-timeout: milliseconds above 0") }
        o.timeoutMs = retentionTimeout
        guard let delay = messageApprovalDelay == "0" ? 0 : SimTime.parseDuration(messageApprovalDelay), delay >= 0 else {
            throw ValidationError("--message-approval-delay \(messageApprovalDelay): a duration such as 0, 30m, 2h, 1d")
        }
        o.approvalDelayMs = delay
        o.rejectWords = (rejectMessagesContaining ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard (0...1).contains(cancelPageShare) else { throw ValidationError("--cancel-page-share: a share from 0 to 1") }
        guard cancelPageBrowse >= 0 else { throw ValidationError("--cancel-page-browse: views per 30 days, 0 or more") }
        o.cancelPageShare = cancelPageShare
        o.browsePer30Days = cancelPageBrowse
        guard let effect = CancelPageEffect.parse(cancelPageEffect) else {
            throw ValidationError("--cancel-page-effect \(cancelPageEffect): message=P,alternate_product=P,promotional_offer=P with P from 0 to 1")
        }
        o.effect = effect
        do {
            o.effect.arms = try CancelPageEffect.parseArms(cancelPageArmEffect, productIds: Set(Catalog.standard.products.map(\.id)))
        } catch {
            throw ValidationError("--cancel-page-arm-effect: \(error.reason)")
        }
        do { o.offers = try CancelPageOfferTerms.parse(cancelPageOffer) } catch {
            throw ValidationError("--cancel-page-offer: \(error.reason)")
        }
        guard performanceTestRequests >= 1, performanceTestConcurrency >= 1, performanceTestThresholdMs > 0, performanceTestDurationMs > 0,
              (0...100).contains(performanceTestSuccessRate)
        else { throw ValidationError("--performance-test-*: requests, concurrency, threshold and duration above 0; success rate 0 to 100") }
        o.performanceTest.totalRequests = performanceTestRequests
        o.performanceTest.maxConcurrentRequests = performanceTestConcurrency
        o.performanceTest.responseTimeThresholdMs = performanceTestThresholdMs
        o.performanceTest.successRatePercent = performanceTestSuccessRate
        o.performanceTest.totalDurationMs = performanceTestDurationMs
        return o
    }
}
