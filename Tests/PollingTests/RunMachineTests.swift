import ChurnModel
import Foundation
@testable import Polling
import Testing

/// The run engine's rules, one at a time, on the state machine (no database, no clock: time is
/// a value passed with every event).
@Suite("Run machine (pure rules)")
struct RunMachineTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    func at(_ s: TimeInterval) -> Date { t0.addingTimeInterval(s) }

    func machine(batch: Int = 4, lanes: Int = 1, outageThreshold: Int = 3, maxDuration: TimeInterval? = nil) -> RunMachine {
        var m = RunMachine(rules: .init(batch: batch, lanes: lanes, outageThreshold: outageThreshold, shutdownGrace: 30),
                           startedAt: t0, maxDuration: maxDuration)
        m.beginWork(now: t0)
        return m
    }

    func done(_ id: String, _ failure: ItemFailureClass.Scope? = nil, reason: String? = nil) -> RunMachine.Finished {
        .init(id: id, failure: failure, reason: reason)
    }

    /// A lane that claimed `ids` at t0.
    func claimed(_ ids: [String], batch: Int = 4) -> RunMachine {
        var m = machine(batch: batch)
        #expect(m.lane(0, .proceed, now: t0) == .claim(batch))
        _ = m.lane(0, .claimed(ids), now: t0)
        return m
    }

    // MARK: Lanes: claims and commits

    @Test func aLaneStartsByClaimingAFullBatch() {
        var m = machine(batch: 4)
        #expect(m.lane(0, .proceed, now: t0) == .claim(4))
    }

    @Test func aLaneClaimsMoreOnlyOnceHalfItsBatchIsFree() {
        var m = claimed(["a", "b", "c", "d"])
        #expect(m.lane(0, .pollFinished(done("a")), now: at(0.1)) == .awaitPoll)
        #expect(m.lane(0, .pollFinished(done("b")), now: at(0.1)) == .claim(2))
    }

    @Test func aFullBatchIsCommitted() {
        var m = claimed(["a", "b", "c", "d"])
        _ = m.lane(0, .pollFinished(done("a")), now: at(0.01))
        #expect(m.lane(0, .pollFinished(done("b")), now: at(0.02)) == .claim(2))
        #expect(m.lane(0, .claimed(["e", "f"]), now: at(0.02)) == .awaitPoll)
        #expect(m.lane(0, .pollFinished(done("c")), now: at(0.03)) == .awaitPoll)
        #expect(m.lane(0, .pollFinished(done("d")), now: at(0.04)) == .commit(["a", "b", "c", "d"]))
    }

    @Test func finishedPollsAreCommittedWhenNothingIsInFlight() {
        var m = claimed(["a"])
        #expect(m.lane(0, .pollFinished(done("a")), now: at(0.01)) == .commit(["a"]))
    }

    @Test func aFinishedPollIsCommittedOnceTheLastCommitIsOlderThanAQuarterSecond() {
        var m = claimed(["a", "b", "c", "d"])
        #expect(m.lane(0, .pollFinished(done("a")), now: at(0.25)) == .awaitPoll)
        #expect(m.lane(0, .pollFinished(done("b")), now: at(0.26)) == .commit(["a", "b"]))
        _ = m.committed(lane: 0, counts: RunMachine.Counts(), now: at(0.3))
        #expect(m.lane(0, .proceed, now: at(0.3)) == .claim(2))
        #expect(m.lane(0, .claimed([]), now: at(0.3)) == .awaitPoll)
        #expect(m.lane(0, .pollFinished(done("c")), now: at(0.5)) == .claim(3), "no commit: 0.2 s after the last commit")
    }

    @Test func theHeartbeatIsWrittenAtMostOnceASecond() {
        var m = machine()
        #expect(m.committed(lane: 0, counts: RunMachine.Counts(), now: at(0)).heartbeat)
        #expect(!m.committed(lane: 0, counts: RunMachine.Counts(), now: at(0.99)).heartbeat)
        #expect(m.committed(lane: 0, counts: RunMachine.Counts(), now: at(1)).heartbeat)
    }

    @Test func nothingToClaimAndNothingInFlightAsksWhetherTheRunIsFinished() {
        var m = claimed([])
        #expect(m.lane(0, .proceed, now: t0) == .checkProgress)
        #expect(m.lane(0, .progressChecked(runFinished: true), now: t0) == .end)
    }

    @Test func whileOthersHoldTheRestTheLaneLooksForOrphansEveryTwoSecondsAndClaimsAgainEveryHalfSecond() {
        var m = claimed([])
        #expect(m.lane(0, .progressChecked(runFinished: false), now: t0) == .recoverOrphans(keep: []))
        #expect(m.lane(0, .proceed, now: t0) == .wait(until: at(0.5)))
        #expect(m.lane(0, .waited, now: at(0.4)) == .wait(until: at(0.5)), "woken early: waits on")
        #expect(m.lane(0, .waited, now: at(0.5)) == .claim(4))
        #expect(m.lane(0, .claimed([]), now: at(0.5)) == .checkProgress)
        #expect(m.lane(0, .progressChecked(runFinished: false), now: at(0.5)) == .wait(until: at(1)), "no orphan check yet")
        _ = m.lane(0, .waited, now: at(2))
        _ = m.lane(0, .claimed([]), now: at(2))
        #expect(m.lane(0, .progressChecked(runFinished: false), now: at(2)) == .recoverOrphans(keep: []))
    }

    @Test func theOrphanCheckKeepsEveryItemThisProcessHoldsIncludingFinishedUncommittedOnes() {
        var m = machine(batch: 4, lanes: 2)
        _ = m.lane(0, .proceed, now: t0)
        _ = m.lane(0, .claimed(["a", "b", "c", "d"]), now: t0)
        #expect(m.lane(0, .pollFinished(done("a")), now: at(0.1)) == .awaitPoll)
        _ = m.lane(1, .proceed, now: t0)
        #expect(m.lane(1, .claimed([]), now: at(0.1)) == .checkProgress)
        #expect(m.lane(1, .progressChecked(runFinished: false), now: at(0.1)) == .recoverOrphans(keep: ["b", "c", "d", "a"]))
    }

    // MARK: Stopping

    @Test func aStopEndsClaimsAndTheLaneEndsOnceItsWorkIsCommitted() {
        var m = claimed(["a", "b"])
        m.stop(.signal, now: at(0.1))
        #expect(m.lane(0, .pollFinished(done("a")), now: at(0.1)) == .awaitPoll, "half the batch is free, but no claim")
        #expect(m.lane(0, .pollFinished(done("b")), now: at(0.1)) == .commit(["a", "b"]))
        _ = m.committed(lane: 0, counts: RunMachine.Counts(), now: at(0.1))
        #expect(m.lane(0, .proceed, now: at(0.1)) == .end)
        #expect(m.stopping == .signal)
    }

    @Test func afterTheGracePeriodInFlightWorkIsAbandonedFinishedWorkCommittedTheRestReleased() {
        var m = claimed(["a", "b", "c"])
        _ = m.lane(0, .pollFinished(done("a")), now: at(0.1))
        m.stop(.signal, now: at(0.5))
        #expect(m.graceDeadline == at(30.5))
        #expect(m.supervise(now: at(30)) == .keepLocks)
        #expect(m.supervise(now: at(30.5)) == .abandonInFlight)
        #expect(m.graceOver)
        #expect(m.lane(0, .pollFinished(done("b")), cancelled: true, now: at(31)) == .commit(["a"]), "b was cut short")
        _ = m.committed(lane: 0, counts: RunMachine.Counts(), now: at(31))
        #expect(m.lane(0, .proceed, now: at(31)) == .release(["b", "c"]))
        #expect(m.lane(0, .proceed, now: at(31)) == .end)
        #expect(m.supervise(now: at(32)) == .wait(until: nil))
    }

    @Test func aStopBeforeTheWorkStartsGivesTheGracePeriodFromTheStart() {
        var m = RunMachine(rules: .init(batch: 4, lanes: 1, outageThreshold: 3, shutdownGrace: 30), startedAt: t0, maxDuration: nil)
        m.stop(.signal, now: t0)
        m.beginWork(now: at(10))
        #expect(m.supervise(now: at(10)) == .wait(until: at(11)), "the lock check comes first")
        #expect(m.graceDeadline == at(40))
        #expect(m.lane(0, .proceed, now: at(10)) == .end)
    }

    @Test func theTimeBudgetStopsClaimsLikeASignal() {
        var m = machine(maxDuration: 60)
        #expect(m.lane(0, .proceed, now: at(59)) == .claim(4))
        _ = m.lane(0, .claimed([]), now: at(59))
        _ = m.lane(0, .progressChecked(runFinished: false), now: at(59))
        _ = m.lane(0, .proceed, now: at(59))
        #expect(m.lane(0, .waited, now: at(60)) == .end)
        #expect(m.stopping == .timeBudget)
    }

    @Test func theSupervisorWakesForTheTimeBudgetEvenWhileLanesWaitOnApple() {
        var m = machine(maxDuration: 0.5)
        #expect(m.supervise(now: t0) == .wait(until: at(0.5)))
        #expect(m.supervise(now: at(0.5)) == .wait(until: at(1)), "the lock check is next; the stop is requested")
        #expect(m.stopReason == "time budget (--max-duration) used up")
        #expect(m.graceDeadline == at(30.5))
    }

    @Test func theLockConnectionIsCheckedASecondAfterTheLastCheckEnded() {
        var m = machine()
        #expect(m.supervise(now: t0) == .wait(until: at(1)))
        #expect(m.supervise(now: at(1)) == .keepLocks)
        #expect(m.supervise(now: at(1.5)) == .wait(until: nil), "one check at a time")
        m.locksKept(now: at(2))
        #expect(m.supervise(now: at(2)) == .wait(until: at(3)))
    }

    // MARK: Endings

    @Test func consecutiveAppleOutagesPastTheThresholdEndTheWork() {
        var m = machine(outageThreshold: 3)
        _ = m.record([done("a", .appleUnavailable, reason: "unavailable: 503"), done("b", .appleUnavailable)], RunMachine.Counts(), now: t0)
        #expect(m.stopReason == nil)
        _ = m.record([done("c", .appleUnavailable, reason: "unavailable: timeout")], RunMachine.Counts(), now: t0)
        #expect(m.stopping == .appleUnavailable("unavailable: timeout", rateLimited: false))
        #expect(m.stopReason != nil)
    }

    @Test func aSuccessOrASubscriptionFailureResetsTheOutageCount() {
        var m = machine(outageThreshold: 3)
        _ = m.record([done("a", .appleUnavailable), done("b", .appleUnavailable), done("c")], RunMachine.Counts(), now: t0)
        _ = m.record([done("d", .appleUnavailable), done("e", .appleUnavailable), done("f", .subscription)], RunMachine.Counts(), now: t0)
        _ = m.record([done("g", .appleUnavailable), done("h", .appleUnavailable)], RunMachine.Counts(), now: t0)
        #expect(m.stopping == nil)
    }

    @Test func aRejectedKeyEndsTheWorkAtOnce() {
        var m = machine()
        _ = m.record([done("a", .unauthorized, reason: "unauthorized: 401")], RunMachine.Counts(), now: t0)
        #expect(m.stopping == .keyRefused("unauthorized: 401"))
        #expect(m.lane(0, .proceed, now: t0) == .end)
    }

    @Test func anUntrustedServerEndsTheWorkWithItsReason() {
        var m = machine()
        _ = m.record([done("a", .untrustedServer, reason: "untrusted: self-signed")], RunMachine.Counts(), now: t0)
        #expect(m.stopping == .untrustedServer("untrusted: self-signed"))
    }

    @Test func theFirstEndingWins() {
        var m = machine(outageThreshold: 1)
        m.stop(.database("gone"), now: t0)
        _ = m.record([done("a", .unauthorized), done("b", .appleUnavailable)], RunMachine.Counts(), now: t0)
        #expect(m.stopping == .database("gone"))
    }

    @Test func aBatchAddsItsCountsAndCallsToTheReport() {
        var m = machine()
        m.setRun(7, due: 100)
        var calls = done("a")
        calls.calls = ["subscriptionStatuses": 2]
        let report = m.record([calls, done("b")], RunMachine.Counts(polled: 2, failed: 1, events: 3, enqueued: 1), now: at(5))
        #expect((report.runId, report.due, report.polled, report.failed, report.elapsed) == (7, 100, 2, 1, 5))
        #expect(report.calls == ["subscriptionStatuses": 2])
        #expect((m.stats.events, m.stats.enqueued) == (3, 1))
    }

    @Test func whoseFailureDecidesTheStopInOnePlace() {
        let scopes: [ItemFailureClass.Scope] = [.subscription, .appleUnavailable, .rateLimited, .unauthorized, .untrustedServer]
        #expect(scopes.map { RunStop($0, detail: "x") } == [nil, .appleUnavailable("x", rateLimited: false), .appleUnavailable("x", rateLimited: true),
                                                           .keyRefused("x"), .untrustedServer("x")])
        // Every class of the whole run stops it; none of a subscription's does.
        for c in ItemFailureClass.allCases {
            #expect((RunStop(c.scope, detail: "x") != nil) == c.retriedOnResume, "\(c)")
        }
        var m = machine()
        m.stop(.database("gone"), now: t0)
        #expect(m.stopReason == "PostgreSQL unavailable: gone")
    }
}
