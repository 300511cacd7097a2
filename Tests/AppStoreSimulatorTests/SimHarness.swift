import AppStoreModels
import Crypto
import Foundation
import SwiftASN1
@_spi(FixedExpiryValidationTime) import X509
@testable import AppStoreSimulator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A simulator on ephemeral loopback ports, with its own PKI directory, for one test.
struct SimHarness {
    let server: SimulatorServer
    let dir: String
    var service: SimulatorService { server.service }
    var population: Population { server.service.population }
    var identity: SimulatorIdentity { server.service.identity }
    var port: Int { server.productionPort }
    var sandboxPort: Int { server.sandboxPort }

    /// With `apps` > 1, app k serves `config.forApp(k)` (the tokens of ``token`` name the first).
    static func start(
        subscribers: Int = 1500, seed: UInt64 = 7, options: SimulatorOptions = SimulatorOptions(), apps: Int = 1,
        configure: (inout PopulationConfig) -> Void = { _ in }, dir: String? = nil
    ) async throws -> SimHarness {
        var config = PopulationConfig(subscribers: subscribers, seed: seed, start: PopulationConfig.defaultStart)
        configure(&config)
        let dir = dir ?? FileManager.default.temporaryDirectory
            .appendingPathComponent("appstore-sim-test-\(UUID().uuidString)").path
        let identity = try SimulatorIdentity.loadOrCreate(dir: dir)
        let service = SimulatorService(
            populations: (1...apps).map { Population(config: config.forApp($0)) }, identity: identity,
            clock: SimClock(start: config.start), options: options)
        let server = try await SimulatorServer.start(service: service, port: 0, sandboxPort: 0, threads: 2)
        return SimHarness(server: server, dir: dir)
    }

    /// App `k` (1 is the first).
    func app(_ k: Int) -> SimApp { service.apps[k - 1] }

    func stop() async throws {
        try await server.shutdown()
        try? FileManager.default.removeItem(atPath: dir)
    }

    func token(
        kid: String? = nil, issuer: String? = nil, bundleId: String? = nil, audience: String = AppStoreAPIClaims.audience,
        issuedAt: Int64? = nil, lifetime: Int64 = 300, key: P256.Signing.PrivateKey? = nil
    ) throws -> String {
        let now = issuedAt ?? Int64(Date().timeIntervalSince1970)
        return try APITokenVerifier.makeToken(
            key: key ?? identity.apiKey, keyId: kid ?? identity.keyId, issuerId: issuer ?? identity.issuerId,
            bundleId: bundleId ?? population.config.bundleId, issuedAt: now, expiresAt: now + lifetime, audience: audience)
    }

    struct Response {
        var status: Int
        var headers: [String: String]
        var body: Data
        var json: Any? { try? JSONSerialization.jsonObject(with: body) }
        func decode<T: Decodable>(_ t: T.Type) throws -> T { try JSONDecoder().decode(T.self, from: body) }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// An authorized GET (a fresh valid token unless `token` is given; `""` sends none).
    func get(_ path: String, sandbox: Bool = false, token: String? = nil, timeout: TimeInterval = 120) async throws -> Response {
        var req = URLRequest(url: URL(string: "http://127.0.0.1:\(sandbox ? sandboxPort : port)\(path)")!)
        req.timeoutInterval = timeout
        let t = try token ?? self.token()
        if !t.isEmpty { req.setValue("Bearer \(t)", forHTTPHeaderField: "Authorization") }
        return try await SimHarness.send(req, timeout: timeout)
    }

    func post(_ path: String, sandbox: Bool = false, body: Data = Data()) async throws -> Response {
        var req = URLRequest(url: URL(string: "http://127.0.0.1:\(sandbox ? sandboxPort : port)\(path)")!)
        req.httpMethod = "POST"
        req.httpBody = body
        req.setValue("application/json", forHTTPHeaderField: "Content-Type")
        // A clock move waits for the views it passes (each answered within the App Store's wait).
        return try await SimHarness.send(req, timeout: 120)
    }

