@testable import AppStoreServerAPI
import Foundation
import Testing

/// The 429 back-off rules on injected time: one cut per burst, recovery within seconds, a floor.
@Suite("Adaptive rate after 429s")
struct AdaptiveRateTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func untouchedIsFullRate() {
        #expect(AdaptiveRate().factor(at: t0) == 1)
    }

    @Test func oneBurstIsOneSignal() {
        var rate = AdaptiveRate()
        let sent = t0.addingTimeInterval(-0.1) // 17 requests in flight together
        let pause = t0.addingTimeInterval(0.05)
        let cut = rate.rateLimited(at: t0, sentAt: sent, pausedUntil: pause)
        #expect(cut)
        // The other 16 answers of the same burst, over the next round trip (however long).
        var cuts = 0
        for i in 1..<17 where rate.rateLimited(at: t0.addingTimeInterval(Double(i) * 0.2), sentAt: sent, pausedUntil: pause) { cuts += 1 }
        #expect(cuts == 0)
        #expect(rate.factor(at: pause) == 0.5)
    }

    @Test func a429ToARequestSentAfterTheCutIsNews() {
        var rate = AdaptiveRate()
        let pause = t0.addingTimeInterval(0.05)
        rate.rateLimited(at: t0, sentAt: t0.addingTimeInterval(-0.1), pausedUntil: pause)
        // Sent at the halved rate once the pause ended, and refused again: still too fast.
        let news = rate.rateLimited(at: pause.addingTimeInterval(0.02), sentAt: pause.addingTimeInterval(0.01), pausedUntil: pause.addingTimeInterval(0.1))
        #expect(news)
        #expect(abs(rate.factor(at: pause.addingTimeInterval(0.1)) - 0.5 * pow(1.25, 0.02) * 0.5) < 1e-6)
    }

    @Test func recoversToTheFullRateWithinSeconds() {
        var rate = AdaptiveRate()
        rate.rateLimited(at: t0, sentAt: t0, pausedUntil: t0)
        #expect(rate.factor(at: t0) == 0.5)
        #expect(abs(rate.factor(at: t0.addingTimeInterval(1)) - 0.625) < 1e-9)
        #expect(rate.factor(at: t0.addingTimeInterval(3.2)) == 1)
        // Recovery counts from the end of the pause: nothing was learnt while nothing was sent.
        var paused = AdaptiveRate()
        paused.rateLimited(at: t0, sentAt: t0, pausedUntil: t0.addingTimeInterval(30))
        #expect(paused.factor(at: t0.addingTimeInterval(30)) == 0.5)
    }

    @Test func aServerFarBelowTheConfiguredRateIsFoundWithinASecond() {
        // Configured 2,000/s against a server that takes 20/s: every round trip (0.1 s with its
        // pause) that is still too fast brings one cut.
        var rate = AdaptiveRate()
        var now = t0
        while 2000 * rate.factor(at: now) > 20 {
            rate.rateLimited(at: now, sentAt: now.addingTimeInterval(-0.01), pausedUntil: now.addingTimeInterval(0.05))
            now = now.addingTimeInterval(0.1)
        }
        #expect(now.timeIntervalSince(t0) <= 1, "took \(now.timeIntervalSince(t0)) s")
    }

    @Test func neverBelowTheFloor() {
        var rate = AdaptiveRate(minimumFactor: 0.125)
        for i in 0..<20 {
            let now = t0.addingTimeInterval(Double(i) * 2)
            rate.rateLimited(at: now, sentAt: now, pausedUntil: now)
        }
        #expect(rate.factor(at: t0.addingTimeInterval(38)) == 0.125)
    }
}
