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
        let pause = t0.addingTimeInterval(0.05)
        let cut = rate.rateLimited(at: t0, pausedUntil: pause)
        #expect(cut)
        // The other 16 answers of the same burst, over the next round trip.
        var cuts = 0
        for i in 1..<17 where rate.rateLimited(at: t0.addingTimeInterval(Double(i) * 0.01), pausedUntil: pause) { cuts += 1 }
        #expect(cuts == 0)
        #expect(rate.factor(at: pause) == 0.5)
    }

    @Test func a429DuringThePauseOrWithinTheQuietIntervalAfterItIsTheSameBurst() {
        var rate = AdaptiveRate(quietInterval: 1)
        let pause = t0.addingTimeInterval(10)
        rate.rateLimited(at: t0, pausedUntil: pause)
        let duringPause = rate.rateLimited(at: t0.addingTimeInterval(5), pausedUntil: pause)
        let justAfter = rate.rateLimited(at: pause.addingTimeInterval(0.9), pausedUntil: pause)
        #expect(!duringPause && !justAfter)
        // A second after sending resumed, a 429 is news: the reduced rate is still too fast.
        let news = rate.rateLimited(at: pause.addingTimeInterval(1), pausedUntil: pause.addingTimeInterval(1))
        #expect(news)
        #expect(abs(rate.factor(at: pause.addingTimeInterval(1)) - 0.5 * 1.25 * 0.5) < 1e-9)
    }

    @Test func recoversToTheFullRateWithinSeconds() {
        var rate = AdaptiveRate()
        rate.rateLimited(at: t0, pausedUntil: t0)
        #expect(rate.factor(at: t0) == 0.5)
        #expect(abs(rate.factor(at: t0.addingTimeInterval(1)) - 0.625) < 1e-9)
        #expect(rate.factor(at: t0.addingTimeInterval(3.2)) == 1)
        // Recovery counts from the end of the pause: nothing was learnt while nothing was sent.
        var paused = AdaptiveRate()
        paused.rateLimited(at: t0, pausedUntil: t0.addingTimeInterval(30))
        #expect(paused.factor(at: t0.addingTimeInterval(30)) == 0.5)
    }

    @Test func aServerFarBelowTheConfiguredRateIsFoundInSeconds() {
        // Configured 2,000/s against a server that takes 20/s: one cut a second (with a second of
        // recovery between) until below it.
        var rate = AdaptiveRate()
        var now = t0
        var seconds = 0
        while 2000 * rate.factor(at: now) > 20 {
            rate.rateLimited(at: now, pausedUntil: now)
            now = now.addingTimeInterval(1)
            seconds += 1
        }
        #expect(seconds <= 10, "took \(seconds) s")
    }

    @Test func neverBelowTheFloor() {
        var rate = AdaptiveRate(minimumFactor: 0.125)
        for i in 0..<20 { rate.rateLimited(at: t0.addingTimeInterval(Double(i) * 2), pausedUntil: t0.addingTimeInterval(Double(i) * 2)) }
        #expect(rate.factor(at: t0.addingTimeInterval(38)) == 0.125)
    }
}