    static func send(_ req: URLRequest, timeout: TimeInterval) async throws -> Response {
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = timeout
        config.timeoutIntervalForResource = timeout
        let session = URLSession(configuration: config)
        defer { session.finishTasksAndInvalidate() }
        return try await withCheckedThrowingContinuation { cont in
            session.dataTask(with: req) { data, response, error in
                if let error { return cont.resume(throwing: error) }
                let http = response as! HTTPURLResponse
                var headers: [String: String] = [:]
                for (k, v) in http.allHeaderFields { headers[String(describing: k).lowercased()] = String(describing: v) }
                cont.resume(returning: Response(status: http.statusCode, headers: headers, body: data ?? Data()))
            }.resume()
        }
    }

    /// Production subscribers (index) that exist now.
    var productionSubscribers: [Int] {
        (0..<population.count).filter { !population.isSandbox($0) }
    }
}

/// Decodes a JWS payload without verifying it.
func payload<T: Decodable>(_ jws: String, as: T.Type) throws -> T {
    try CompactJWS(jws).decodePayload(T.self)
}

/// Verifies a JWS the way Apple's libraries do: x5c of exactly three, the chain (leaf,
/// intermediate) to the trusted root at the payload's signedDate, Apple's OIDs, the ES256
/// signature with the leaf key. Returns the payload bytes.
struct TestJWSVerifier {
    let root: Certificate

    init(rootDER: [UInt8]) throws { root = try Certificate(derEncoded: rootDER) }

    enum Failure: Error { case format, chainLength, certificate, chain, oid, signature }

    func verify(_ jws: String) async throws -> [UInt8] {
        guard let c = try? CompactJWS(jws), let header = try? c.decodeHeader() else { throw Failure.format }
        guard header.alg == "ES256", let x5c = header.x5c else { throw Failure.format }
        guard x5c.count == 3 else { throw Failure.chainLength }
        guard let leafDER = Base64URL.decodeStandard(x5c[0]), let intDER = Base64URL.decodeStandard(x5c[1]),
            let leaf = try? Certificate(derEncoded: leafDER), let intermediate = try? Certificate(derEncoded: intDER)
        else { throw Failure.certificate }
        struct Signed: Decodable { var signedDate: Int64? }
        let signed = (try? JSONDecoder().decode(Signed.self, from: Data(c.payloadBytes)))?.signedDate
        let at = signed.map { Date(timeIntervalSince1970: Double($0) / 1000) } ?? Date()
        var verifier = Verifier(rootCertificates: CertificateStore([root])) { RFC5280Policy(fixedExpiryValidationTime: at) }
        guard case .validCertificate = await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate]))
        else { throw Failure.chain }
        guard leaf.extensions[oid: [1, 2, 840, 113635, 100, 6, 11, 1]] != nil,
            intermediate.extensions[oid: [1, 2, 840, 113635, 100, 6, 2, 1]] != nil
        else { throw Failure.oid }
        guard let key = P256.Signing.PublicKey(leaf.publicKey),
            let sig = try? P256.Signing.ECDSASignature(rawRepresentation: c.signature),
            key.isValidSignature(sig, for: c.signingInput)
        else { throw Failure.signature }
        return c.payloadBytes
    }
}

/// docs/contracts.md's segment table applied to what the API says (what churnwatch will compute).
func segment(status: Int32, transaction t: JWSTransactionDecodedPayload, renewal r: JWSRenewalInfoDecodedPayload) -> String {
    if t.revocationDate != nil { return "refunded" }
    if status == 2 {
        switch r.rawExpirationIntent {
        case 1: return "churned_voluntary"
        case 2: return "churned_billing"
        case 3: return "churned_price_increase"
        case 4: return "churned_product_unavailable"
        default: return "churned_other"
        }
    }
    if status == 4 { return "grace_period" }
    if status == 3 { return "billing_retry" }
    if r.rawAutoRenewStatus == 0 { return "will_not_renew" }
    if r.rawPriceIncreaseStatus == 0 { return "price_increase_pending" }
    if r.autoRenewProductId != r.productId { return "plan_change_pending" }
    return "active"
}
