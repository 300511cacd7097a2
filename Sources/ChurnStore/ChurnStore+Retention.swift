import ChurnModel
import Foundation
import Postgres

/// One cancel-page request as answered, for `churnwatch.retention_message_requests` and the
/// `cancel_page_viewed` event (docs/contracts.md "The cancel page").
public struct RetentionRequestRecord: Sendable, Equatable, Codable {
    public var requestIdentifier: UUID
    public var originalTransactionId: String
    public var productId: String
    public var userLocale: String
    public var environment: String
    public var signedAt: Date
    public var arm: RetentionArm
    public var ruleName: String?
    /// The matched rule's kind (the holdout's too).
    public var ruleKind: RetentionAnswerKind?
    public var answerKind: RetentionAnswerKind?
    public var messageId: String?
    public var segment: Segment?
    public var tenureDays: Int?
    /// The end of the subscriber's period at the view, as stored (nil: not known).
    public var periodEndsAt: Date?
    /// Whether the database's facts were known when choosing (false: it did not answer in time).
    public var factsKnown: Bool
    /// The body answered, as sent (nil: none).
    public var answer: String?
    /// The running experiment on the matched rule, the arm shown (or `holdout`) and the period.
    public var experiment: String?
    public var experimentArm: String?
    public var experimentPeriod: Int?

    public init(requestIdentifier: UUID, originalTransactionId: String, productId: String, userLocale: String, environment: String,
                signedAt: Date, arm: RetentionArm, ruleName: String?, ruleKind: RetentionAnswerKind?, answerKind: RetentionAnswerKind?, messageId: String?,
                segment: Segment?, tenureDays: Int?, periodEndsAt: Date?, factsKnown: Bool, answer: String?,
                experiment: String? = nil, experimentArm: String? = nil, experimentPeriod: Int? = nil) {
        (self.requestIdentifier, self.originalTransactionId, self.productId) = (requestIdentifier, originalTransactionId, productId)
        (self.userLocale, self.environment, self.signedAt, self.arm) = (userLocale, environment, signedAt, arm)
        (self.ruleName, self.ruleKind, self.answerKind, self.messageId) = (ruleName, ruleKind, answerKind, messageId)
        (self.segment, self.tenureDays, self.factsKnown, self.answer) = (segment, tenureDays, factsKnown, answer)
        (self.periodEndsAt, self.experiment, self.experimentArm, self.experimentPeriod) = (periodEndsAt, experiment, experimentArm, experimentPeriod)
    }
}

/// What the database knows of a subscriber when the cancel page asks, and the answer already
/// given to the same request (Apple's retry).
public struct RetentionLookup: Sendable, Equatable {
    public var subscriptionGroupId: String?
    public var segment: Segment?
    public var originalPurchase: Date?
    public var periodEndsAt: Date?
    /// The subscriber's last cancel-page view recorded (nil: none).
    public var lastCancelPageViewAt: Date?
    /// The body answered before to this `requestIdentifier` (nil: not seen, or answered none).
    public var earlierAnswer: String?
    public var seenBefore: Bool
    /// Changes whenever the app's rules, defaults or experiments do (set, replaced or removed).
    public var rulesVersion: String
    /// The subscriber's recorded place in each experiment (by name).
    public var assignments: [String: ExperimentAssignment] = [:]
}

extension ChurnStore {
    /// The rules and defaults of this app, as `serve` caches them, with their version (as
    /// `retentionLookup` gives it).
    public func retentionRules() async throws -> (rules: [RetentionRule], defaults: [RetentionDefault]) {
        let (rules, defaults, _) = try await retentionRulesVersioned()
        return (rules, defaults)
    }

