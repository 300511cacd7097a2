import AppStoreModels
import ChurnModel
import Foundation
import Postgres

/// Which subscriptions a backfill polls. Every selector given must match (they combine with
/// AND); `all` selects every registered subscription.
///
/// Product, group and purchase dates are known only after a first successful poll: a
/// subscription that was never polled has none, so those selectors leave it out. `segments`
/// containing `unknown`, `ids`, `environment` and `all` do select never-polled subscriptions
/// (and the nightly run polls them anyway, as `new`).
public struct BackfillCohort: Sendable, Equatable {
    /// The current product is one of these (`subscriptions.product_id`).
    public var productIds: [String] = []
    /// The subscription group (`subscriptions.subscription_group_id`).
    public var groupId: String?
    /// Original purchase (Apple's `originalPurchaseDate`) at or after this time.
    public var purchasedFrom: Date?
    /// Original purchase before this time (exclusive).
    public var purchasedBefore: Date?
    /// These original transaction ids (ids that are not registered are left out).
    public var ids: [String]?
    /// The current segment is one of these; a subscription without a segment row is `unknown`.
    public var segments: [Segment] = []
    /// The registered environment, Production or Sandbox; a subscription registered without
    /// one (NULL) is in ``configuredEnvironment``.
    public var environment: AppStoreEnvironment?
    /// APPSTORE_ENVIRONMENT: the environment of subscriptions registered without one.
    public var configuredEnvironment = AppStoreEnvironment.production
    /// Every registered subscription.
    public var all = false

    public init() {}

    /// True when at least one selector (or `all`) is given.
    public var hasSelector: Bool {
        all || !productIds.isEmpty || groupId != nil || purchasedFrom != nil || purchasedBefore != nil
            || ids != nil || !segments.isEmpty || environment != nil
    }

    /// What is stored in the run's params to recognise the same cohort when a backfill is
    /// started again: the selectors, with a list of ids reduced to its size and a digest.
    public struct Record: Codable, Equatable, Sendable {
        public var products: [String]?
        public var group: String?
        public var purchasedFrom: String?
        public var purchasedBefore: String?
        public var idsCount: Int?
        public var idsDigest: String?
        public var segments: [String]?
        /// As stored: `Production` or `Sandbox`.
        public var environment: String?
        public var all: Bool?

        enum CodingKeys: String, CodingKey {
            case products, group, segments, environment, all
            case purchasedFrom = "purchased_from", purchasedBefore = "purchased_before"
            case idsCount = "ids_count", idsDigest = "ids_digest"
        }
    }

    public var record: Record {
        Record(products: productIds.isEmpty ? nil : productIds.sorted(), group: groupId,
               purchasedFrom: purchasedFrom.map { $0.ISO8601Format() }, purchasedBefore: purchasedBefore.map { $0.ISO8601Format() },
               idsCount: ids.map { Set($0).count }, idsDigest: ids.map(Self.digest), segments: segments.isEmpty ? nil : segments.map(\.rawValue).sorted(),
               environment: environment?.rawValue, all: all ? true : nil)
    }

    /// One line for logs and messages: `product a,b; purchased 2026-01-01T00:00:00Z..2026-02-01T00:00:00Z`.
    public var summary: String {
        var parts: [String] = []
        if all { parts.append("all") }
        if !productIds.isEmpty { parts.append("product \(productIds.joined(separator: ","))") }
        if let groupId { parts.append("group \(groupId)") }
        if purchasedFrom != nil || purchasedBefore != nil {
            parts.append("purchased \(purchasedFrom?.ISO8601Format() ?? "")..\(purchasedBefore?.ISO8601Format() ?? "")")
        }
        if let ids { parts.append("\(ids.count) ids") }
        if !segments.isEmpty { parts.append("segment \(segments.map(\.rawValue).joined(separator: ","))") }
        if let environment { parts.append("environment \(environment.rawValue)") }
        return parts.isEmpty ? "nothing" : parts.joined(separator: "; ")
    }

    /// FNV-1a over the sorted ids (an identifier for "the same list", not a security hash).
    static func digest(_ ids: [String]) -> String {
        var hash = FNV1a()
        for id in Set(ids).sorted() {
            hash.add(id.utf8)
            hash.add(CollectionOfOne(0x0a))
        }
        return String(hash.value, radix: 16)
    }
}

/// What a backfill run keeps in `runs.params`.
public struct BackfillParams: Codable, Equatable, Sendable {
    public var cohort: BackfillCohort.Record
    /// `--full-history`: every subscription's whole transaction history is read again.
    public var fullHistory: Bool
    public var summary: String?
    public var concurrency: Int?
    public var batchSize: Int?

    public init(cohort: BackfillCohort, fullHistory: Bool, concurrency: Int? = nil, batchSize: Int? = nil) {
        self.cohort = cohort.record
        self.fullHistory = fullHistory
        self.summary = cohort.summary
        self.concurrency = concurrency
        self.batchSize = batchSize
    }

    /// The same work as `other`: same cohort, same history depth.
    public func sameWork(as other: BackfillParams) -> Bool {
        cohort == other.cohort && fullHistory == other.fullHistory
    }

    enum CodingKeys: String, CodingKey {
        case cohort, summary, concurrency
        case fullHistory = "full_history", batchSize = "batch_size"
    }
}

