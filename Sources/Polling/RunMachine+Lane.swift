import Foundation

extension RunMachine {
    /// One lane: keeps up to `batch` polls in flight, claims more as they finish, and commits
    /// finished ones together. There is no barrier per batch, so one slow answer (a Sandbox
    /// budget of 5/s, a retry) holds up only its own slot.
    struct Lane: Sendable, Equatable {
        var inFlight: Set<String> = []
        var finished: [Finished] = []
        var lastCommit: Date
        /// This round of the loop has claimed (a round ends when a poll finishes or a wait ends).
        var claimed = false
        /// A finished poll asked for a commit (a full batch, nothing in flight, or time).
        var commitWanted = false
        /// The last claim found nothing and nothing is in flight: is the run finished?
        var progressWanted = false
        /// ...it is not: look for items of dead workers (when that check is due).
        var orphansWanted = false
        /// Others hold the rest: look again at `lookAgainAt`.
        var othersHoldTheRest = false
        var lookAgainAt: Date?
        /// The grace period ran out or the lane's task was cancelled.
        var abandoned = false
        var released = false
        var ended = false

        init(lastCommit: Date) { self.lastCommit = lastCommit }
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
        if cancelled { lanes[i].abandoned = true }
        apply(event, lane: i, now: now)
        return nextLaneAction(i, now: now)
    }

    private mutating func apply(_ event: LaneEvent, lane i: Int, now: Date) {
        switch event {
        case .proceed:
            break
        case .claimed(let ids):
            lanes[i].claimed = true
            lanes[i].inFlight.formUnion(ids)
            lanes[i].othersHoldTheRest = false
            lanes[i].progressWanted = ids.isEmpty && lanes[i].inFlight.isEmpty
        case .pollFinished(let result):
            // Cut short by the end of the grace period: the item is released, not committed.
            guard !lanes[i].abandoned, !graceOver else { return }
            lanes[i].inFlight.remove(result.id)
            lanes[i].finished.append(result)
            lanes[i].claimed = false
            let lane = lanes[i]
            lanes[i].commitWanted = lane.finished.count >= rules.batch || lane.inFlight.isEmpty
                || now.timeIntervalSince(lane.lastCommit) > rules.commitAfter
        case .progressChecked(let runFinished):
            lanes[i].progressWanted = false
            if runFinished {
                lanes[i].ended = true
            } else {
                lanes[i].orphansWanted = orphanCheckDue(now: now)
                lanes[i].othersHoldTheRest = true
            }
        case .waited:
            if let at = lanes[i].lookAgainAt, now >= at {
                lanes[i].lookAgainAt = nil
                lanes[i].claimed = false
            }
        }
    }

    /// The lane's next step, given its state (the loop of the old worker, one step at a time).
    private mutating func nextLaneAction(_ i: Int, now: Date) -> LaneAction {
        if lanes[i].ended { return .end }
        if lanes[i].abandoned || graceOver { return abandonStep(i) }
        checkTimeBudget(now: now)
        if lanes[i].commitWanted, !lanes[i].finished.isEmpty { return commitStep(i) }
        lanes[i].commitWanted = false
        if lanes[i].progressWanted { return lanes[i].finished.isEmpty ? .checkProgress : commitStep(i) }
        if lanes[i].orphansWanted {
            lanes[i].orphansWanted = false
            return .recoverOrphans(keep: inFlight)
        }
        if !lanes[i].claimed, lanes[i].inFlight.count <= rules.batch / 2, !claimingStopped {
            return .claim(rules.batch - lanes[i].inFlight.count)
        }
        guard lanes[i].inFlight.isEmpty else { return .awaitPoll }
        if !lanes[i].finished.isEmpty { return commitStep(i) }
        if claimingStopped {
            lanes[i].ended = true
            return .end
        }
        if lanes[i].othersHoldTheRest {
            let at = lanes[i].lookAgainAt ?? now.addingTimeInterval(rules.lookAgainAfter)
            lanes[i].lookAgainAt = at
            return .wait(until: at)
        }
        lanes[i].claimed = false
        return nextLaneAction(i, now: now)
    }

    private func commitStep(_ i: Int) -> LaneAction { .commit(lanes[i].finished.map(\.id)) }

    /// Out of time: what finished is committed, what did not goes back to pending.
    private mutating func abandonStep(_ i: Int) -> LaneAction {
        if !lanes[i].finished.isEmpty { return commitStep(i) }
        if !lanes[i].released, !lanes[i].inFlight.isEmpty {
            lanes[i].released = true
            return .release(lanes[i].inFlight.sorted())
        }
        lanes[i].inFlight.removeAll()
        lanes[i].ended = true
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