    public func retentionRulesVersioned() async throws -> (rules: [RetentionRule], defaults: [RetentionDefault], version: String) {
        try await pool.withTransaction { db in
            try db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            let version = try db.query("SELECT \(Self.retentionVersion(app)) AS v")[0].decode(String.self, "v")
            let rules = try db.query("""
                SELECT name, priority, product_id, subscription_group_id, segments, min_tenure_days, max_tenure_days, locales,
                       viewed_before, kind, message_id::text AS message_id, alternate_product_id, billing_plan_type, offer_id, holdout
                FROM churnwatch.retention_rules WHERE bundle_id = \(app) ORDER BY priority, name
                """).compactMap { row -> RetentionRule? in
                func blank(_ s: String) -> String? { s.isEmpty ? nil : s }
                // The table's CHECK allows only known kinds.
                guard let kind = RetentionAnswerKind(rawValue: try row.decode(String.self, "kind")) else { return nil }
                return RetentionRule(
                    name: try row.decode(String.self, "name"), priority: try row.decode(Int.self, "priority"),
                    productId: blank(try row.decode(String.self, "product_id")),
                    subscriptionGroupId: blank(try row.decode(String.self, "subscription_group_id")),
                    segments: try row.decode([String].self, "segments").compactMap(Segment.init(rawValue:)),
                    minTenureDays: try row.decode(Int?.self, "min_tenure_days"), maxTenureDays: try row.decode(Int?.self, "max_tenure_days"),
                    locales: try row.decode([String].self, "locales"),
                    viewedBefore: ViewedBefore(try row.decode(String.self, "viewed_before")) ?? .any, kind: kind, messageId: try row.decode(String.self, "message_id"),
                    alternateProductId: try row.decode(String?.self, "alternate_product_id"),
                    billingPlanType: try row.decode(String?.self, "billing_plan_type"), offerId: try row.decode(String?.self, "offer_id"),
                    holdout: try row.decode(Double.self, "holdout"))
            }
            let defaults = try db.query("""
                SELECT product_id, locale, message_id::text AS message_id FROM churnwatch.retention_defaults
                WHERE bundle_id = \(app) ORDER BY product_id, locale
                """).map { row in
                let p = try row.decode(String.self, "product_id"), l = try row.decode(String.self, "locale")
                return RetentionDefault(productId: p.isEmpty ? nil : p, locale: l.isEmpty ? nil : l, messageId: try row.decode(String.self, "message_id"))
            }
            return (rules, defaults, version)
        }
    }

    /// Creates or replaces the rule of that name.
    public func retentionRuleSet(_ r: RetentionRule) async throws {
        _ = try await pool.withConnection { db in
            try db.execute("""
                INSERT INTO churnwatch.retention_rules (bundle_id, name, priority, product_id, subscription_group_id, segments,
                    min_tenure_days, max_tenure_days, locales, viewed_before, kind, message_id, alternate_product_id, billing_plan_type, offer_id, holdout)
                VALUES (\(app), \(r.name), \(r.priority), \(r.productId ?? ""), \(r.subscriptionGroupId ?? ""), \(r.segments.map(\.rawValue))::text[],
                    \(r.minTenureDays), \(r.maxTenureDays), \(r.locales)::text[], \(r.viewedBefore.description), \(r.kind.rawValue), \(r.messageId)::uuid,
                    \(r.alternateProductId), \(r.billingPlanType), \(r.offerId), \(r.holdout))
                ON CONFLICT (bundle_id, name) DO UPDATE SET priority = excluded.priority, product_id = excluded.product_id,
                    subscription_group_id = excluded.subscription_group_id, segments = excluded.segments,
                    min_tenure_days = excluded.min_tenure_days, max_tenure_days = excluded.max_tenure_days, locales = excluded.locales,
                    viewed_before = excluded.viewed_before,
                    kind = excluded.kind, message_id = excluded.message_id, alternate_product_id = excluded.alternate_product_id,
                    billing_plan_type = excluded.billing_plan_type, offer_id = excluded.offer_id, holdout = excluded.holdout,
                    updated_at = now()
                """)
        }
    }

