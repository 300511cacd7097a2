import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

@Suite struct SigningAndTruthTests {
    @Test func everyPayloadVerifiesAgainstTheRoot() async throws {
        let sim = try await SimHarness.start(subscribers: 300)
        defer { Task { try? await sim.stop() } }
        let verifier = try TestJWSVerifier(rootDER: sim.identity.chain.rootDER)
        let pop = sim.population
        for i in sim.productionSubscribers.prefix(80) {
            let s = try await sim.get("/inApps/v1/subscriptions/\(pop.originalTransactionId(i))").decode(StatusResponse.self)
            for item in s.data!.flatMap({ $0.lastTransactions! }) {
                let t = try JSONDecoder().decode(JWSTransactionDecodedPayload.self, from: Data(try await verifier.verify(item.signedTransactionInfo!)))
                #expect(t.bundleId == pop.config.bundleId)
                _ = try await verifier.verify(item.signedRenewalInfo!)
            }
        }
        let h = try await sim.get("/inApps/v2/history/\(pop.originalTransactionId(sim.productionSubscribers[0]))").decode(HistoryResponse.self)
        for jws in h.signedTransactions! { _ = try await verifier.verify(jws) }
    }

    /// What the API answers and the ground truth agree, subscriber by subscriber, at several instants.
    @Test func truthMatchesTheAPIAtTheSameInstant() async throws {
        let sim = try await SimHarness.start(subscribers: 1200)
        defer { Task { try? await sim.stop() } }
        let pop = sim.population
        for step in ["0d", "9d", "30d", "45d"] {
            _ = try await sim.post("/_sim/clock?advance=\(step)")
            let truth = try #require(try await sim.get("/_sim/truth", token: "").json as? [String: Any])
            let subs = try #require(truth["subscriptions"] as? [[String: Any]])
            let byId = Dictionary(uniqueKeysWithValues: subs.map { ($0["original_transaction_id"] as! String, $0) })
            var segments: [String: Int] = [:]
            for i in sim.productionSubscribers.prefix(400) {
                let otid = pop.originalTransactionId(i)
                let s = try await sim.get("/inApps/v1/subscriptions/\(otid)").decode(StatusResponse.self)
                let item = try #require(s.data?.flatMap { $0.lastTransactions! }.first { $0.originalTransactionId == otid })
                let t = try payload(item.signedTransactionInfo!, as: JWSTransactionDecodedPayload.self)
                let r = try payload(item.signedRenewalInfo!, as: JWSRenewalInfoDecodedPayload.self)
                let expected = try #require(byId[otid])
                let seg = segment(status: item.rawStatus!, transaction: t, renewal: r)
                segments[seg, default: 0] += 1
                #expect(seg == expected["segment"] as? String, "\(otid) at +\(step)")
                #expect(Int(item.rawStatus!) == expected["status"] as? Int)
                #expect(t.transactionId == expected["transaction_id"] as? String)
                #expect(t.productId == expected["product_id"] as? String)
                #expect(r.autoRenewProductId == expected["auto_renew_product_id"] as? String)
            }
            print("segments at +\(step): \(segments.sorted { $0.key < $1.key })")
        }
    }