/// What a backfill would poll (`churnwatch backfill --dry-run`).
public struct BackfillCounts: Sendable, Equatable {
    public var total = 0
    /// Never polled successfully (no product, group or purchase date known yet).
    public var neverPolled = 0
    /// Registered with a legacy receipt alone (polled through verifyReceipt once, to learn the id).
    public var receiptOnly = 0
    /// Of the others, how many will probably need a history call without `--full-history`
    /// (never polled, or past the end of their period).
    public var likelyHistory = 0
    /// Ids in the `ids` list that are not registered subscriptions (left out).
    public var idsNotRegistered = 0
}

extension ChurnStore {
    /// The cohort as one statement: rows of `original_transaction_id`, each subscription once.
    static func backfillSelection(app: String, _ c: BackfillCohort) -> PostgresQuery {
        var conditions: [PostgresQuery] = ["s.bundle_id = \(app)"]
        if !c.productIds.isEmpty { conditions.append("s.product_id = ANY(\(c.productIds))") }
        if let group = c.groupId { conditions.append("s.subscription_group_id = \(group)") }
        if let environment = c.environment {
            conditions.append("coalesce(s.environment, \(c.configuredEnvironment.rawValue)) = \(environment.rawValue)")
        }
        if let ids = c.ids { conditions.append("s.original_transaction_id = ANY(\(ids))") }
        if !c.segments.isEmpty {
            conditions.append("coalesce(g.segment, 'unknown') = ANY(\(c.segments.map(\.rawValue)))")
        }
        if c.purchasedFrom != nil || c.purchasedBefore != nil {
            var purchase: [PostgresQuery] = []
            if let from = c.purchasedFrom { purchase.append("t.original_purchase_date >= \(from)") }
            if let before = c.purchasedBefore { purchase.append("t.original_purchase_date < \(before)") }
            conditions.append("""
                s.original_transaction_id IN (SELECT t.original_transaction_id FROM churnwatch.transactions t
                                              WHERE \(Self.joined(purchase, " AND ")))
                """)
        }
        let filter = Self.joined(conditions, " AND ")
        return """
            SELECT s.original_transaction_id
            FROM churnwatch.subscriptions s
            LEFT JOIN churnwatch.subscription_segments g USING (original_transaction_id)
            WHERE \(filter)
            """
    }

    static func joined(_ parts: [PostgresQuery], _ separator: String) -> PostgresQuery {
        var out: PostgresQuery = ""
        for (i, part) in parts.enumerated() {
            if i > 0 { out.append(PostgresQuery(stringLiteral: separator)) }
            out.append(part)
        }
        return out
    }

    /// Counts what a backfill of `cohort` would poll. Writes nothing.
    public func backfillCount(_ cohort: BackfillCohort, asOf: Date) async throws -> BackfillCounts {
        let selection = Self.backfillSelection(app: app, cohort)
        return try await pool.withConnection { db in
            let row = try db.query("""
                SELECT count(*) AS total,
                       count(*) FILTER (WHERE s.last_success_at IS NULL) AS never_polled,
                       count(*) FILTER (WHERE s.receipt_data IS NOT NULL AND s.original_transaction_id LIKE 'receipt:%') AS receipt_only,
                       count(*) FILTER (WHERE s.original_transaction_id NOT LIKE 'receipt:%'
                                          AND (s.last_success_at IS NULL OR s.expires_at <= \(asOf))) AS likely_history
                FROM (\(selection)) AS d
                JOIN churnwatch.subscriptions s USING (original_transaction_id)
                """)[0]
            var counts = BackfillCounts()
            counts.total = try row.decode(Int.self, "total")
            counts.neverPolled = try row.decode(Int.self, "never_polled")
            counts.receiptOnly = try row.decode(Int.self, "receipt_only")
            counts.likelyHistory = try row.decode(Int.self, "likely_history")
            if let ids = cohort.ids {
                counts.idsNotRegistered = try db.query("""
                    SELECT count(DISTINCT i.id) FROM unnest(\(ids)::text[]) AS i(id)
                    WHERE NOT EXISTS (SELECT 1 FROM churnwatch.subscriptions s WHERE s.original_transaction_id = i.id)
                    """)[0].decode(Int.self, at: 0)
            }
            return counts
        }
    }

    /// Creates a backfill run and plans its items (reason `backfill`) in one transaction, on
    /// the same queue as nightly runs. A crash before COMMIT leaves nothing behind.
    public func runCreateBackfill(asOf: Date, cohort: BackfillCohort, params: StoredJSON) async throws -> RunRecord {
        let selection = Self.backfillSelection(app: app, cohort)
        let result = try await pool.withTransaction { db in
            let run = try Self.decodeRun(try db.query("""
                INSERT INTO churnwatch.runs (bundle_id, kind, as_of, status, params)
                VALUES (\(app), 'backfill', \(asOf), 'running', \(params))
                RETURNING \(Self.runColumns)
                """)[0])
            let due = try db.execute("""
                INSERT INTO churnwatch.run_items (run_id, original_transaction_id, reason, priority)
                SELECT \(run.id), original_transaction_id, 'backfill', 5 FROM (\(selection)) AS cohort
                """)
            let counts = try PostgresJSON(encoding: ["due_by_reason": ["backfill": due]])
            try db.execute("UPDATE churnwatch.runs SET due = \(due), counts = \(counts) WHERE id = \(run.id)")
            var planned = run
            planned.due = due
            return planned
        }
        await refreshStatistics(.runItems)
        return result
    }
}
