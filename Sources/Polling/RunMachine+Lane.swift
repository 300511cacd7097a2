import Foundation

extension RunMachine {
    /// One lane: keeps up to `batch` polls in flight, claims more as they finish, and commits
    /// finished ones together. There is no barrier per batch, so one slow answer (a Sandbox
    /// budget of 5/s, a retry) holds up only its own slot.
    struct Lane: Sendable, Equatable {
        var inFlight: Set<String> = []
        var finished: [Finished] = []
        var lastCommit: Date
        /// A finished poll asked for a commit (a full batch, nothing in flight, or time).
        var commitWanted = false
        var phase = Phase.claiming

        /// Where the lane is in its loop; each case carries what it needs.
        enum Phase: Sendable, Equatable {
            /// A new round: claim when there is room.
            case claiming
            /// This round has claimed: wait for a poll to finish (or a commit) before claiming again.
            case claimed
            /// The last claim found nothing and nothing is in flight: is the run finished?
            case checkingProgress
            /// It is not, others hold the rest: first bring back dead workers' items when that check
            /// is due, then look again at `lookAgainAt`.
            case othersHoldTheRest(recoverOrphans: Bool, lookAgainAt: Date?)
            /// The grace period ran out or the lane's task was cancelled; `released`: what was in
            /// flight has been given back.
            case abandoned(released: Bool)
            case ended
        }

        init(lastCommit: Date) { self.lastCommit = lastCommit }

        var isAbandoned: Bool { if case .abandoned = phase { true } else { false } }
    }

    /// What happens to a lane.
    enum LaneEvent: Sendable, Equatable {
        /// The lane starts (or goes on after its driver carried out an action with no result).
        case proceed
        /// A claim returned these items (their polls are started).
        case claimed([String])
        case pollFinished(Finished)
        /// `checkProgress` answered.
        case progressChecked(runFinished: Bool)
        /// `wait` is over.
        case waited
    }

    /// What a lane's driver does next.
    enum LaneAction: Sendable, Equatable {
        case claim(Int)
        /// Wait for the next poll to finish.
        case awaitPoll
        /// Commit these finished polls in one transaction, then report it with ``committed``.
        case commit([String])
        /// Ask the database whether the run is finished.
        case checkProgress
        /// Bring back items of dead workers and lost claims of this process (not `keep`).
        case recoverOrphans(keep: [String])
        /// Cancel the polls in flight and put these items back to pending.
        case release([String])
        case wait(until: Date)
        /// The lane is done.
        case end
    }

    /// The answer to ``committed(lane:counts:now:)``.
    struct Commit: Sendable {
        var report: RunProgressReport
        /// Write the heartbeat (with the counters) before the next step.
        var heartbeat: Bool
    }

    /// Applies `event` to lane `i` and says what it does next. `cancelled`: the lane's task was
    /// cancelled meanwhile (the grace period ran out); a poll that finished then is not committed.
    mutating func lane(_ i: Int, _ event: LaneEvent, cancelled: Bool = false, now: Date) -> LaneAction {
        if cancelled, lanes[i].phase != .ended, !lanes[i].isAbandoned { lanes[i].phase = .abandoned(released: false) }
        apply(event, lane: i, now: now)
        return nextLaneAction(i, now: now)
    }

    private mutating func apply(_ event: LaneEvent, lane i: Int, now: Date) {
        let working = lanes[i].phase != .ended && !lanes[i].isAbandoned
        switch event {
        case .proceed:
            break
        case .claimed(let ids):
            // Claimed items are the lane's even when it is abandoned: they are released.
            lanes[i].inFlight.formUnion(ids)
            if working { lanes[i].phase = ids.isEmpty && lanes[i].inFlight.isEmpty ? .checkingProgress : .claimed }
        case .pollFinished(let result):
            // Cut short by the end of the grace period: the item is released, not committed.
            guard !lanes[i].isAbandoned, !graceOver else { return }
            lanes[i].inFlight.remove(result.id)
            lanes[i].finished.append(result)
            if lanes[i].phase == .claimed { lanes[i].phase = .claiming }
            let lane = lanes[i]
            lanes[i].commitWanted = lane.finished.count >= rules.batch || lane.inFlight.isEmpty
                || now.timeIntervalSince(lane.lastCommit) > rules.commitAfter
        case .progressChecked(let runFinished):
            if runFinished {
                lanes[i].phase = .ended
            } else if working {
                lanes[i].phase = .othersHoldTheRest(recoverOrphans: orphanCheckDue(now: now), lookAgainAt: nil)
            }
        case .waited:
            if case .othersHoldTheRest(_, let at?) = lanes[i].phase, now >= at { lanes[i].phase = .claiming }
        }
    }

    /// The lane's next step, given its phase (the loop of the old worker, one step at a time).
    private mutating func nextLaneAction(_ i: Int, now: Date) -> LaneAction {
        if lanes[i].phase == .ended { return .end }
        if lanes[i].isAbandoned || graceOver { return abandonStep(i) }
        checkTimeBudget(now: now)
        if lanes[i].commitWanted, !lanes[i].finished.isEmpty { return commitStep(i) }
        lanes[i].commitWanted = false
        if lanes[i].phase == .checkingProgress { return lanes[i].finished.isEmpty ? .checkProgress : commitStep(i) }
        if case .othersHoldTheRest(true, let at) = lanes[i].phase {
            lanes[i].phase = .othersHoldTheRest(recoverOrphans: false, lookAgainAt: at)
            return .recoverOrphans(keep: inFlight)
        }
        if lanes[i].phase == .claiming, lanes[i].inFlight.count <= rules.batch / 2, !claimingStopped {
            return .claim(rules.batch - lanes[i].inFlight.count)
        }
        guard lanes[i].inFlight.isEmpty else { return .awaitPoll }
        if !lanes[i].finished.isEmpty { return commitStep(i) }
        if claimingStopped {
            lanes[i].phase = .ended
            return .end
        }
        if case .othersHoldTheRest(_, let at) = lanes[i].phase {
            let at = at ?? now.addingTimeInterval(rules.lookAgainAfter)
            lanes[i].phase = .othersHoldTheRest(recoverOrphans: false, lookAgainAt: at)
            return .wait(until: at)
        }
        // The round is over (a commit, nothing in flight): a new one claims.
        lanes[i].phase = .claiming
        return nextLaneAction(i, now: now)
    }

    private func commitStep(_ i: Int) -> LaneAction { .commit(lanes[i].finished.map(\.id)) }

    /// Out of time: what finished is committed, what did not goes back to pending.
    private mutating func abandonStep(_ i: Int) -> LaneAction {
        if !lanes[i].finished.isEmpty { return commitStep(i) }
        if lanes[i].phase != .abandoned(released: true), !lanes[i].inFlight.isEmpty {
            lanes[i].phase = .abandoned(released: true)
            return .release(lanes[i].inFlight.sorted())
        }
        lanes[i].inFlight.removeAll()
        lanes[i].phase = .ended
        return .end
    }

    /// Lane `i`'s finished polls are committed (with these counts): counters, endings, the
    /// heartbeat rule. The lane goes on with ``lane(_:_:now:)`` and `.proceed`.
    mutating func committed(lane i: Int, counts: Counts, now: Date) -> Commit {
        let batch = lanes[i].finished
        lanes[i].finished.removeAll(keepingCapacity: true)
        lanes[i].commitWanted = false
        lanes[i].lastCommit = now
        let report = record(batch, counts, now: now)
        return Commit(report: report, heartbeat: heartbeatDue(now: now))
    }
}
