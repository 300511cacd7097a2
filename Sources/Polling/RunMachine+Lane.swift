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
}

extension RunMachine.Lane {
    typealias Finished = RunMachine.Finished
    typealias LaneEvent = RunMachine.LaneEvent
    typealias LaneAction = RunMachine.LaneAction

    /// The lane's task was cancelled (the grace period ran out): what it holds is given back.
    mutating func cancelled() {
        if phase != .ended, !isAbandoned { phase = .abandoned(released: false) }
    }

    /// Applies `event`. `graceOver`: the machine's grace ran out (a poll finished then is not
    /// committed); `recoverOrphans`: the orphan check is due, should the lane find others
    /// holding the rest.
    mutating func apply(_ event: LaneEvent, graceOver: Bool, recoverOrphans: Bool, rules: RunMachine.Rules, now: Date) {
        let working = phase != .ended && !isAbandoned
        switch event {
        case .proceed:
            break
        case .claimed(let ids):
            // Claimed items are the lane's even when it is abandoned: they are released.
            inFlight.formUnion(ids)
            if working { phase = ids.isEmpty && inFlight.isEmpty ? .checkingProgress : .claimed }
        case .pollFinished(let result):
            // Cut short by the end of the grace period: the item is released, not committed.
            guard !isAbandoned, !graceOver else { return }
            inFlight.remove(result.id)
            finished.append(result)
            if phase == .claimed { phase = .claiming }
            commitWanted = finished.count >= rules.batch || inFlight.isEmpty || now.timeIntervalSince(lastCommit) > rules.commitAfter
        case .progressChecked(let runFinished):
            if runFinished {
                phase = .ended
            } else if working {
                phase = .othersHoldTheRest(recoverOrphans: recoverOrphans, lookAgainAt: nil)
            }
        case .waited:
            if case .othersHoldTheRest(_, let at?) = phase, now >= at { phase = .claiming }
        }
    }

    /// The lane is still at work: not ended, not abandoned (nor is the machine's grace over).
    func working(graceOver: Bool) -> Bool { phase != .ended && !isAbandoned && !graceOver }

    /// The lane's next step, given its phase (the loop of the old worker, one step at a time).
    /// `.recoverOrphans`' `keep` is left empty: the machine fills in what every lane holds.
    mutating func next(graceOver: Bool, claimingStopped: Bool, rules: RunMachine.Rules, now: Date) -> LaneAction {
        if phase == .ended { return .end }
        if isAbandoned || graceOver { return abandonStep() }
        if commitWanted, !finished.isEmpty { return commitStep() }
        commitWanted = false
        if phase == .checkingProgress { return finished.isEmpty ? .checkProgress : commitStep() }
        if case .othersHoldTheRest(true, let at) = phase {
            phase = .othersHoldTheRest(recoverOrphans: false, lookAgainAt: at)
            return .recoverOrphans(keep: [])
        }
        if phase == .claiming, inFlight.count <= rules.batch / 2, !claimingStopped {
            return .claim(rules.batch - inFlight.count)
        }
        guard inFlight.isEmpty else { return .awaitPoll }
        if !finished.isEmpty { return commitStep() }
        if claimingStopped {
            phase = .ended
            return .end
        }
        if case .othersHoldTheRest(_, let at) = phase {
            let at = at ?? now.addingTimeInterval(rules.lookAgainAfter)
            phase = .othersHoldTheRest(recoverOrphans: false, lookAgainAt: at)
            return .wait(until: at)
        }
        // The round is over (a commit, nothing in flight): a new one claims.
        phase = .claiming
        return next(graceOver: graceOver, claimingStopped: claimingStopped, rules: rules, now: now)
    }

    private func commitStep() -> LaneAction { .commit(finished.map(\.id)) }

    /// Out of time: what finished is committed, what did not goes back to pending.
    private mutating func abandonStep() -> LaneAction {
        if !finished.isEmpty { return commitStep() }
        if phase != .abandoned(released: true), !inFlight.isEmpty {
            phase = .abandoned(released: true)
            return .release(inFlight.sorted())
        }
        inFlight.removeAll()
        phase = .ended
        return .end
    }

    /// Its finished polls are committed: what they were.
    mutating func committed(now: Date) -> [Finished] {
        let batch = finished
        finished.removeAll(keepingCapacity: true)
        commitWanted = false
        lastCommit = now
        return batch
    }
}
