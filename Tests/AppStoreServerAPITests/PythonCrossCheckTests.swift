@testable import AppStoreServerAPI
import Crypto
import Foundation
import Testing
import X509

/// Apple's Python library (app-store-server-library) and churnwatch judge the same JWS cases:
/// both accept genuine payloads from the test PKI, and churnwatch rejects everything Apple's
/// library rejects, with the same VerificationStatus. Runs `ops/crosscheck-python`, which
/// installs the library with pip when missing; skipped (with a printed reason) only when
/// python3 is missing.
@Suite("Cross-check with Apple's Python library")
struct PythonCrossCheckTests {
    struct Case: Encodable {
        var name: String
        var kind = "transaction"
        var jws: String
        var roots: [String]
        var bundleId = Payloads.bundleId
        var environment = "Production"
        var appAppleId: Int64? = 1_234_567_890
        /// Compare with the strict (X509_STRICT) mode of churnwatch's verifier.
        var strict = false
        /// churnwatch refuses what Apple's library accepts (documented difference).
        var churnwatchStricter = false

        enum CodingKeys: String, CodingKey { case name, kind, jws, roots, bundleId, environment, appAppleId }
    }

    struct PythonResult: Decodable {
        var name: String
        var accepted: Bool
        var status: String
    }

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func pythonAvailable() -> Bool {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "--version"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch { return false }
        p.waitUntilExit()
        return p.terminationStatus == 0
    }

    func cases() throws -> [Case] {
        let pki = try TestPKI()
        let roots = [Data(pki.rootDER).base64EncodedString()]
        let tx = Payloads.transaction()
        let genuine = try pki.sign(tx)
        let parts = genuine.split(separator: ".").map(String.init)
        func with(_ other: TestPKI, _ payload: JWSTransactionDecodedPayload = Payloads.transaction()) throws -> (String, [String]) {
            (try other.sign(payload), [Data(other.rootDER).base64EncodedString()])
        }
        var flipped = Base64URL.decode(parts[1])!
        flipped[flipped.firstIndex(of: UInt8(ascii: "7"))!] = UInt8(ascii: "8")
        let signature = Base64URL.decode(parts[2])!

        var list: [Case] = [
            Case(name: "genuine transaction", jws: genuine, roots: roots),
            Case(name: "genuine renewal info", kind: "renewal", jws: try pki.sign(Payloads.renewal()), roots: roots),
            Case(name: "genuine sandbox transaction", jws: try pki.sign(Payloads.transaction(environment: .sandbox)), roots: roots, environment: "Sandbox", appAppleId: nil),
            Case(name: "flipped payload byte", jws: "\(parts[0]).\(Base64URL.encode(flipped)).\(parts[2])", roots: roots),
            Case(name: "signature by another key", jws: try pki.sign(tx, key: P256.Signing.PrivateKey()), roots: roots),
            Case(name: "63-byte signature", jws: "\(parts[0]).\(parts[1]).\(Base64URL.encode(signature.dropLast()))", roots: roots),
            Case(name: "chain to an unconfigured root", jws: try TestPKI().sign(tx), roots: roots),
            Case(name: "wrong bundle id", jws: try pki.sign(Payloads.transaction(bundleId: "com.evil.app")), roots: roots),
            Case(name: "wrong environment", jws: try pki.sign(Payloads.transaction(environment: .sandbox)), roots: roots),
            Case(name: "renewal info from the wrong environment", kind: "renewal", jws: try pki.sign(Payloads.renewal(environment: .sandbox)), roots: roots),
            Case(name: "x5c of 2", jws: try pki.sign(tx, header: JWSHeader(alg: "ES256", x5c: Array(pki.x5c.prefix(2)))), roots: roots),
            Case(name: "x5c of 4", jws: try pki.sign(tx, header: JWSHeader(alg: "ES256", x5c: pki.x5c + [pki.x5c[2]])), roots: roots),
            Case(name: "no x5c", jws: try pki.sign(tx, header: JWSHeader(alg: "ES256")), roots: roots),
            Case(name: "alg none", jws: "\(Base64URL.encode(#"{"alg":"none"}"#)).\(parts[1]).", roots: roots),
            Case(name: "alg HS256", jws: try pki.sign(tx, header: JWSHeader(alg: "HS256", x5c: pki.x5c)), roots: roots),
            Case(name: "non-base64 header", jws: "e*J.\(parts[1]).\(parts[2])", roots: roots),
            Case(name: "non-base64 payload", jws: "\(parts[0]).@@@@.\(parts[2])", roots: roots),
            Case(name: "non-base64 signature", jws: "\(parts[0]).\(parts[1]).!!!!", roots: roots),
            Case(name: "two parts", jws: "\(parts[0]).\(parts[1])", roots: roots),
            Case(name: "truncated", jws: String(genuine.prefix(genuine.count / 2)), roots: roots),
            Case(name: "x5c leaf not base64", jws: try pki.sign(tx, header: JWSHeader(alg: "ES256", x5c: ["%%%"] + pki.x5c.dropFirst())), roots: roots),
            Case(name: "x5c leaf not DER", jws: try pki.sign(tx, header: JWSHeader(alg: "ES256", x5c: ["AAAA"] + pki.x5c.dropFirst())), roots: roots),
            Case(name: "no roots configured", jws: genuine, roots: []),
            Case(name: "oversized header", jws: try pki.sign(tx, header: JWSHeader(alg: "ES256", kid: String(repeating: "k", count: 20_000), x5c: pki.x5c)), roots: roots, churnwatchStricter: true),
        ]

        let rogue = try TestPKI()
        var rogueWithGenuineRoot = rogue.x5c
        rogueWithGenuineRoot[2] = pki.x5c[2]
        list.append(Case(name: "rogue chain carrying the configured root in x5c[2]", jws: try rogue.sign(tx, header: JWSHeader(alg: "ES256", x5c: rogueWithGenuineRoot)), roots: roots))

        var (jws, r) = try with(TestPKI(.init(leafHasAppleOID: false)))
        list.append(Case(name: "leaf without Apple's OID", jws: jws, roots: r))
        (jws, r) = try with(TestPKI(.init(intermediateHasAppleOID: false)))
        list.append(Case(name: "intermediate without Apple's OID", jws: jws, roots: r))
        let expired = try TestPKI(.init(leafValidity: (TestPKI.date("2020-01-01"), TestPKI.date("2021-01-01"))))
        (jws, r) = try with(expired)
        list.append(Case(name: "leaf expired at signedDate", jws: jws, roots: r))
        (jws, r) = try with(expired, Payloads.transaction(signedDate: EpochMilliseconds(TestPKI.date("2020-06-01"))))
        list.append(Case(name: "old payload signed while the leaf was valid", jws: jws, roots: r))
        let loose = try TestPKI(.init(fullProfile: false))
        (jws, r) = try with(loose)
        list.append(Case(name: "certificates without key identifiers or CA key usage (strict)", jws: jws, roots: r, strict: true))
        return list
    }

