import Foundation
import Postgres
import Testing

/// The change feed (Apple's notification history) against the simulator's ground truth, night
/// after night, with `churnwatch run` as operators run it.
@Suite("change feed against the simulator", .serialized)
struct NotificationFeedEndToEndTests {
    typealias E2E = NightlyRunEndToEndTests
    static let day = E2E.day
    static let feedOn = ["CHURNWATCH_NOTIFICATIONS": "on"]

    struct NotifiedEvent: Decodable {
        var original_transaction_id: String
        var event: String
        var occurred_at: String
        var notified: Bool?
    }

    static func events(_ sim: SimulatorProcess, to: Date) throws -> [NotifiedEvent] {
        struct Body: Decodable { var events: [NotifiedEvent] }
        let from = E2E.iso(E2E.start.addingTimeInterval(-800 * day))
        return try JSONDecoder().decode(Body.self, from: try sim.request("GET", "/_sim/events?from=\(from)&to=\(E2E.iso(to))")).events
    }

    @Test("12 nights with the feed and windows that select nothing by date: every subscription whose changes were notified is in its true state each night; a change Apple never notified is caught by the safety net; events are true; the first sync writes none")
    func nightsWithTheFeed() async throws {
        let world = try await E2E.World.make(subscribers: 1500, seed: 13, simFlags: ["--unnotified-share", "0.05"], populationLead: 45 * Self.day)
        defer { world.close() }
        let db = try world.connect()
        let env = world.env.merging(Self.feedOn) { _, new in new }
        var mismatches: [String] = []
        var excusedTotal = 0, checked = 0
        for night in 0..<12 {
            let asOf = E2E.start.addingTimeInterval(Double(night) * Self.day)
            try world.sim.setClock(E2E.iso(asOf))
            let r = try await CLIRunner.run(["run", "--as-of", E2E.iso(asOf), "--start-window", "0s", "--end-window", "0s",
                                             "--lapsed-window", "0s", "--status-rate", "5000", "--history-rate", "5000"], environment: env)
            #expect(r.status == 0, "night \(night): \(r.stderr.suffix(500))")
            #expect(r.stdout.contains("change feed: "), "night \(night): \(r.stdout)")
            if night == 0 {
                // The first sync establishes state: what happened before churnwatch knew a
                // subscription is no event, and neither is a first poll.
                let events = try db.query("SELECT count(*) FROM churnwatch.churn_events")[0].decode(Int.self, at: 0)
                #expect(events == 0, "the first night wrote \(events) events")
            }
            // A subscription whose last change Apple never notified is excused while its true
            // period runs: the safety net looks where a period ended (or billing went quiet).
            // A later notification carries the whole state again and ends the excuse.
            let truth = try world.sim.truth(at: E2E.iso(asOf))
            var lastChange: [String: (at: Date, notified: Bool)] = [:]
            for e in try Self.events(world.sim, to: asOf.addingTimeInterval(1)) {
                guard let t = E2E.parse(e.occurred_at) else { continue }
                if let last = lastChange[e.original_transaction_id], last.at > t || (last.at == t && !last.notified) { continue }
                lastChange[e.original_transaction_id] = (t, e.notified != false)
            }
            var excused = Set<String>()
            for (otid, last) in lastChange where !last.notified {
                if let ends = truth[otid]?.expires_at.flatMap(E2E.parse), ends > asOf.addingTimeInterval(-2 * 3600) { excused.insert(otid) }
            }
            excusedTotal = max(excusedTotal, excused.count)
            for row in try db.query("SELECT original_transaction_id, segment FROM churnwatch.subscription_segments") {
                let otid = try row.decode(String.self, at: 0)
                // Sandbox subscribers too: a Production app's feed reads the Sandbox history as well.
                guard !excused.contains(otid), let t = truth[otid], t.fault == nil else { continue }
                checked += 1
                let ours = try row.decode(String.self, at: 1)
                if ours != t.segment { mismatches.append("night \(night) \(otid): ours \(ours), truth \(t.segment)") }
            }
        }
        print("change feed end-to-end: \(checked) segments checked, up to \(excusedTotal) subscriptions excused for an unnotified change")
        #expect(mismatches.isEmpty, "segments: \(mismatches.prefix(15))")
        #expect(checked > 5000, "too few segments checked to mean anything: \(checked)")

        // Every event written is a true event of its subscription.
        let truthEvents = try Self.events(world.sim, to: E2E.start.addingTimeInterval(12 * Self.day))
        let (falsePositives, fromFeed) = try Self.falsePositives(db, truthEvents)
        #expect(falsePositives.isEmpty, "false positives: \(falsePositives.prefix(15))")
        #expect(fromFeed > 50, "events from the feed: \(fromFeed)")
        let misses = try Self.notifiedMisses(db, world.sim, truthEvents, after: E2E.start, until: E2E.start.addingTimeInterval(11 * Self.day))
        #expect(misses.isEmpty, "notified changes not logged by the next night: \(misses.prefix(15))")

        // The safety net: subscriptions polled because the feed was silent where it should
        // have spoken, and among them some whose change Apple never notified.
        let net = Set(try db.query("""
            SELECT DISTINCT original_transaction_id FROM churnwatch.run_items
            WHERE reason IN ('period_end_unnotified', 'billing_no_news') AND status = 'done'
            """).map { try $0.decode(String.self, at: 0) })
        let unnotified = Set(truthEvents.filter { $0.notified == false }.map(\.original_transaction_id))
        #expect(!net.intersection(unnotified).isEmpty, "the safety net polled none of the \(unnotified.count) subscriptions with an unnotified change")
        // Win-back entries follow the campaign table, as without the feed.
        let wrong = try db.query("""
            SELECT count(*) FROM churnwatch.winback_queue w JOIN churnwatch.subscription_segments g USING (original_transaction_id)
            WHERE w.status IN ('pending', 'claimed') AND NOT (
                (w.campaign = 'save_offer' AND g.segment IN ('will_not_renew', 'price_increase_pending')) OR
                (w.campaign = 'billing_fix' AND g.segment IN ('grace_period', 'billing_retry')) OR
                (w.campaign = 'winback_offer' AND g.segment IN ('churned_voluntary', 'churned_price_increase', 'churned_other')) OR
                (w.campaign = 'resubscribe_prompt' AND g.segment IN ('churned_billing', 'churned_product_unavailable')))
            """)[0].decode(Int.self, at: 0)
        #expect(wrong == 0, "\(wrong) live win-back entries whose segment asks for another campaign")
    }

