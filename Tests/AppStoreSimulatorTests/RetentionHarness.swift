import AppStoreModels
import Foundation
@testable import AppStoreSimulator

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension SimHarness {
    /// An authorized request to the Retention Messaging API (`/inApps/v1/messaging/{path}`).
    func messaging(_ method: String, _ path: String, sandbox: Bool = false, json: Any? = nil, raw: Data? = nil,
                   token: String? = nil) async throws -> Response {
        var req = URLRequest(url: URL(string: "http://127.0.0.1:\(sandbox ? sandboxPort : port)/inApps/v1/messaging/\(path)")!)
        req.httpMethod = method
        if let json { req.httpBody = try JSONSerialization.data(withJSONObject: json) }
        if let raw { req.httpBody = raw }
        req.setValue(raw == nil ? "application/json" : "image/png", forHTTPHeaderField: "Content-Type")
        let t = try token ?? self.token()
        if !t.isEmpty { req.setValue("Bearer \(t)", forHTTPHeaderField: "Authorization") }
        return try await SimHarness.send(req, timeout: 20)
    }

    /// Uploads a message (no image) and returns its identifier.
    func uploadMessage(header: String = "Before you go", body: String = "Keep your plan at half price.") async throws -> String {
        let id = UUID().uuidString.lowercased()
        let r = try await messaging("PUT", "message/\(id)", json: ["header": header, "body": body])
        guard r.status == 200 else { throw HarnessError.status(r.status, r.text) }
        return id
    }

    /// `/_sim/retention/views` in a window (default: start..now).
    func cancelPageViews(from: Int64? = nil, to: Int64? = nil) async throws -> [[String: Any]] {
        var q: [String] = []
        if let from { q.append("from=\(SimTime.format(from))") }
        if let to { q.append("to=\(SimTime.format(to))") }
        let r = try await get("/_sim/retention/views" + (q.isEmpty ? "" : "?" + q.joined(separator: "&")), token: "")
        return ((r.json as? [String: Any])?["views"] as? [[String: Any]]) ?? []
    }

    func cancelPageSummary() async throws -> [String: Any] {
        try await get("/_sim/retention/summary", token: "").json as? [String: Any] ?? [:]
    }
}

extension SimHarness.Response {
    /// Apple's `errorCode`, when the body is an error.
    var errorCode: Int64? { (try? decode(ErrorPayload.self))?.errorCode }
}

/// A PNG's first bytes: the signature, an IHDR chunk (`width` × `height`, 8-bit RGBA) and IEND
/// (the CRCs are not checked, as the simulator checks only the signature and IHDR).
func pngBytes(width: UInt32 = 64, height: UInt32 = 64, colorType: UInt8 = 6) -> Data {
    func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    var b: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    b += be32(13) + Array("IHDR".utf8) + be32(width) + be32(height) + [8, colorType, 0, 0, 0] + [0, 0, 0, 0]
    b += be32(0) + Array("IEND".utf8) + [0xAE, 0x42, 0x60, 0x82]
    return Data(b)
}

/// The real-time request a receiver got: the payload of its `signedPayload`, verified with the
/// simulator's root.
func realtimeRequest(_ body: Data, verifier: TestJWSVerifier) async throws -> DecodedRealtimeRequestBody {
    struct Envelope: Decodable { var signedPayload: String }
    let envelope = try JSONDecoder().decode(Envelope.self, from: body)
    let payload = try await verifier.verify(envelope.signedPayload)
    return try JSONDecoder().decode(DecodedRealtimeRequestBody.self, from: Data(payload))
}

/// The payload of a real-time request, unverified (inside a receiver's handler).
func unverifiedRealtimeRequest(_ body: Data) -> DecodedRealtimeRequestBody? {
    struct Envelope: Decodable { var signedPayload: String }
    guard let envelope = try? JSONDecoder().decode(Envelope.self, from: body) else { return nil }
    return try? CompactJWS(envelope.signedPayload).decodePayload(DecodedRealtimeRequestBody.self)
}