    /// Removes the rule of that name; returns how many were removed (0 or 1).
    public func retentionRuleRemove(_ name: String) async throws -> Int {
        try await pool.withTransaction { db in
            if let e = try db.query("""
                SELECT name FROM churnwatch.experiments WHERE bundle_id = \(app) AND rule_name = \(name) AND state = 'running' FOR SHARE
                """).first {
                throw ExperimentError("rule \(name) has a running experiment (\(try e.decode(String.self, "name"))): stop it first (`churnwatch experiments stop`)")
            }
            return try db.execute("DELETE FROM churnwatch.retention_rules WHERE bundle_id = \(app) AND name = \(name)")
        }
    }

    /// Sets the default message of a product and locale (nil: every one).
    public func retentionDefaultSet(_ d: RetentionDefault) async throws {
        _ = try await pool.withConnection { db in
            try db.execute("""
                INSERT INTO churnwatch.retention_defaults (bundle_id, product_id, locale, message_id)
                VALUES (\(app), \(d.productId ?? ""), \(d.locale ?? ""), \(d.messageId)::uuid)
                ON CONFLICT (bundle_id, product_id, locale) DO UPDATE SET message_id = excluded.message_id, updated_at = now()
                """)
        }
    }

    /// Removes the default of a product and locale; returns how many were removed (0 or 1).
    public func retentionDefaultRemove(productId: String?, locale: String?) async throws -> Int {
        try await pool.withConnection { db in
            try db.execute("""
                DELETE FROM churnwatch.retention_defaults
                WHERE bundle_id = \(app) AND product_id = \(productId ?? "") AND locale = \(locale ?? "")
                """)
        }
    }

    /// The subscriber's facts and the answer already given to `requestIdentifier`, in one round trip.
    public func retentionLookup(originalTransactionId: String, requestIdentifier: UUID) async throws -> RetentionLookup {
        try await pool.withConnection { db in
            let row = try db.query("""
                SELECT s.subscription_group_id, g.segment, (s.snapshot->>'original_purchase_date_ms')::bigint AS opd, s.expires_at,
                       g.last_cancel_page_view_at,
                       r.request_identifier IS NOT NULL AS seen, r.answer::text AS answer,
                       \(Self.retentionVersion(app)) AS rules_version,
                       (SELECT jsonb_object_agg(a.experiment, jsonb_build_object('arm', a.arm, 'period', a.period))
                        FROM churnwatch.experiment_assignments a
                        WHERE a.bundle_id = \(app) AND a.original_transaction_id = \(originalTransactionId))::text AS assignments
                FROM (SELECT 1) AS one
                LEFT JOIN churnwatch.subscriptions s ON s.original_transaction_id = \(originalTransactionId) AND s.bundle_id = \(app)
                LEFT JOIN churnwatch.subscription_segments g ON g.original_transaction_id = \(originalTransactionId) AND g.bundle_id = \(app)
                LEFT JOIN churnwatch.retention_message_requests r ON r.request_identifier = \(requestIdentifier)
                """)[0]
            return RetentionLookup(
                subscriptionGroupId: try row.decode(String?.self, "subscription_group_id"),
                segment: try row.decode(String?.self, "segment").flatMap(Segment.init(rawValue:)),
                originalPurchase: try row.decode(Int64?.self, "opd").map { Date(timeIntervalSince1970: Double($0) / 1000) },
                periodEndsAt: try row.decode(Date?.self, "expires_at"),
                lastCancelPageViewAt: try row.decode(Date?.self, "last_cancel_page_view_at"),
                earlierAnswer: try row.decode(String?.self, "answer"), seenBefore: try row.decode(Bool.self, "seen"),
                rulesVersion: try row.decode(String.self, "rules_version"),
                assignments: try row.decode(String?.self, "assignments").map {
                    try JSONDecoder().decode([String: ExperimentAssignment].self, from: Data($0.utf8))
                } ?? [:])
        }
    }