    /// The logged events whose kind the subscription never truly had, and how many events the
    /// feed wrote (`run_id` NULL).
    static func falsePositives(_ db: PostgresConnection, _ truth: [NotifiedEvent]) throws -> (wrong: [String], fromFeed: Int) {
        var trueKinds: [String: Set<String>] = [:]
        for e in truth { trueKinds[e.original_transaction_id, default: []].insert(e.event) }
        var wrong: [String] = []
        var fromFeed = 0
        for row in try db.query("SELECT original_transaction_id, event, run_id IS NULL FROM churnwatch.churn_events") {
            let otid = try row.decode(String.self, at: 0), event = try row.decode(String.self, at: 1)
            if try row.decode(Bool.self, at: 2) { fromFeed += 1 }
            if trueKinds[otid]?.contains(event) != true { wrong.append("\(otid) \(event)") }
        }
        return (wrong, fromFeed)
    }

    /// The changes Apple notified (after `after`, up to `until`) that `churn_events` has no row
    /// for within 24 hours: each change takes the first row of its subscription and kind
    /// detected at or after it that no earlier change took. Subscribers with a payload fault
    /// (their notifications are quarantined, by design) are left out.
    static func notifiedMisses(_ db: PostgresConnection, _ sim: SimulatorProcess, _ truth: [NotifiedEvent],
                               after: Date, until: Date) throws -> [String] {
        let faulty = Set(try sim.truth(at: E2E.iso(until)).filter { $0.value.fault != nil }.map(\.key))
        var rows: [String: [Date]] = [:]
        for row in try db.query("SELECT original_transaction_id, event, detected_at FROM churnwatch.churn_events ORDER BY detected_at") {
            rows["\(try row.decode(String.self, at: 0)) \(try row.decode(String.self, at: 1))", default: []].append(try row.decode(Date.self, at: 2))
        }
        var misses: [String] = []
        // A refund request and Apple's refusal of one are no churn events: churnwatch records
        // them in refund_requests (RefundRequestsCLITests).
        let notLogged: Set<String> = ["refund_requested", "refund_declined"]
        for e in truth where e.notified != false && !faulty.contains(e.original_transaction_id) && !notLogged.contains(e.event) {
            guard let t = E2E.parse(e.occurred_at), t > after, t <= until else { continue }
            let key = "\(e.original_transaction_id) \(e.event)"
            if let i = rows[key]?.firstIndex(where: { $0 >= t.addingTimeInterval(-1) }) {
                let at = rows[key]!.remove(at: i)
                if at.timeIntervalSince(t) <= Self.day { continue }
                misses.append("\(key) at \(e.occurred_at): logged \(E2E.iso(at))")
            } else {
                misses.append("\(key) at \(e.occurred_at): never")
            }
        }
        return misses
    }

    @Test("an app without a notification URL: the feed is empty and the run plans exactly as without it")
    func noNotificationURL() async throws {
        let world = try await E2E.World.make(subscribers: 400, seed: 5, simFlags: ["--no-notification-url"], populationLead: 45 * Self.day)
        defer { world.close() }
        let db = try world.connect()
        let env = world.env.merging(Self.feedOn) { _, new in new }
        for night in 0..<3 {
            let asOf = E2E.iso(E2E.start.addingTimeInterval(Double(night) * Self.day))
            try world.sim.setClock(asOf)
            let off = try await CLIRunner.run(["plan", "--as-of", asOf, "--notifications", "off"], environment: env)
            let on = try await CLIRunner.run(["plan", "--as-of", asOf], environment: env)
            #expect(off.status == 0 && on.status == 0, "\(off.stderr) \(on.stderr)")
            let table = { (s: String) in s.split(separator: "\n").filter { !$0.contains("change feed:") } }
            #expect(table(on.stdout) == table(off.stdout), "night \(night): with the feed \(on.stdout) without \(off.stdout)")
            let r = try await CLIRunner.run(["run", "--as-of", asOf, "--status-rate", "5000", "--history-rate", "5000"], environment: env)
            #expect(r.status == 0, "\(r.stderr.suffix(400))")
            #expect(r.stdout.contains("change feed: 0 read"), "\(r.stdout)")
        }
        #expect(try db.query("SELECT count(*) FROM churnwatch.notifications")[0].decode(Int.self, at: 0) == 0)
        let reasons = Set(try db.query("SELECT DISTINCT reason FROM churnwatch.run_items").map { try $0.decode(String.self, at: 0) })
        #expect(reasons.isDisjoint(with: ["period_end_unnotified", "billing_no_news"]), "\(reasons)")
    }
}
