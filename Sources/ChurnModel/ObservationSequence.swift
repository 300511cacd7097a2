import Foundation

/// One observation of a subscription: the state Apple signed (a notification's transaction and
/// renewal info, or a poll's answer), the moment the events leading to it are dated at when Apple
/// gives no date (`asOf`: a notification's `signedDate`, a poll's moment), and the change a
/// notification names (``NotifiedChange``; nil for a poll).
public struct Observation: Sendable, Equatable {
    public var snapshot: SubscriptionSnapshot
    public var asOf: Date
    public var named: ChurnEventType?

    public init(snapshot: SubscriptionSnapshot, asOf: Date, named: ChurnEventType? = nil) {
        self.snapshot = snapshot
        self.asOf = asOf
        self.named = named
    }

    /// Its place in the subscription's sequence: when Apple signed the state (what staleness
    /// compares), else `asOf`.
    public var signedDate: Date { snapshot.signedDate ?? asOf }
}

/// The event log as a function of the set of observations (docs/churn-model.md, "Late
/// observations"): ordered by `signedDate`, each observation's events are the difference from
/// the one before it, whatever order the observations arrived in. Pure: no clock, no I/O.
///
/// An observation newer than the stored state is applied as always (its events are the
/// difference from the stored state). One signed before the stored state is placed between its
/// neighbours in the kept sequence: the events between the neighbours are replaced by the events
/// from the earlier neighbour to it and from it to the later one. Events that no longer follow
/// are superseded (marked, never deleted); the stored current state never goes backwards.
public enum ObservationSequence {
    /// How long an observation is kept once its successor was signed (`prune`): Apple's last
    /// retry of a notification comes about 6.5 days (1 + 12 + 24 + 48 + 72 hours) after the first
    /// attempt, so a late notification finds its predecessor still kept.
    public static let horizon: TimeInterval = 7 * 86_400

    /// The events that applying `next` right after `previous` logs: the difference, completed
    /// by the change a notification names, none at or before `establishedAt` (the first sync).
    public static func events(between previous: Observation?, and next: Observation, establishedAt: Date?) -> [ChurnEvent] {
        var events = ChangeDetector.events(previous: previous?.snapshot, current: next.snapshot, asOf: next.asOf).events
        events = NotifiedChange.completing(events, named: next.named, previous: previous?.snapshot, current: next.snapshot,
                                           signedDate: next.asOf)
        if let since = establishedAt { events.removeAll { $0.occurredAt <= since } }
        return events
    }

    /// An event's identity in the log (`churn_events` is unique on it among live events).
    public struct Key: Hashable, Sendable {
        public var type: ChurnEventType
        public var occurredAt: Date

        public init(_ event: ChurnEvent) {
            type = event.type
            occurredAt = event.occurredAt
        }
    }

    /// What placing a late observation changes in the log.
    public struct Placement: Sendable, Equatable {
        /// Events to log (one already logged, live, is not logged again).
        public var log: [ChurnEvent]
        /// Live events derived from the wrong neighbours: they are superseded.
        public var supersede: [ChurnEvent]
        /// The signed date of its successor in the sequence (it is kept until that is
        /// ``horizon`` old).
        public var next: Date
    }

    /// Where `late` (signed before `current`) falls among `kept` (the subscription's earlier
    /// observations still kept, any order) and `current`, and what the log gains and loses.
    /// nil: it cannot be placed (stale, as before): it was signed at the same moment as one
    /// already in the sequence (that moment's observation again), or before every kept one at a
    /// moment whose predecessor may have been pruned (`prunedBefore`: every kept observation
    /// whose successor was signed before it is gone; nil: none ever was).
    public static func place(_ late: Observation, current: Observation, kept: [Observation], establishedAt: Date?,
                             prunedBefore: Date?) -> Placement? {
        let t = late.signedDate
        let sequence = (kept.filter { $0.signedDate < current.signedDate } + [current]).sorted { $0.signedDate < $1.signedDate }
        guard t < current.signedDate, !sequence.contains(where: { $0.signedDate == t }) else { return nil }
        let before = sequence.lastIndex { $0.signedDate < t }
        // A pruned predecessor's successor was signed after `t` and before the cut.
        if before == nil, let cut = prunedBefore, t < cut { return nil }
        let previous = before.map { sequence[$0] }
        let nextIndex = before.map { $0 + 1 } ?? 0
        let next = sequence[nextIndex]
        let old = events(between: previous, and: next, establishedAt: establishedAt)
        let new = events(between: previous, and: late, establishedAt: establishedAt)
            + events(between: late, and: next, establishedAt: establishedAt)
        // What the rest of the sequence logs stands, even where an old event shares its key.
        var standing = Set(new.map(Key.init))
        for i in sequence.indices.dropFirst() where i != nextIndex {
            standing.formUnion(events(between: sequence[i - 1], and: sequence[i], establishedAt: establishedAt).map(Key.init))
        }
        return Placement(log: new, supersede: old.filter { !standing.contains(Key($0)) }, next: next.signedDate)
    }
}
