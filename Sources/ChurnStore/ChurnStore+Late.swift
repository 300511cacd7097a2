import ChurnModel
import Foundation
import Postgres

/// What placing a feed commit's late notifications did.
struct LateCounts {
    var events = 0
    var superseded = 0
    /// The notifications that could not be placed: their rows say `stale`. (A poll's answer
    /// that cannot be placed changes nothing, as before.)
    var unplaced: Set<UUID> = []
}

extension ChurnStore {
    /// Places each late notification of a feed commit (``FeedBatch/late``) in its subscription's
    /// sequence, inside the commit's transaction: the subscription's row is locked (another
    /// writer of it waits), its current state and kept observations are read, and
    /// ``ObservationSequence/place(_:current:kept:establishedAt:prunedBefore:)`` says what the
    /// log gains (new rows) and loses (live rows marked superseded, never deleted). The current
    /// state is not touched: it never goes backwards. Idempotent: placed again, a late
    /// observation finds itself kept (the same moment) and changes nothing.
    static func lateObservationsPlace(_ db: PostgresConnection, app: String, _ late: [FeedBatch.Late], runId: Int64?,
                                      detectedAt: Date) throws -> LateCounts {
        var counts = LateCounts()
        let decoder = JSONDecoder()
        let encoder = JSONEncoder()
        for l in late.sorted(by: { $0.originalTransactionId < $1.originalTransactionId }) {
            let id = l.originalTransactionId
            guard let row = try db.query("""
                SELECT snapshot, coalesce(observed_as_of, signed_date) AS as_of, observed_named AS named, established_at
                FROM churnwatch.subscriptions WHERE original_transaction_id = \(id) AND snapshot IS NOT NULL FOR UPDATE
                """).first else {
                if let uuid = l.uuid { counts.unplaced.insert(uuid) }
                continue
            }
            guard let current = try observation(row, decoder) else {
                if let uuid = l.uuid { counts.unplaced.insert(uuid) }
                continue
            }
            // Kept rows first, then the prune cut: a prune that removed rows read here has
            // recorded its cut before it deleted them.
            let kept = try keptObservations(db, id, current: current, decoder)
            let cut = try db.query("SELECT observations_pruned_before FROM churnwatch.apps WHERE bundle_id = \(app)")
                .first.flatMap { try $0.decode(Date?.self, at: 0) }
            guard let placement = ObservationSequence.place(l.observation, current: current, kept: kept,
                                                            establishedAt: try row.decode(Date?.self, "established_at"),
                                                            prunedBefore: cut) else {
                if let uuid = l.uuid { counts.unplaced.insert(uuid) }
                continue
            }
            counts.superseded += try eventsSupersede(db, id, placement.supersede, at: detectedAt)
            counts.events += try churnEventsInsert(db, app: app, placement.log.reduce(into: EventColumns()) { $0.append(id, $1) },
                                                   runId: runId, detectedAt: detectedAt)
            let o = l.observation
            try db.execute("""
                INSERT INTO churnwatch.observations (original_transaction_id, signed_date, as_of, named, next_signed_date, snapshot, bundle_id)
                VALUES (\(id), \(o.signedDate), \(o.asOf), \(o.named?.rawValue), \(placement.next),
                        \(PostgresJSON(data: try encoder.encode(o.snapshot)))::jsonb, \(app))
                ON CONFLICT DO NOTHING
                """)
        }
        return counts
    }

    /// Marks the live events of subscription `id` with these keys superseded. Returns how many.
    static func eventsSupersede(_ db: PostgresConnection, _ id: String, _ events: [ChurnEvent], at: Date) throws -> Int {
        guard !events.isEmpty else { return 0 }
        return try db.execute("""
            UPDATE churnwatch.churn_events AS e SET superseded_at = \(at)
            FROM unnest(\(events.map(\.type.rawValue))::text[], \(events.map(\.occurredAt))::timestamptz[]) AS u(event, occurred_at)
            WHERE e.original_transaction_id = \(id) AND e.event = u.event AND e.occurred_at = u.occurred_at
              AND e.superseded_at IS NULL
            """)
    }

    /// The subscription's kept observations. A row without a snapshot has its successor's state
    /// (the observation signed at its `next_signed_date`: a kept row or `current`, which
    /// outlive it), at its own moment; one whose successor cannot be found is left out.
    static func keptObservations(_ db: PostgresConnection, _ id: String, current: Observation,
                                 _ decoder: JSONDecoder) throws -> [Observation] {
        var rows: [(signed: Date, next: Date, asOf: Date, named: ChurnEventType?, snapshot: SubscriptionSnapshot?)] = []
        for row in try db.query("""
            SELECT signed_date, next_signed_date, as_of, named, snapshot FROM churnwatch.observations
            WHERE original_transaction_id = \(id) ORDER BY signed_date DESC
            """) {
            rows.append((try row.decode(Date.self, "signed_date"), try row.decode(Date.self, "next_signed_date"),
                         try row.decode(Date.self, "as_of"), try row.decode(String?.self, "named").flatMap(ChurnEventType.init(rawValue:)),
                         try row.decode(PostgresJSON?.self, "snapshot").map { try decoder.decode(SubscriptionSnapshot.self, from: $0.data) }))
        }
        // Newest first: a successor is resolved before the rows that point to it.
        var states: [Date: SubscriptionSnapshot] = [current.signedDate: current.snapshot]
        var kept: [Observation] = []
        for r in rows {
            guard var snapshot = r.snapshot ?? states[r.next] else { continue }
            snapshot.signedDate = r.signed
            states[r.signed] = snapshot
            kept.append(Observation(snapshot: snapshot, asOf: r.asOf, named: r.named))
        }
        return kept
    }

    /// The current state's observation (nil: no signed state).
    private static func observation(_ row: PostgresRow, _ decoder: JSONDecoder) throws -> Observation? {
        guard let json = try row.decode(PostgresJSON?.self, "snapshot") else { return nil }
        return Observation(snapshot: try decoder.decode(SubscriptionSnapshot.self, from: json.data),
                           asOf: try row.decode(Date.self, "as_of"),
                           named: try row.decode(String?.self, "named").flatMap(ChurnEventType.init(rawValue:)))
    }
}