    @Test func eventsAreTheTrueChangesInTheWindow() async throws {
        let sim = try await SimHarness.start(subscribers: 1000)
        defer { Task { try? await sim.stop() } }
        let r = try #require(try await sim.get("/_sim/events?from=2026-01-01T00:00:00Z&to=2026-01-15T00:00:00Z", token: "").json as? [String: Any])
        let events = try #require(r["events"] as? [[String: Any]])
        #expect(events.count > 50)
        let vocabulary = Set(TruthEventKind.allCases.map(\.rawValue))
        let from = SimTime.parse("2026-01-01T00:00:00Z")!, to = SimTime.parse("2026-01-15T00:00:00Z")!
        var previous = Int64.min
        for e in events {
            let at = try #require(SimTime.parse(e["occurred_at"] as! String))
            #expect(at >= from && at < to)
            #expect(at >= previous)
            previous = at
            #expect(vocabulary.contains(e["event"] as! String))
            if e["event"] as? String == "expired" {
                #expect((e["details"] as? [String: Any])?["expiration_intent"] is Int)
            }
        }
        // Each event is visible in the truth at its time.
        let sample = events.first { $0["event"] as? String == "auto_renew_disabled" }!
        let truth = try #require(try await sim.get("/_sim/truth?at=\(sample["occurred_at"] as! String)", token: "").json as? [String: Any])
        let sub = (truth["subscriptions"] as! [[String: Any]]).first { $0["original_transaction_id"] as? String == sample["original_transaction_id"] as? String }
        #expect(sub?["auto_renew"] as? Bool == false)
        #expect(try await sim.get("/_sim/events?from=nope", token: "").status == 400)

        // The same state, asked for that one subscription at that moment (POST /_sim/truth/at),
        // and one moment before its first purchase.
        let otid = try #require(sample["original_transaction_id"] as? String)
        let asks: [[String: String]] = [["original_transaction_id": otid, "at": sample["occurred_at"] as! String],
                                        ["original_transaction_id": otid, "at": "2000-01-01T00:00:00Z"]]
        let states = try #require(try await sim.post("/_sim/truth/at", body: try JSONSerialization.data(withJSONObject: asks))
            .json as? [String: Any])["states"] as? [[String: Any]]
        #expect(states?.count == 2)
        for key in ["segment", "status", "auto_renew", "expires_at", "transaction_id"] {
            #expect("\(states?[0][key] ?? "-")" == "\(sub?[key] ?? "-")", "\(key)")
        }
        #expect(states?[0]["at"] as? String == sample["occurred_at"] as? String)
        #expect(states?[1]["exists"] as? Bool == false)
        #expect(try await sim.post("/_sim/truth/at", body: Data("[{\"original_transaction_id\": \"1\"}]".utf8)).status == 400)
    }

    /// Same seed and same key directory: the same bytes, except the ECDSA signatures themselves
    /// (ECDSA signing is randomized and swift-crypto offers no deterministic mode).
    @Test func sameSeedGivesIdenticalAnswers() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("appstore-sim-det-\(UUID().uuidString)").path
        let a = try await SimHarness.start(subscribers: 400, seed: 11, dir: dir)
        let b = try await SimHarness.start(subscribers: 400, seed: 11, dir: dir)
        defer { Task { try? await a.stop(); try? await b.stop() } }
        func stripSignatures(_ s: String) -> String {
            // Drop the third segment of every compact JWS (header.payload.signature).
            let regex = try! NSRegularExpression(pattern: #"(eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)\.[A-Za-z0-9_-]+"#)
            return regex.stringByReplacingMatches(in: s, range: NSRange(s.startIndex..., in: s), withTemplate: "$1.SIG")
        }
        let pop = a.population
        for i in a.productionSubscribers.prefix(30) {
            for path in ["/inApps/v1/subscriptions/", "/inApps/v2/history/", "/inApps/v1/transactions/", "/inApps/v2/refund/lookup/"] {
                let ra = try await a.get(path + pop.originalTransactionId(i)).text
                let rb = try await b.get(path + pop.originalTransactionId(i)).text
                #expect(stripSignatures(ra) == stripSignatures(rb))
                #expect(ra.count == rb.count)
            }
        }
        #expect(try await a.get("/_sim/truth", token: "").body == (try await b.get("/_sim/truth", token: "").body))
        #expect(try await a.get("/_sim/events", token: "").body == (try await b.get("/_sim/events", token: "").body))
    }

    @Test func keyDirectoryIsReusedAndFilesAreWritten() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("appstore-sim-pki-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try SimulatorIdentity.loadOrCreate(dir: dir)
        let second = try SimulatorIdentity.loadOrCreate(dir: dir)
        #expect(first.keyId == second.keyId)
        #expect(first.issuerId == second.issuerId)
        #expect(first.sharedSecret == second.sharedSecret)
        #expect(first.chain.rootDER == second.chain.rootDER)
        #expect(first.apiKey.rawRepresentation == second.apiKey.rawRepresentation)
        #expect(first.keyId.count == 10)
        let keyFile = dir + "/" + first.apiKeyFileName
        let pem = try String(contentsOfFile: keyFile, encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        for name in [first.apiKeyFileName, "root-key.pem", "intermediate-key.pem", "leaf-key.pem"] {
            let attrs = try FileManager.default.attributesOfItem(atPath: dir + "/" + name)
            #expect((attrs[.posixPermissions] as? Int) == 0o600, "\(name)")
        }
        let pop = Population(config: PopulationConfig(subscribers: 50, seed: 1, start: PopulationConfig.defaultStart))
        try ClientFiles.write(dir: dir, identity: first, population: pop, productionPort: 9980, sandboxPort: 9981, environment: .production)
        let env = try String(contentsOfFile: dir + "/churnwatch.env", encoding: .utf8)
        let values = Dictionary(uniqueKeysWithValues: env.split(separator: "\n").map {
            let kv = $0.split(separator: "=", maxSplits: 1)
            return (String(kv[0]), String(kv[1]))
        })
        #expect(values["APPSTORE_ISSUER_ID"] == first.issuerId)
        #expect(values["APPSTORE_KEY_ID"] == first.keyId)
        #expect(values["APPSTORE_PRIVATE_KEY_PATH"] == keyFile)
        #expect(values["APPSTORE_BUNDLE_ID"] == pop.config.bundleId)
        #expect(values["APPSTORE_APP_APPLE_ID"] == "1234567890")
        #expect(values["APPSTORE_ENVIRONMENT"] == "Production")
        #expect(values["APPSTORE_BASE_URL"] == "http://127.0.0.1:9980")
        #expect(values["APPSTORE_SANDBOX_BASE_URL"] == "http://127.0.0.1:9981")
        #expect(values["APPSTORE_ROOT_CERTS"] == dir + "/root.der")
        #expect(values["APPSTORE_SHARED_SECRET"] == first.sharedSecret)
        let csv = try String(contentsOfFile: dir + "/subscriptions.csv", encoding: .utf8).split(separator: "\n")
        #expect(csv[0] == "original_transaction_id,app_account_token,customer_ref,environment,receipt_data")
        #expect(csv.count == 51)
        #expect(csv.dropFirst().allSatisfy { $0.split(separator: ",", omittingEmptySubsequences: false).count == 5 })
    }
}
