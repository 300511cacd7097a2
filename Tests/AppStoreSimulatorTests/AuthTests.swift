import AppStoreModels
import Crypto
import Foundation
import Testing
@testable import AppStoreSimulator

@Suite struct AuthTests {
    @Test func rejectsBadTokensWith401() async throws {
        let sim = try await SimHarness.start(subscribers: 100)
        defer { Task { try? await sim.stop() } }
        let path = "/inApps/v1/subscriptions/\(sim.population.originalTransactionId(sim.productionSubscribers[0]))"
        let now = Int64(Date().timeIntervalSince1970)
        #expect(try await sim.get(path).status == 200)
        let bad: [(String, String)] = [
            ("none", ""),
            ("expired", try sim.token(issuedAt: now - 3000, lifetime: 600)),
            ("wrong kid", try sim.token(kid: "WRONGKEY00")),
            ("wrong issuer", try sim.token(issuer: UUID().uuidString.lowercased())),
            ("wrong aud", try sim.token(audience: "appstoreconnect-v2")),
            ("wrong bid", try sim.token(bundleId: "com.example.other")),
            ("lifetime over 60 min", try sim.token(lifetime: 3601)),
            ("other key", try sim.token(key: P256.Signing.PrivateKey())),
            ("issued in the future", try sim.token(issuedAt: now + 600)),
            ("garbage", "not.a.jwt"),
        ]
        for (name, token) in bad {
            let r = try await sim.get(path, token: token)
            #expect(r.status == 401, "\(name)")
        }
        // A lifetime of exactly 60 minutes is fine.
        #expect(try await sim.get(path, token: try sim.token(lifetime: 3600)).status == 200)
    }

    @Test func unknownPathsAndControlNeedNoAuthButInAppsDoes() async throws {
        let sim = try await SimHarness.start(subscribers: 50)
        defer { Task { try? await sim.stop() } }
        #expect(try await sim.get("/inApps/v1/nothing/1", token: "").status == 401)
        #expect(try await sim.get("/inApps/v1/nothing/1").status == 404)
        #expect(try await sim.get("/_sim/info", token: "").status == 200)
    }
}
