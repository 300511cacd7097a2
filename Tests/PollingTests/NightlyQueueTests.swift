import Foundation
@testable import Polling
import Testing

/// Which nightly runs one `churnwatch run` works: an unfinished night never swallows the next.
@Suite("Nightly queue and rate-limited retries (pure rules)")
struct NightlyQueueTests {
    func at(_ iso: String) -> Date { ISO8601DateFormatter().date(from: iso)! }
    let oct31 = ISO8601DateFormatter().date(from: "2026-10-31T02:00:00Z")!
    let nov1 = ISO8601DateFormatter().date(from: "2026-11-01T02:00:00Z")!

    @Test func nothingUnfinishedPlansTonight() {
        #expect(NightlyQueue.decide(unfinished: [], tonight: nov1) == NightlyQueue(resume: [], planTonight: true))
    }

    @Test func anEarlierNightIsFinishedFirstAndTonightStillGetsItsRun() {
        let q = NightlyQueue.decide(unfinished: [.init(runId: 1, asOf: oct31)], tonight: nov1)
        #expect(q == NightlyQueue(resume: [1], planTonight: true))
    }

    @Test func tonightsOwnUnfinishedRunIsResumedNotPlannedAgain() {
        // Interrupted at 02:30, re-run at 09:00 the same UTC day.
        let q = NightlyQueue.decide(unfinished: [.init(runId: 2, asOf: nov1)], tonight: at("2026-11-01T09:00:00Z"))
        #expect(q == NightlyQueue(resume: [2], planTonight: false))
    }

    @Test func severalUnfinishedNightsAreWorkedOldestFirst() {
        // A stop while an old night was being finished left tonight's planned run behind it.
        let q = NightlyQueue.decide(unfinished: [.init(runId: 3, asOf: nov1), .init(runId: 1, asOf: oct31)],
                                    tonight: at("2026-11-01T05:00:00Z"))
        #expect(q == NightlyQueue(resume: [1, 3], planTonight: false))
        let next = NightlyQueue.decide(unfinished: [.init(runId: 3, asOf: nov1), .init(runId: 1, asOf: oct31)],
                                       tonight: at("2026-11-02T02:00:00Z"))
        #expect(next == NightlyQueue(resume: [1, 3], planTonight: true))
    }

    @Test func aReplayOfAnEarlierAsOfResumesTheLaterRunAndPlansNothing() {
        let q = NightlyQueue.decide(unfinished: [.init(runId: 5, asOf: nov1)], tonight: oct31)
        #expect(q == NightlyQueue(resume: [5], planTonight: false))
    }

    @Test func aFinishedRunOfTonightMeansTheNightIsDone() {
        // Issue 40: re-running a night another app did not finish added an empty run for this one.
        let done = NightlyQueue.decide(unfinished: [], finishedTonight: .init(runId: 7, asOf: nov1), tonight: at("2026-11-01T09:00:00Z"))
        #expect(done == NightlyQueue(resume: [], planTonight: false, doneTonight: 7))
        // Yesterday's finished run is no reason to skip tonight.
        let next = NightlyQueue.decide(unfinished: [], finishedTonight: .init(runId: 7, asOf: oct31), tonight: nov1)
        #expect(next == NightlyQueue(resume: [], planTonight: true))
        // An earlier night still unfinished is resumed; tonight, done, is not planned again.
        let behind = NightlyQueue.decide(unfinished: [.init(runId: 4, asOf: oct31)], finishedTonight: .init(runId: 7, asOf: nov1), tonight: nov1)
        #expect(behind == NightlyQueue(resume: [4], planTonight: false, doneTonight: 7))
        #expect(NightlyQueue.nightRange(at("2026-11-01T09:00:00Z")) == at("2026-11-01T00:00:00Z")..<at("2026-11-02T00:00:00Z"))
    }

    @Test func nightsAreUTCDays() {
        #expect(NightlyQueue.day(at("2026-11-01T00:00:00Z")) == NightlyQueue.day(at("2026-11-01T23:59:59Z")))
        #expect(NightlyQueue.day(at("2026-10-31T23:59:59Z")) + 1 == NightlyQueue.day(at("2026-11-01T00:00:00Z")))
        let q = NightlyQueue.decide(unfinished: [.init(runId: 1, asOf: at("2026-10-31T23:59:59Z"))], tonight: at("2026-11-01T00:00:01Z"))
        #expect(q.planTonight)
    }

    @Test func rateLimitedItemsAreRetriedThenTheRunStopsResumable() {
        let rule = RateLimitedRetryRule(maxRounds: 3)
        #expect(rule.decide(rateLimited: 0, roundsDone: 0) == .finish)
        #expect(rule.decide(rateLimited: 0, roundsDone: 7) == .finish)
        #expect(rule.decide(rateLimited: 40, roundsDone: 0) == .retry)
        #expect(rule.decide(rateLimited: 1, roundsDone: 2) == .retry)
        #expect(rule.decide(rateLimited: 1, roundsDone: 3) == .stopResumable)
        #expect(RateLimitedRetryRule(maxRounds: 0).decide(rateLimited: 1, roundsDone: 0) == .stopResumable)
    }
}
