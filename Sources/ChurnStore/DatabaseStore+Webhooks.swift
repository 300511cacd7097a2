import ChurnModel
import Foundation
import Postgres

/// A webhook endpoint as stored (docs/contracts.md "Webhooks"); its secret is read apart.
public struct WebhookEndpoint: Sendable, Equatable {
    public var name: String
    public var bundleId: String
    public var url: String
    /// Empty: every type.
    public var types: [String]
    /// The campaigns it consumes (winback.ready).
    public var campaigns: [String]
    public var allowHTTP: Bool
    public var allowPrivate: Bool
    public var maxInFlight: Int
    public var enabled: Bool
    public var disabledReason: String?
    public var consecutiveFailures: Int
    public var failingSince: Date?
    public var pausedUntil: Date?

    public init(name: String, bundleId: String, url: String, types: [String] = [], campaigns: [String] = [],
                allowHTTP: Bool = false, allowPrivate: Bool = false, maxInFlight: Int = 8) {
        (self.name, self.bundleId, self.url, self.types, self.campaigns) = (name, bundleId, url, types, campaigns)
        (self.allowHTTP, self.allowPrivate, self.maxInFlight) = (allowHTTP, allowPrivate, maxInFlight)
        (enabled, disabledReason, consecutiveFailures, failingSince, pausedUntil) = (true, nil, 0, nil, nil)
    }
}

/// The secrets an endpoint's messages are signed with: the current one, and during a rotation
/// the previous one until its time is up.
public struct WebhookSecrets: Sendable, Equatable {
    public var current: String
    public var previous: String?
    public var previousUntil: Date?
    public init(current: String, previous: String? = nil, previousUntil: Date? = nil) {
        (self.current, self.previous, self.previousUntil) = (current, previous, previousUntil)
    }
}

/// One line for a webhook command that cannot be done (exit 78).
public struct WebhookError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension DatabaseStore {
    static let endpointColumns: PostgresQuery = """
        e.name, e.bundle_id, e.url, e.types, e.allow_http, e.allow_private, e.max_in_flight, e.enabled, e.disabled_reason,
        e.consecutive_failures, e.failing_since, e.paused_until,
        ARRAY(SELECT campaign FROM churnwatch.webhook_consumers c WHERE c.endpoint = e.name ORDER BY campaign) AS campaigns
        """

    static func decodeEndpoint(_ row: PostgresRow) throws -> WebhookEndpoint {
        var e = WebhookEndpoint(
            name: try row.decode(String.self, "name"), bundleId: try row.decode(String.self, "bundle_id"),
            url: try row.decode(String.self, "url"), types: try row.decode([String].self, "types"),
            campaigns: try row.decode([String].self, "campaigns"), allowHTTP: try row.decode(Bool.self, "allow_http"),
            allowPrivate: try row.decode(Bool.self, "allow_private"), maxInFlight: try row.decode(Int.self, "max_in_flight"))
        e.enabled = try row.decode(Bool.self, "enabled")
        e.disabledReason = try row.decode(String?.self, "disabled_reason")
        e.consecutiveFailures = try row.decode(Int.self, "consecutive_failures")
        e.failingSince = try row.decode(Date?.self, "failing_since")
        e.pausedUntil = try row.decode(Date?.self, "paused_until")
        return e
    }

    /// The endpoints, by name; `enabledOnly` for a sender.
    public func webhookEndpoints(enabledOnly: Bool = false) async throws -> [WebhookEndpoint] {
        try await pool.withConnection { db in
            try db.query("""
                SELECT \(Self.endpointColumns) FROM churnwatch.webhook_endpoints e
                WHERE e.enabled OR NOT \(enabledOnly) ORDER BY e.name
                """).map(Self.decodeEndpoint)
        }
    }

    /// Adds an endpoint with its first secret; or (`replace`) changes one's URL, types,
    /// campaigns and allowances, keeping its secret and its deliveries. A campaign another
    /// endpoint of the app consumes is refused, naming it.
    public func webhookSave(_ endpoint: WebhookEndpoint, secret: String?, replace: Bool) async throws {
        try await pool.withTransaction { db in
            let exists = try db.query("SELECT 1 FROM churnwatch.webhook_endpoints WHERE name = \(endpoint.name) FOR UPDATE").count == 1
            if exists != replace {
                throw WebhookError(exists
                    ? "endpoint \(endpoint.name) exists already: change it with `churnwatch webhooks set \(endpoint.name)`"
                    : "no endpoint \(endpoint.name) (`churnwatch webhooks list` shows them)")
            }
            try db.execute("""
                INSERT INTO churnwatch.webhook_endpoints (name, bundle_id, url, types, allow_http, allow_private, max_in_flight)
                VALUES (\(endpoint.name), \(endpoint.bundleId), \(endpoint.url), \(endpoint.types), \(endpoint.allowHTTP),
                        \(endpoint.allowPrivate), \(endpoint.maxInFlight))
                ON CONFLICT (name) DO UPDATE SET url = excluded.url, types = excluded.types, allow_http = excluded.allow_http,
                    allow_private = excluded.allow_private, max_in_flight = excluded.max_in_flight, updated_at = now()
                """)
            if let secret {
                try db.execute("INSERT INTO churnwatch.webhook_secrets (endpoint, secret) VALUES (\(endpoint.name), \(secret))")
            }
            try Self.setConsumers(db, endpoint)
        }
    }

