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

    /// A token shaped like Apple's Python library's (app-store-server-library 3.1.2): `kid`
    /// header without `typ`, claims `bid`, `iss`, `aud`, `exp` and no `iat`.
    static func tokenWithoutIssuedAt(_ sim: SimHarness, expiresIn: Int64) throws -> String {
        struct Claims: Encodable { var bid: String; var iss: String; var aud: String; var exp: Int64 }
        let claims = Claims(bid: sim.population.config.bundleId, iss: sim.identity.issuerId, aud: AppStoreAPIClaims.audience,
                            exp: Int64(Date().timeIntervalSince1970) + expiresIn)
        let input = try CompactJWS.signingInput(header: JWSHeader(alg: "ES256", kid: sim.identity.keyId), payload: claims)
        let signature = try sim.identity.apiKey.signature(for: Array(input.utf8))
        return CompactJWS.serialize(signingInput: input, signature: signature.rawRepresentation)
    }

    @Test("a token without iat is accepted as Apple accepts it, unless the simulator is told to be strict")
    func tokenWithoutIssuedAt() async throws {
        let sim = try await SimHarness.start(subscribers: 20)
        defer { Task { try? await sim.stop() } }
        let path = "/inApps/v1/subscriptions/\(sim.population.originalTransactionId(sim.productionSubscribers[0]))"
        #expect(try await sim.get(path, token: try Self.tokenWithoutIssuedAt(sim, expiresIn: 300)).status == 200)
        // Without iat, the remaining lifetime is what Apple's 60 minutes bound.
        #expect(try await sim.get(path, token: try Self.tokenWithoutIssuedAt(sim, expiresIn: 3700)).status == 401)
        #expect(try await sim.get(path, token: try Self.tokenWithoutIssuedAt(sim, expiresIn: -5)).status == 401)

        var options = SimulatorOptions()
        options.requireIssuedAt = true
        let strict = try await SimHarness.start(subscribers: 20, options: options)
        defer { Task { try? await strict.stop() } }
        let strictPath = "/inApps/v1/subscriptions/\(strict.population.originalTransactionId(strict.productionSubscribers[0]))"
        #expect(try await strict.get(strictPath, token: try Self.tokenWithoutIssuedAt(strict, expiresIn: 300)).status == 401)
        #expect(try await strict.get(strictPath).status == 200)
        let stats = try await strict.get("/_sim/stats", token: "").text
        #expect(stats.contains("\"missingIssuedAt\""), "\(stats)")
    }

    @Test func unknownPathsAndControlNeedNoAuthButInAppsDoes() async throws {
        let sim = try await SimHarness.start(subscribers: 50)
        defer { Task { try? await sim.stop() } }
        #expect(try await sim.get("/inApps/v1/nothing/1", token: "").status == 401)
        #expect(try await sim.get("/inApps/v1/nothing/1").status == 404)
        #expect(try await sim.get("/_sim/info", token: "").status == 200)
    }
}