    /// Records answered requests, logs each new one as a `cancel_page_viewed` event and sets the
    /// subscriber's `last_cancel_page_view_at`, in one transaction. A request already recorded (by `requestIdentifier`) changes nothing.
    /// Returns how many were new.
    @discardableResult
    public func retentionRecord(_ records: [RetentionRequestRecord]) async throws -> Int {
        guard !records.isEmpty else { return 0 }
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.dateEncodingStrategy = .millisecondsSince1970
        let json = String(decoding: try encoder.encode(records), as: UTF8.self)
        return try await pool.withConnection { db in
            try db.query("""
                WITH r AS (
                    SELECT * FROM jsonb_to_recordset(\(json)::jsonb) AS x(
                        request_identifier uuid, original_transaction_id text, product_id text, user_locale text, environment text,
                        signed_at double precision, arm text, rule_name text, rule_kind text, answer_kind text, message_id uuid, segment text,
                        tenure_days integer, period_ends_at double precision, facts_known boolean, answer text,
                        experiment text, experiment_arm text, experiment_period integer)
                ), stored AS (
                    INSERT INTO churnwatch.retention_message_requests (request_identifier, bundle_id, original_transaction_id, product_id,
                        user_locale, environment, signed_at, arm, rule_name, rule_kind, answer_kind, message_id, segment, tenure_days, period_ends_at,
                        facts_known, answer, experiment, experiment_arm, experiment_period)
                    SELECT request_identifier, \(app), original_transaction_id, product_id, user_locale, environment,
                           to_timestamp(signed_at / 1000), arm, rule_name, rule_kind, answer_kind, message_id, segment, tenure_days,
                           -- Chosen without the database's facts: the period end as stored when the record is
                           -- written (moments after the view), so the outcome's horizon is still the next renewal.
                           coalesce(to_timestamp(period_ends_at / 1000),
                                    (SELECT s.expires_at FROM churnwatch.subscriptions s
                                     WHERE s.original_transaction_id = r.original_transaction_id AND s.bundle_id = \(app))),
                           facts_known,
                           answer::jsonb, experiment, experiment_arm, experiment_period
                    FROM r
                    ON CONFLICT (request_identifier) DO NOTHING
                    RETURNING *
                ), logged AS (
                    INSERT INTO churnwatch.churn_events (original_transaction_id, event, occurred_at, detected_at, details, bundle_id)
                    SELECT original_transaction_id, 'cancel_page_viewed', signed_at, now(),
                           jsonb_strip_nulls(jsonb_build_object('request_identifier', request_identifier, 'arm', arm, 'rule', rule_name,
                               'answer_kind', answer_kind, 'message_id', message_id, 'product_id', product_id,
                               'user_locale', user_locale, 'occurred_at_basis', 'signedDate')),
                           \(app)
                    FROM stored
                    ON CONFLICT DO NOTHING
                ), assigned AS (
                    -- The first exposure fixes the subscriber's arm (sticky): a later one changes nothing.
                    INSERT INTO churnwatch.experiment_assignments (bundle_id, experiment, original_transaction_id, arm, period, assigned_at)
                    SELECT DISTINCT ON (original_transaction_id, experiment) \(app), experiment, original_transaction_id, experiment_arm,
                           experiment_period, signed_at
                    FROM stored st
                    WHERE experiment IS NOT NULL AND experiment_arm IS NOT NULL AND experiment_period IS NOT NULL
                      AND EXISTS (SELECT 1 FROM churnwatch.experiments e WHERE e.bundle_id = \(app) AND e.name = st.experiment)
                    ORDER BY original_transaction_id, experiment, signed_at
                    ON CONFLICT DO NOTHING
                ), viewed AS (
                    UPDATE churnwatch.subscription_segments AS g
                    SET last_cancel_page_view_at = greatest(g.last_cancel_page_view_at, v.at)
                    FROM (SELECT original_transaction_id, max(signed_at) AS at FROM stored GROUP BY 1) AS v
                    WHERE g.original_transaction_id = v.original_transaction_id AND g.bundle_id = \(app)
                )
                SELECT count(*) AS n FROM stored
                """)[0].decode(Int.self, "n")
        }
    }
}
