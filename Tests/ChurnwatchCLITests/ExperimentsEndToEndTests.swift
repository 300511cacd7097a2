import Foundation
import Postgres
import Testing

/// A cancel-page experiment as the runbook sets it up (issue 50), against the simulator's
/// customers: two arms and a fixed holdout on a rule for everyone, serve answering, nights each
/// followed by `experiments update`; then what the simulator showed against what was recorded,
/// the arms sticky, the weights moved, `outcomes --experiment`, and the winner kept.
@Suite("experiments end to end: serve answers with arms, update moves the weights, stop keeps the winner", .serialized)
struct ExperimentsEndToEndTests {
    typealias E2E = NightlyRunEndToEndTests
    typealias R = ServeRetentionCLITests
    typealias Views = CancelPageEndToEndTests.Views

    static func run(_ args: [String], _ env: [String: String]) async throws -> CLIRunner.Result {
        try await CLIRunner.run(args, environment: env)
    }

    @Test("held-out subscribers see the default, each arm its answer; a subscriber keeps one arm; an update reallocates and later subscribers are drawn in the new period; outcomes reads every arm; stop --keep writes the winner into the rule")
    func endToEnd() async throws {
        let world = try await E2E.World.make(subscribers: 500, seed: 48, simFlags: [
            "--cancel-page-share", "1", "--cancel-page-browse", "1", "--sandbox-share", "0.05",
            "--cancel-page-arm-effect", "message:\(R.m1)=0.1,offer:save50=0.6", "--cancel-page-offer", "save50=0.5x1",
            "--performance-test-requests", "20", "--retention-timeout", "10000",
        ], populationLead: 60 * E2E.day)
        defer { world.close() }
        let env = world.env
        #expect(try await world.night(E2E.start, extra: ["--notifications", "off"]).status == 0)
        let db = try world.connect()
        let product = try db.query("SELECT product_id FROM churnwatch.subscriptions WHERE product_id IS NOT NULL LIMIT 1")[0].decode(String.self, at: 0)
        for m in [R.m0, R.m1, R.m2] { try await R.upload(m, env) }
        for args in [["default", "set", "--product", product, "--locale", "en-US", "--message", R.m0], ["default", "set", "--message", R.m0],
                     ["rules", "set", "--name", "everyone", "--kind", "message", "--message", R.m1]] {
            #expect(try await Self.run(["messages"] + args, env).status == 0)
        }
        // Refused in one line, nothing written: an unknown rule, a bad arm, one arm only, a message not at Apple.
        let arms = ["--arm", "note:message:\(R.m1)", "--arm", "half:promotional_offer:\(R.m2):save50@0.5"]
        for (args, needle) in [(["--rule", "nobody"] + arms, "no cancel-page rule nobody"),
                               (["--rule", "everyone", "--arm", "note:banner:\(R.m1)", "--arm", "x:message:\(R.m1)"], "--arm note:banner"),
                               (["--rule", "everyone", "--arm", "note:message:\(R.m1)"], "2 to 8 arms"),
                               (["--rule", "everyone", "--arm", "note:message:\(R.m3)", "--arm", "x:message:\(R.m1)"], "upload it first")] {
            let r = try await Self.run(["experiments", "add", "exp"] + args + ["--holdout", "0.3", "--as-of", E2E.iso(E2E.start)], env)
            #expect(r.status == 78 && r.stderr.contains(needle) && r.stderr.split(separator: "\n").count == 1, "\(args): \(r.stderr)")
        }
        let added = try await Self.run(["experiments", "add", "exp", "--rule", "everyone", "--holdout", "0.3", "--min-matured", "3",
                                        "--as-of", E2E.iso(E2E.start)] + arms, env)
        #expect(added.status == 0 && added.stdout.contains("weights note 0.500, half 0.500"), "\(added.stdout) \(added.stderr)")
        let remove = try await Self.run(["messages", "rules", "remove", "--name", "everyone"], env)
        #expect(remove.status == 78 && remove.stderr.contains("running experiment"), "\(remove.stderr)")

        let server = try await ServeCLITests.Server.start(env, extra: ["--retention-max-skew", "off", "--no-webhooks"])
        defer { server.kill() }
        let url = "http://127.0.0.1:\(server.port)\(R.path)"
        #expect(try await Self.run(["messages", "url", "set", "--in", "Sandbox", "--url", url], env).status == 0)
        let sandbox = try db.query("SELECT original_transaction_id FROM churnwatch.subscriptions WHERE environment = 'Sandbox' LIMIT 1")[0].decode(String.self, at: 0)
        #expect(try await Self.run(["messages", "performance-test", "--original-transaction-id", sandbox, "--poll-every", "0.2s", "--wait", "2m"], env).status == 0)
        #expect(try await Self.run(["messages", "url", "set", "--url", url], env).status == 0)

        var updates: [String] = []
        for k in 1...8 {
            let at = E2E.start.addingTimeInterval(Double(k) * E2E.day)
            #expect(try await world.night(at, extra: ["--notifications", "off"]).status == 0, "night \(k)")
            let u = try await Self.run(["experiments", "update", "--as-of", E2E.iso(at)], env)
            #expect(u.status == 0, "\(u.stderr)")
            updates.append(u.stdout)
        }
        #expect(updates.contains { $0.contains("exp: period 1,") }, "no reallocation in 8 nights: \(updates)")
        let end = E2E.start.addingTimeInterval(8 * E2E.day)
        let truth = try JSONDecoder().decode(Views.self, from: try world.sim.request("GET", "/_sim/retention/views?from=\(E2E.iso(E2E.start))&to=\(E2E.iso(end))"))
            .views.filter(\.posted)
        let shown = try await Self.shownAsRecorded(truth, db)
        print("experiments end to end: \(truth.count) views, \(shown.sorted { $0.key < $1.key }); updates: \(updates.joined(separator: " | "))")
        #expect(Set(shown.keys) == ["holdout default", "note message", "half promotional_offer"], "\(shown)")
        // Every exposed subscriber (Apple's performance test's one included) has one assignment: their first arm.
        let exposed = try ServeCLITests.count(db, "SELECT count(DISTINCT original_transaction_id) FROM churnwatch.retention_message_requests WHERE experiment = 'exp'")
        #expect(try ServeCLITests.count(db, "SELECT count(*) FROM churnwatch.experiment_assignments") == exposed)
        #expect(try ServeCLITests.count(db, """
            SELECT count(*) FROM churnwatch.experiment_assignments a WHERE a.arm <> (SELECT r.experiment_arm FROM churnwatch.retention_message_requests r
                WHERE r.original_transaction_id = a.original_transaction_id AND r.experiment = 'exp' ORDER BY r.signed_at LIMIT 1)
            """) == 0)
        #expect(try ServeCLITests.count(db, "SELECT count(*) FROM churnwatch.retention_message_requests WHERE experiment_period > 0") > 0)

        let readout = try await Self.run(["outcomes", "--experiment", "exp", "--json", "--as-of", E2E.iso(end)], env)
        let lines = readout.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(lines.first?["srm_flagged"] as? Bool == false, "\(readout.stdout)")
        #expect(Set(lines.compactMap { $0["arm"] as? String }) == ["note", "half", "holdout"], "\(readout.stdout)")
        #expect(lines.filter { $0["arm"] != nil }.map { $0["exposed"] as? Int ?? 0 }.reduce(0, +) == exposed)

        let stop = try await Self.run(["experiments", "stop", "exp", "--keep", "half"], env)
        #expect(stop.status == 0, "\(stop.stderr)")
        let rule = try await Self.run(["messages", "rules", "list"], env)
        #expect(rule.stdout.contains("\"kind\":\"promotional_offer\"") && rule.stdout.contains("\"offerId\":\"save50\""), "\(rule.stdout)")
        #expect(try await Self.run(["experiments", "list"], env).stdout.contains("exp  stopped"))
        #expect(try await server.stop().status == 0)
    }

    /// What the simulator showed at each posted view against the arm recorded for it: the holdout
    /// the default, each arm its answer, a subscriber one arm throughout. Counts by "arm shown".
    static func shownAsRecorded(_ truth: [CancelPageEndToEndTests.View], _ db: PostgresConnection) async throws -> [String: Int] {
        // Records follow their answers by moments: wait (bounded) for every view's.
        let ids = truth.map { $0.request_identifier.lowercased() }
        let deadline = Date().addingTimeInterval(30)
        while try ServeCLITests.count(db, "SELECT count(*) FROM churnwatch.retention_message_requests WHERE request_identifier::text = ANY(\(ids))") < ids.count,
              Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        var recorded: [String: (otid: String, arm: String?)] = [:]
        for row in try db.query("SELECT request_identifier::text, original_transaction_id, experiment_arm FROM churnwatch.retention_message_requests") {
            recorded[try row.decode(String.self, at: 0)] = (try row.decode(String.self, at: 1), try row.decode(String?.self, at: 2))
        }
        var armOf: [String: String] = [:], shown: [String: Int] = [:]
        #expect(truth.allSatisfy { recorded[$0.request_identifier.lowercased()] != nil }, "a posted view not recorded")
        for v in truth where recorded[v.request_identifier.lowercased()] != nil {
            let r = recorded[v.request_identifier.lowercased()]!
            guard let arm = r.arm else { Issue.record("view \(v.request_identifier) outside the experiment"); continue }
            shown["\(arm) \(v.shown)", default: 0] += 1
            switch arm {
            case "holdout": #expect(v.shown == "default" && v.message_identifier == R.m0, "a held-out view shown \(v.shown)")
            case "note": #expect(v.shown == "message" && v.message_identifier == R.m1, "arm note shown \(v.shown)")
            case "half": #expect(v.shown == "promotional_offer" && v.message_identifier == R.m2, "arm half shown \(v.shown)")
            default: Issue.record("arm \(arm)")
            }
            #expect(armOf[r.otid].map { $0 == arm } ?? true, "subscriber \(r.otid) moved from \(armOf[r.otid] ?? "") to \(arm)")
            armOf[r.otid] = arm
        }
        return shown
    }
}
