import AppStoreModels
import Foundation
import Testing

@Suite("Base64url and compact JWS parsing")
struct Base64URLTests {
    @Test func roundTripsEveryLength() {
        var bytes: [UInt8] = []
        for n in 0..<70 {
            let encoded = Base64URL.encode(bytes)
            #expect(!encoded.contains("=") && !encoded.contains("+") && !encoded.contains("/"))
            #expect(Base64URL.decode(encoded) == bytes)
            let standard = Data(bytes).base64EncodedString()
            #expect(Base64URL.decodeStandard(standard) == bytes)
            bytes.append(UInt8(truncatingIfNeeded: n &* 37 &+ 250))
        }
    }

    @Test(arguments: ["a", "ab=", "a+b/", "ab c", "abc\n", "ab!d", "AB==", "AQ=", "AR"])
    func rejectsNonCanonicalOrForeignInput(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func standardAcceptsPaddingOnlyWhenAligned() {
        #expect(Base64URL.decodeStandard("AQ==") == [1])
        #expect(Base64URL.decodeStandard("AQ=") == nil)
        #expect(Base64URL.decodeStandard("A===") == nil)
        #expect(Base64URL.decodeStandard("-_8=") == nil)
    }

    @Test func parsesCompactJWS() throws {
        let input = try CompactJWS.signingInput(header: JWSHeader(alg: "ES256", x5c: ["AQ=="]), payload: ["a": 1])
        let jws = CompactJWS.serialize(signingInput: input, signature: [1, 2, 3])
        let parsed = try CompactJWS(jws)
        #expect(try parsed.decodeHeader() == JWSHeader(alg: "ES256", x5c: ["AQ=="]))
        #expect(try parsed.decodePayload([String: Int].self) == ["a": 1])
        #expect(parsed.signature == [1, 2, 3])
        #expect(parsed.signingInput == Array(input.utf8))
    }

    @Test func rejectsMalformedCompactJWS() {
        #expect(throws: CompactJWS.ParseError.wrongPartCount(2)) { try CompactJWS("abc.def") }
        #expect(throws: CompactJWS.ParseError.wrongPartCount(4)) { try CompactJWS("a.b.c.d") }
        #expect(throws: CompactJWS.ParseError.invalidBase64URL(part: 1)) { try CompactJWS("eyJ9..AQ") }
        #expect(throws: CompactJWS.ParseError.invalidBase64URL(part: 2)) { try CompactJWS("eyJ9.eyJ9.A*") }
        let big = String(repeating: "A", count: 20_000)
        #expect(throws: CompactJWS.ParseError.headerTooLarge(20_000)) { try CompactJWS(big + ".eyJ9.AQ") }
    }
}