    func churnwatch(_ c: Case) async throws -> (accepted: Bool, status: String) {
        let roots = try c.roots.map { try Certificate(derEncoded: Array(Data(base64Encoded: $0)!)) }
        let verifier = SignedDataVerifier(rootCertificates: roots, bundleId: c.bundleId, options: .init(strictX509: c.strict))
        let environment = AppStoreEnvironment(rawValue: c.environment)!
        do {
            if c.kind == "renewal" {
                _ = try await verifier.verifyRenewalInfo(c.jws, environment: environment)
            } else {
                _ = try await verifier.verifyTransaction(c.jws, environment: environment)
            }
            return (true, "OK")
        } catch {
            return (false, error.appleStatus)
        }
    }

    @Test func appleAndChurnwatchAgree() async throws {
        guard Self.pythonAvailable() else {
            print("PythonCrossCheckTests: skipped: python3 is not installed")
            return
        }
        let cases = try cases()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cw-crosscheck-\(UUID().uuidString).json")
        try JSONEncoder().encode(["cases": cases]).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [Self.repositoryRoot.appendingPathComponent("ops/crosscheck-python").path, file.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "ops/crosscheck-python failed")
        let results = try JSONDecoder().decode([PythonResult].self, from: data)
        try #require(results.count == cases.count)

        for (c, apple) in zip(cases, results) {
            let ours = try await churnwatch(c)
            print("crosscheck: \(c.name): Apple \(apple.status), churnwatch \(ours.status)\(c.strict ? " (strict)" : "")")
            if c.churnwatchStricter {
                #expect(apple.accepted && !ours.accepted, "\(c.name): Apple \(apple.status), churnwatch \(ours.status)")
            } else {
                #expect(apple.accepted == ours.accepted, "\(c.name): Apple \(apple.status), churnwatch \(ours.status)")
                #expect(apple.status == ours.status, "\(c.name): Apple \(apple.status), churnwatch \(ours.status)")
            }
        }
        let genuine = results.filter { $0.name.hasPrefix("genuine") || $0.name.hasPrefix("old payload") }
        #expect(genuine.count == 4 && genuine.allSatisfy(\.accepted))
    }
}