    private static func setConsumers(_ db: PostgresConnection, _ endpoint: WebhookEndpoint) throws {
        let taken = try db.query("""
            SELECT campaign, endpoint FROM churnwatch.webhook_consumers
            WHERE bundle_id = \(endpoint.bundleId) AND campaign = ANY(\(endpoint.campaigns)) AND endpoint <> \(endpoint.name)
            """)
        if let row = taken.first {
            let campaign = try row.decode(String.self, "campaign"), other = try row.decode(String.self, "endpoint")
            throw WebhookError("campaign \(campaign) of \(endpoint.bundleId) is consumed by endpoint \(other) already (one consumer per campaign): remove it there first (`churnwatch webhooks set \(other) --campaign ...`)")
        }
        try db.execute("DELETE FROM churnwatch.webhook_consumers WHERE endpoint = \(endpoint.name)")
        try db.execute("""
            INSERT INTO churnwatch.webhook_consumers (bundle_id, campaign, endpoint)
            SELECT \(endpoint.bundleId), c, \(endpoint.name) FROM unnest(\(endpoint.campaigns)::text[]) AS c
            """)
    }

    /// The endpoint consuming `campaign` in any of `apps` (empty: any app), for `winback claim`
    /// to refuse: one consumer per campaign.
    public func webhookConsumer(campaign: String, apps: [String]) async throws -> String? {
        try await pool.withConnection { db in
            try db.query("""
                SELECT endpoint FROM churnwatch.webhook_consumers WHERE campaign = \(campaign)
                  AND (cardinality(\(apps)::text[]) = 0 OR bundle_id = ANY(\(apps)::text[])) ORDER BY endpoint LIMIT 1
                """).first?.decode(String.self, at: 0)
        }
    }

    /// Removes an endpoint with its secret and deliveries; its messages stay (other endpoints',
    /// and a replay's). Win-back entries it held go back to pending.
    public func webhookRemove(_ name: String) async throws {
        try await pool.withTransaction { db in
            guard try db.execute("DELETE FROM churnwatch.webhook_endpoints WHERE name = \(name)") == 1 else {
                throw WebhookError("no endpoint \(name) (`churnwatch webhooks list` shows them)")
            }
            try db.execute("""
                UPDATE churnwatch.winback_queue SET status = 'pending', claimed_by = NULL, claimed_at = NULL, claim_expires_at = NULL,
                    updated_at = now()
                WHERE status = 'claimed' AND claimed_by = \("webhook:" + name)
                """)
        }
    }

    /// Enables or disables an endpoint. Disabled, it gets no new deliveries and its pending ones
    /// wait; enabled again, those go on (`webhooks replay` covers what was written meanwhile).
    public func webhookEnable(_ name: String, enabled: Bool, reason: String?) async throws {
        try await pool.withConnection { db in
            guard try db.execute("""
                UPDATE churnwatch.webhook_endpoints SET enabled = \(enabled), disabled_reason = \(enabled ? nil : reason),
                    consecutive_failures = 0, failing_since = NULL, paused_until = NULL, updated_at = now()
                WHERE name = \(name)
                """) == 1 else { throw WebhookError("no endpoint \(name) (`churnwatch webhooks list` shows them)") }
        }
    }

    /// Replaces the secret; the old one keeps signing beside it until `keepOldUntil`.
    public func webhookRotate(_ name: String, secret: String, keepOldUntil: Date) async throws {
        try await pool.withConnection { db in
            guard try db.execute("""
                UPDATE churnwatch.webhook_secrets SET previous = secret, previous_until = \(keepOldUntil), secret = \(secret),
                    rotated_at = now()
                WHERE endpoint = \(name)
                """) == 1 else { throw WebhookError("no endpoint \(name) (`churnwatch webhooks list` shows them)") }
        }
    }

    /// An endpoint's secrets now (the previous one only while it still signs).
    public func webhookSecrets(_ name: String) async throws -> WebhookSecrets? {
        try await pool.withConnection { db in
            try db.query("""
                SELECT secret, CASE WHEN previous_until > now() THEN previous END AS previous,
                       CASE WHEN previous_until > now() THEN previous_until END AS previous_until
                FROM churnwatch.webhook_secrets WHERE endpoint = \(name)
                """).first.map { row in
                WebhookSecrets(current: try row.decode(String.self, "secret"), previous: try row.decode(String?.self, "previous"),
                               previousUntil: try row.decode(Date?.self, "previous_until"))
            }
        }
    }

    /// This database's prefix of message ids.
    public func webhookInstance() async throws -> String {
        try await pool.withConnection { db in
            try db.query("SELECT instance FROM churnwatch.webhook_instance").first?.decode(String.self, at: 0) ?? "00000000"
        }
    }
}
