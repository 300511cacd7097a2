import AppStoreModels
@testable import AppStoreServerAPI
import Crypto
import Foundation
import Testing
import X509

@Suite("JWS verification as Apple's libraries do it")
struct SignedDataVerifierTests {
    let pki: TestPKI
    let verifier: SignedDataVerifier

    init() throws {
        pki = try TestPKI()
        verifier = SignedDataVerifier(rootCertificates: [pki.root], bundleId: Payloads.bundleId)
    }

    private func expectFailure(
        _ expected: JWSVerificationFailure, _ jws: String, environment: AppStoreEnvironment = .production,
        verifier: SignedDataVerifier? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            let payload = try await (verifier ?? self.verifier).verifyTransaction(jws, environment: environment)
            Issue.record("accepted: \(payload.transactionId ?? "?")", sourceLocation: sourceLocation)
        } catch {
            #expect(error == expected, sourceLocation: sourceLocation)
        }
    }

    @Test func acceptsGenuineTransactionAndRenewal() async throws {
        let t = try await verifier.verifyTransaction(try pki.sign(Payloads.transaction()), environment: .production)
        #expect(t == Payloads.transaction())
        let r = try await verifier.verifyRenewalInfo(try pki.sign(Payloads.renewal(environment: .sandbox)), environment: .sandbox)
        #expect(r.autoRenewStatus == .on)
    }

    @Test func steadyStateValidatesTheChainOnce() async throws {
        for i in 0..<50 {
            _ = try await verifier.verifyTransaction(try pki.sign(Payloads.transaction(transactionId: "\(i)")), environment: .production)
        }
        #expect(verifier.chainValidations == 1)
        // A header that differs in bytes but names the same certificates still hits the chain cache.
        let other = JWSHeader(alg: "ES256", kid: "x", x5c: pki.x5c)
        _ = try await verifier.verifyTransaction(try pki.sign(Payloads.transaction(), header: other), environment: .production)
        #expect(verifier.chainValidations == 1)
    }

    @Test func flippedPayloadByte() async throws {
        let jws = try pki.sign(Payloads.transaction())
        let parts = jws.split(separator: ".").map(String.init)
        var payload = try #require(Base64URL.decode(parts[1]))
        let digit = try #require(payload.firstIndex(of: UInt8(ascii: "7")))
        payload[digit] = UInt8(ascii: "8")
        await expectFailure(.invalidSignature, [parts[0], Base64URL.encode(payload), parts[2]].joined(separator: "."))
    }

    @Test func signatureByAnotherKey() async throws {
        await expectFailure(.invalidSignature, try pki.sign(Payloads.transaction(), key: P256.Signing.PrivateKey()))
    }

    @Test func truncatedOrWrongLengthSignature() async throws {
        let jws = try pki.sign(Payloads.transaction())
        let parts = jws.split(separator: ".").map(String.init)
        let signature = try #require(Base64URL.decode(parts[2]))
        #expect(signature.count == 64)
        await expectFailure(.invalidSignature, "\(parts[0]).\(parts[1]).\(Base64URL.encode(signature.dropLast()))")
        await expectFailure(.invalidSignature, "\(parts[0]).\(parts[1]).\(Base64URL.encode(signature + [0]))")
        await expectFailure(.invalidBase64URL(part: .signature), jws.prefix(upTo: jws.lastIndex(of: ".")!) + ".")
    }

    @Test func chainToAnUnconfiguredRoot() async throws {
        let rogue = try TestPKI(.init(rootName: "churnwatch Test Root CA"))
        await expectFailure(.untrustedChain, try rogue.sign(Payloads.transaction()))
    }

    @Test func x5cRootIsNeverTrusted() async throws {
        // A rogue chain that carries the genuine root in x5c[2] still leads nowhere.
        let rogue = try TestPKI()
        var x5c = rogue.x5c
        x5c[2] = pki.x5c[2]
        await expectFailure(.untrustedChain, try rogue.sign(Payloads.transaction(), header: JWSHeader(alg: "ES256", x5c: x5c)))
    }

    @Test func missingOIDOnLeaf() async throws {
        let other = try TestPKI(.init(leafHasAppleOID: false))
        let v = SignedDataVerifier(rootCertificates: [other.root], bundleId: Payloads.bundleId)
        await expectFailure(.leafMissingAppleOID, try other.sign(Payloads.transaction()), verifier: v)
    }

    @Test func missingOIDOnIntermediate() async throws {
        let other = try TestPKI(.init(intermediateHasAppleOID: false))
        let v = SignedDataVerifier(rootCertificates: [other.root], bundleId: Payloads.bundleId)
        await expectFailure(.intermediateMissingAppleOID, try other.sign(Payloads.transaction()), verifier: v)
    }

    @Test func leafExpiredAtSignedDate() async throws {
        let other = try TestPKI(.init(leafValidity: (TestPKI.date("2020-01-01"), TestPKI.date("2021-01-01"))))
        let v = SignedDataVerifier(rootCertificates: [other.root], bundleId: Payloads.bundleId)
        await expectFailure(.certificateExpired(.leaf), try other.sign(Payloads.transaction()), verifier: v)
        // Validity is judged at signedDate, not now: an old payload from that leaf still verifies.
        let old = Payloads.transaction(signedDate: EpochMilliseconds(TestPKI.date("2020-06-01")))
        #expect(try await v.verifyTransaction(try other.sign(old), environment: .production).signedDate == old.signedDate)
        // And one signed before the leaf existed does not.
        let early = Payloads.transaction(signedDate: EpochMilliseconds(TestPKI.date("2019-06-01")))
        await expectFailure(.certificateNotYetValid(.leaf), try other.sign(early), verifier: v)
    }

    @Test func x5cOfTwoAndOfFour() async throws {
        let two = JWSHeader(alg: "ES256", x5c: Array(pki.x5c.prefix(2)))
        await expectFailure(.wrongChainLength(2), try pki.sign(Payloads.transaction(), header: two))
        let four = JWSHeader(alg: "ES256", x5c: pki.x5c + [pki.x5c[2]])
        await expectFailure(.wrongChainLength(4), try pki.sign(Payloads.transaction(), header: four))
        await expectFailure(.missingCertificateChain, try pki.sign(Payloads.transaction(), header: JWSHeader(alg: "ES256")))
    }

    @Test(arguments: ["none", "HS256", "ES384", "RS256"])
    func algorithmOtherThanES256(alg: String) async throws {
        await expectFailure(.unsupportedAlgorithm(alg), try pki.sign(Payloads.transaction(), header: JWSHeader(alg: alg, x5c: pki.x5c)))
    }

    @Test func algNoneWithEmptySignature() async throws {
        let header = Base64URL.encode(#"{"alg":"none"}"#)
        let payload = Base64URL.encode(try JSONEncoder().encode(Payloads.transaction()))
        // The header is judged first, so an empty signature reports the algorithm.
        await expectFailure(.unsupportedAlgorithm("none"), "\(header).\(payload).")
        await expectFailure(.unsupportedAlgorithm("none"), "\(header).\(payload).AAAA")
    }

    @Test func nonBase64Parts() async throws {
        let parts = try pki.sign(Payloads.transaction()).split(separator: ".").map(String.init)
        await expectFailure(.invalidBase64URL(part: .header), "e*J.\(parts[1]).\(parts[2])")
        await expectFailure(.invalidBase64URL(part: .payload), "\(parts[0]).a+b/.\(parts[2])")
        await expectFailure(.invalidBase64URL(part: .signature), "\(parts[0]).\(parts[1]).!!")
        await expectFailure(.notThreeParts(2), "\(parts[0]).\(parts[1])")
        await expectFailure(.notThreeParts(4), "\(parts[0]).\(parts[1]).\(parts[2]).x")
        await expectFailure(.malformedHeader, "\(Base64URL.encode("not json")).\(parts[1]).\(parts[2])")
        await expectFailure(.malformedPayload, "\(parts[0]).\(Base64URL.encode("[1,2]")).\(parts[2])")
        var badCert = pki.x5c
        badCert[0] = "not base64!"
        await expectFailure(.malformedCertificate(index: 0), try pki.sign(Payloads.transaction(), header: JWSHeader(alg: "ES256", x5c: badCert)))
        badCert = pki.x5c
        badCert[1] = Data("not DER".utf8).base64EncodedString()
        await expectFailure(.malformedCertificate(index: 1), try pki.sign(Payloads.transaction(), header: JWSHeader(alg: "ES256", x5c: badCert)))
    }

    @Test func oversizedHeader() async throws {
        let header = JWSHeader(alg: "ES256", kid: String(repeating: "k", count: 20_000), x5c: pki.x5c)
        let jws = try pki.sign(Payloads.transaction(), header: header)
        await expectFailure(.headerTooLarge(bytes: jws.split(separator: ".")[0].utf8.count), jws)
    }

    @Test func wrongBundleId() async throws {
        await expectFailure(
            .bundleIdMismatch(expected: Payloads.bundleId, actual: "com.evil.app"),
            try pki.sign(Payloads.transaction(bundleId: "com.evil.app")))
    }

    @Test func wrongEnvironment() async throws {
        await expectFailure(
            .environmentMismatch(expected: "Production", actual: "Sandbox"),
            try pki.sign(Payloads.transaction(environment: .sandbox)))
        do {
            _ = try await verifier.verifyRenewalInfo(try pki.sign(Payloads.renewal(environment: .production)), environment: .sandbox)
            Issue.record("accepted renewal info from the wrong environment")
        } catch {
            #expect(error as? JWSVerificationFailure == .environmentMismatch(expected: "Sandbox", actual: "Production"))
        }
    }

    @Test func noRootsConfigured() async throws {
        let v = SignedDataVerifier(rootCertificates: [], bundleId: Payloads.bundleId)
        await expectFailure(.noTrustedRoots, try pki.sign(Payloads.transaction()), verifier: v)
    }

    @Test func missingSignedDateValidatesAtNow() async throws {
        struct Clock: AppStoreClock {
            let at: Date
            func now() -> Date { at }
            func sleep(until deadline: Date) async throws {}
        }
        let late = SignedDataVerifier(rootCertificates: [pki.root], bundleId: Payloads.bundleId, clock: Clock(at: TestPKI.date("2030-01-01")))
        await expectFailure(.certificateExpired(.leaf), try pki.sign(Payloads.transaction(signedDate: nil)), verifier: late)
        let now = SignedDataVerifier(rootCertificates: [pki.root], bundleId: Payloads.bundleId, clock: Clock(at: TestPKI.date("2024-01-01")))
        _ = try await now.verifyTransaction(try pki.sign(Payloads.transaction(signedDate: nil)), environment: .production)
    }

    @Test func strictModeRefusesWhatOpenSSLStrictRefuses() async throws {
        let loose = try TestPKI(.init(fullProfile: false))
        let jws = try loose.sign(Payloads.transaction())
        let lenient = SignedDataVerifier(rootCertificates: [loose.root], bundleId: Payloads.bundleId)
        _ = try await lenient.verifyTransaction(jws, environment: .production)
        let strict = SignedDataVerifier(rootCertificates: [loose.root], bundleId: Payloads.bundleId, options: .init(strictX509: true))
        do {
            _ = try await strict.verifyTransaction(jws, environment: .production)
            Issue.record("strict mode accepted a CA without key usage")
        } catch {
            guard case .chainPolicyViolation = error else { Issue.record("unexpected \(error)"); return }
        }
        // The full profile passes strict mode.
        let strictGood = SignedDataVerifier(rootCertificates: [pki.root], bundleId: Payloads.bundleId, options: .init(strictX509: true))
        _ = try await strictGood.verifyTransaction(try pki.sign(Payloads.transaction()), environment: .production)
    }

    @Test func leafSignedDirectlyByTheRootIsRefused() async throws {
        // Path leaf → root (two certificates) is not Apple's shape, even if the signature holds.
        let rootName = pki.root.subject
        let key = P256.Signing.PrivateKey()
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: TestPKI.date("2023-01-01"), notValidAfter: TestPKI.date("2026-01-01"),
            issuer: rootName, subject: try DistinguishedName { CommonName("direct leaf") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Certificate.Extension(oid: TestPKI.receiptSigningOID, critical: false, value: [0x05, 0x00])
            },
            issuerPrivateKey: .init(pki.rootKey))
        let x5c = [Data(TestPKI.der(leaf)).base64EncodedString(), pki.x5c[1], pki.x5c[2]]
        let jws = try pki.sign(Payloads.transaction(), header: JWSHeader(alg: "ES256", x5c: x5c), key: key)
        do {
            _ = try await verifier.verifyTransaction(jws, environment: .production)
            Issue.record("accepted a leaf issued by the root")
        } catch {
            guard case .chainPolicyViolation = error else { Issue.record("unexpected \(error)"); return }
        }
    }
}
