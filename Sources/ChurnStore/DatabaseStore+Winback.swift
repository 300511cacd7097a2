import ChurnModel
import Foundation
import Postgres

/// The win-back queue's consumers: entry ids are global, and a consumer drains every app (or
/// those it names).
extension DatabaseStore {
    /// Claims up to `limit` entries of `campaign` for `consumer` until `asOf + lease`.
    ///
    /// Claimable: pending, or claimed with a lapsed lease (a consumer that crashed), with
    /// `not_before <= asOf` and no `expires_at` at or before `asOf`; oldest `not_before` first.
    /// First, such entries past `expires_at` become `expired`. `FOR UPDATE SKIP LOCKED` in both
    /// steps: concurrent consumers never get the same entry and never wait on each other.
    /// `claimed_at` is `asOf` (the caller's clock, like every time here). `apps`: only entries of
    /// these apps (bundle ids); empty, of every app.
    public func winbackClaim(campaign: WinbackCampaign, consumer: String, limit: Int, lease: TimeInterval, asOf: Date,
                             apps: [String] = []) async throws -> WinbackClaim {
        let ofApps: PostgresQuery = "(cardinality(\(apps)::text[]) = 0 OR bundle_id = ANY(\(apps)::text[]))"
        return try await pool.withTransaction { db in
            let expired = try db.execute("""
                UPDATE churnwatch.winback_queue w SET status = 'expired', updated_at = now()
                FROM (
                    SELECT id FROM churnwatch.winback_queue
                    WHERE campaign = \(campaign.rawValue) AND expires_at <= \(asOf) AND \(ofApps)
                      AND (status = 'pending' OR (status = 'claimed' AND claim_expires_at < \(asOf)))
                    FOR UPDATE SKIP LOCKED
                ) AS gone
                WHERE w.id = gone.id
                """)
            let rows = try db.query("""
                WITH pick AS (
                    SELECT id FROM churnwatch.winback_queue
                    WHERE campaign = \(campaign.rawValue)
                      AND (status = 'pending' OR (status = 'claimed' AND claim_expires_at < \(asOf)))
                      AND not_before <= \(asOf)
                      AND (expires_at IS NULL OR expires_at > \(asOf)) AND \(ofApps)
                    ORDER BY not_before, id
                    LIMIT \(limit)
                    FOR UPDATE SKIP LOCKED
                ), claimed AS (
                    UPDATE churnwatch.winback_queue w
                    SET status = 'claimed', claimed_by = \(consumer), claimed_at = \(asOf),
                        claim_expires_at = \(asOf) + make_interval(secs => \(lease)), updated_at = now()
                    FROM pick WHERE w.id = pick.id
                    RETURNING w.*
                )
                SELECT \(ChurnStore.winbackColumns) FROM claimed ORDER BY not_before, id
                """)
            return WinbackClaim(entries: try rows.map(ChurnStore.decodeWinbackEntry), expired: expired)
        }
    }

    /// Marks claimed entries `done`. With `consumer`, only entries it holds. The claim's lease
    /// is not checked: a message sent late is still sent, unless another consumer claimed the
    /// entry since (then the ack names it). Entries already done count as `alreadyDone`.
    public func winbackAck(ids: [Int64], consumer: String?) async throws -> WinbackSettlement {
        try await settle(ids: ids, consumer: consumer, change: """
            status = 'done', updated_at = now()
            """, acceptDone: true)
    }

    /// Gives claimed entries back: `pending` again, claim fields cleared. With `consumer`,
    /// only entries it holds.
    public func winbackRelease(ids: [Int64], consumer: String?) async throws -> WinbackSettlement {
        try await settle(ids: ids, consumer: consumer, change: """
            status = 'pending', claimed_by = NULL, claimed_at = NULL, claim_expires_at = NULL, updated_at = now()
            """, acceptDone: false)
    }

    private func settle(ids: [Int64], consumer: String?, change: PostgresQuery, acceptDone: Bool) async throws -> WinbackSettlement {
        let unique = Array(Set(ids)).sorted()
        guard !unique.isEmpty else { return WinbackSettlement() }
        return try await pool.withTransaction { db in
            var result = WinbackSettlement()
            result.settled = try db.query("""
                UPDATE churnwatch.winback_queue SET \(change)
                WHERE id = ANY(\(unique)) AND status = 'claimed'
                  AND (\(consumer)::text IS NULL OR claimed_by = \(consumer)::text)
                RETURNING id
                """).map { try $0.decode(Int64.self, "id") }.sorted()
            let settled = Set(result.settled)
            let rest = unique.filter { !settled.contains($0) }
            guard !rest.isEmpty else { return result }
            var found: [Int64: (WinbackQueueEntry.Status, String?)] = [:]
            for row in try db.query("SELECT id, status, claimed_by FROM churnwatch.winback_queue WHERE id = ANY(\(rest))") {
                guard let s = WinbackQueueEntry.Status(rawValue: try row.decode(String.self, "status")) else { continue }
                found[try row.decode(Int64.self, "id")] = (s, try row.decode(String?.self, "claimed_by"))
            }
            for id in rest {
                guard let (status, holder) = found[id] else {
                    result.refused.append(.init(id: id, why: .unknown))
                    continue
                }
                if status == .claimed, let holder {
                    result.refused.append(.init(id: id, why: .claimedByOther(holder)))
                } else if acceptDone, status == .done, consumer == nil || holder == consumer {
                    result.alreadyDone.append(id)
                } else {
                    result.refused.append(.init(id: id, why: .notClaimed(status)))
                }
            }
            return result
        }
    }

    /// Entries for operators, oldest first: optionally one campaign, one status, some apps.
    public func winbackList(campaign: WinbackCampaign?, status: WinbackQueueEntry.Status?, limit: Int,
                            apps: [String] = []) async throws -> [WinbackQueueEntry] {
        try await pool.withConnection { db in
            try db.query("""
                SELECT \(ChurnStore.winbackColumns) FROM churnwatch.winback_queue
                WHERE (\(campaign?.rawValue)::text IS NULL OR campaign = \(campaign?.rawValue)::text)
                  AND (\(status?.rawValue)::text IS NULL OR status = \(status?.rawValue)::text)
                  AND (cardinality(\(apps)::text[]) = 0 OR bundle_id = ANY(\(apps)::text[]))
                ORDER BY not_before, id
                LIMIT \(limit)
                """).map(ChurnStore.decodeWinbackEntry)
        }
    }

    /// Whether any offer is configured for `campaign` in one of `apps` (bundle ids; empty: any
    /// app): claiming it then needs the signing key.
    public func offersConfigured(campaign: WinbackCampaign, apps: [String]) async throws -> Bool {
        return try await pool.withConnection { db in
            try db.query("""
                SELECT EXISTS (SELECT 1 FROM churnwatch.offers WHERE campaign = \(campaign.rawValue)
                               AND (cardinality(\(apps)::text[]) = 0 OR bundle_id = ANY(\(apps)::text[])))
                """)[0].decode(Bool.self, at: 0)
        }
    }
}
