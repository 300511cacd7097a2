import AppStoreModels
import Foundation
import Testing
@testable import AppStoreSimulator

/// The Retention Messaging API's management endpoints: Apple's validation and errors, the review
/// of messages and images in simulated time, default messages, the real-time URL per environment.
@Suite struct RetentionMessagingTests {
    static func options(delay: Int64 = 0, reject: [String] = []) -> SimulatorOptions {
        var o = SimulatorOptions()
        o.retention.approvalDelayMs = delay
        o.retention.rejectWords = reject
        return o
    }

    @Test("images: a PNG is uploaded once, anything else is Apple's invalid image; review by the clock; in use until its message goes")
    func images() async throws {
        let sim = try await SimHarness.start(subscribers: 50, options: Self.options(delay: 2 * SimTime.hour))
        defer { Task { try? await sim.stop() } }
        let image = UUID().uuidString.lowercased()
        #expect(try await sim.messaging("PUT", "image/\(image)", raw: Data("GIF89a not a png".utf8)).errorCode == 4_000_161)
        var broken = pngBytes()
        broken[12] = UInt8(ascii: "X")  // no IHDR chunk first
        #expect(try await sim.messaging("PUT", "image/\(image)", raw: broken).errorCode == 4_000_161)
        #expect(try await sim.messaging("PUT", "image/\(image)", raw: pngBytes(width: 0)).errorCode == 4_000_161)
        #expect(try await sim.messaging("PUT", "image/\(image)", raw: pngBytes(colorType: 5)).errorCode == 4_000_161)
        #expect(try await sim.messaging("PUT", "image/\(image)?imageSize=HUGE", raw: pngBytes()).errorCode == 4_000_216)
        #expect(try await sim.messaging("PUT", "image/not-a-uuid", raw: pngBytes()).errorCode == 4_000_000)
        #expect(try await sim.messaging("PUT", "image/\(image.uppercased())", raw: pngBytes()).status == 200)
        let again = try await sim.messaging("PUT", "image/\(image)", raw: pngBytes())
        #expect(again.status == 409 && again.errorCode == 4_090_000)
        #expect(try await sim.messaging("PUT", "image/\(image)", raw: pngBytes(), token: "").status == 401)

        func imageState() async throws -> [String: String] {
            let list = try await sim.messaging("GET", "image/list").decode(RetentionWire.ImageList.self)
            return Dictionary(uniqueKeysWithValues: list.imageIdentifiers.map { ($0.imageIdentifier, $0.imageState) })
        }
        #expect(try await imageState() == [image: "PENDING"])
        sim.service.clock.advance(by: 2 * SimTime.hour)
        #expect(try await imageState() == [image: "APPROVED"])

        let message = UUID().uuidString.lowercased()
        let body: [String: Any] = [
            "header": "Stay", "body": "Half price for three months.", "headerPosition": "ABOVE_IMAGE",
            "image": ["imageIdentifier": image, "altText": "A gift"],
        ]
        #expect(try await sim.messaging("PUT", "message/\(message)", json: body).status == 200)
        let inUse = try await sim.messaging("DELETE", "image/\(image)")
        #expect(inUse.status == 403 && inUse.errorCode == 4_030_019)
        #expect(try await sim.messaging("DELETE", "message/\(message)").status == 200)
        #expect(try await sim.messaging("DELETE", "image/\(image)").status == 200)
        #expect(try await sim.messaging("DELETE", "image/\(image)").errorCode == 4_040_014)
        #expect(try await imageState().isEmpty)
    }

    @Test("messages: Apple's limits and errors, one upload per identifier, PENDING then APPROVED or REJECTED by the clock")
    func messages() async throws {
        let sim = try await SimHarness.start(subscribers: 50, options: Self.options(delay: SimTime.day, reject: ["free", "Guaranteed"]))
        defer { Task { try? await sim.stop() } }
        let id = UUID().uuidString.lowercased()
        func put(_ body: [String: Any], _ target: String? = nil) async throws -> SimHarness.Response {
            try await sim.messaging("PUT", "message/\(target ?? id)", json: body)
        }
        let bullet: [String: Any] = ["text": "Offline mode", "imageIdentifier": UUID().uuidString, "altText": "icon"]
        let cases: [([String: Any], Int64)] = [
            (["header": String(repeating: "h", count: 67), "body": "b"], 4_000_162),
            (["header": "h", "body": String(repeating: "b", count: 145)], 4_000_163),
            (["header": "h", "body": "b", "bulletPoints": Array(repeating: bullet, count: 6)], 4_000_218),
            (["header": "h", "body": "b", "bulletPoints": [bullet.merging(["text": String(repeating: "t", count: 67)]) { $1 }]], 4_000_219),
            (["header": "h", "body": "b", "image": ["imageIdentifier": UUID().uuidString, "altText": String(repeating: "a", count: 151)]], 4_000_175),
            (["header": "h", "body": "b", "headerPosition": "ABOVE_IMAGE"], 4_000_224),
            (["header": "h", "body": "b", "headerPosition": "SIDEWAYS"], 4_000_000),
            (["header": "h"], 4_000_000),
            (["header": "h", "body": "b", "bulletPoints": [bullet]], 4_040_014),
        ]
        for (body, code) in cases {
            let r = try await put(body)
            #expect(r.errorCode == code, "\(body.keys.sorted()): \(r.status) \(r.text)")
        }
        #expect(try await sim.messaging("GET", "message/list").decode(RetentionWire.MessageList.self).messageIdentifiers.isEmpty)
        // The limits themselves are allowed (66, 144, five bullet points, alt text 150).
        let image = UUID().uuidString.lowercased()
        #expect(try await sim.messaging("PUT", "image/\(image)?imageSize=BULLET_POINT", raw: pngBytes(width: 32, height: 32)).status == 200)
        let full = bullet.merging(["text": String(repeating: "t", count: 66), "imageIdentifier": image, "altText": String(repeating: "a", count: 150)]) { $1 }
        let ok = try await put(["header": String(repeating: "é", count: 66), "body": String(repeating: "b", count: 144),
                                "bulletPoints": Array(repeating: full, count: 5)])
        #expect(ok.status == 200, "\(ok.text)")
        #expect(try await put(["header": "h", "body": "b"]).errorCode == 4_090_001)
        let rejected = UUID().uuidString.lowercased()
        #expect(try await put(["header": "Stay with us", "body": "Get a FREE month."], rejected).status == 200)

        func states() async throws -> [String: String] {
            let list = try await sim.messaging("GET", "message/list").decode(RetentionWire.MessageList.self)
            return Dictionary(uniqueKeysWithValues: list.messageIdentifiers.map { ($0.messageIdentifier, $0.messageState) })
        }
        #expect(try await states() == [id: "PENDING", rejected: "PENDING"])
        sim.service.clock.advance(by: SimTime.day - 1)
        #expect(try await states() == [id: "PENDING", rejected: "PENDING"])
        sim.service.clock.advance(by: 1)
        #expect(try await states() == [id: "APPROVED", rejected: "REJECTED"])
        #expect(try await sim.messaging("DELETE", "message/\(UUID().uuidString)").errorCode == 4_040_015)
        #expect(try await sim.messaging("DELETE", "message/\(rejected)").status == 200)
        #expect(try await states() == [id: "APPROVED"])
    }

    @Test("default messages: an APPROVED message of this app's product and a locale; read and deleted")
    func defaults() async throws {
        let sim = try await SimHarness.start(subscribers: 50, options: Self.options(delay: SimTime.hour))
        defer { Task { try? await sim.stop() } }
        let product = "sim.premium.standard.monthly"
        let message = try await sim.uploadMessage()
        let path = "default/\(product)/en-US"
        #expect(try await sim.messaging("GET", path).errorCode == 4_040_020)
        let pending = try await sim.messaging("PUT", path, json: ["messageIdentifier": message])
        #expect(pending.status == 403 && pending.errorCode == 4_030_017)
        sim.service.clock.advance(by: SimTime.hour)
        #expect(try await sim.messaging("PUT", "default/sim.unknown.product/en-US", json: ["messageIdentifier": message]).errorCode == 4_000_023)
        #expect(try await sim.messaging("PUT", "default/\(product)/english!", json: ["messageIdentifier": message]).errorCode == 4_000_164)
        #expect(try await sim.messaging("PUT", path, json: ["messageIdentifier": UUID().uuidString]).errorCode == 4_040_015)
        #expect(try await sim.messaging("PUT", path, json: ["other": 1]).errorCode == 4_000_000)
        #expect(try await sim.messaging("PUT", path, json: ["messageIdentifier": message]).status == 200)
        let read = try await sim.messaging("GET", path).decode(RetentionWire.DefaultConfiguration.self)
        #expect(read.messageIdentifier == message)
        #expect(sim.app(1).messaging.isDefaultMessage(message))
        #expect(try await sim.messaging("GET", "default/\(product)/fr-FR").errorCode == 4_040_020)
        #expect(try await sim.messaging("DELETE", path).status == 200)
        #expect(try await sim.messaging("DELETE", path).errorCode == 4_040_020)
        #expect(!sim.app(1).messaging.isDefaultMessage(message))
    }

    @Test("the real-time URL is per environment; Production needs a passed performance test unless --retention-url was given")
    func realtimeURL() async throws {
        let sim = try await SimHarness.start(subscribers: 50)
        defer { Task { try? await sim.stop() } }
        #expect(try await sim.messaging("GET", "realtime/url", sandbox: true).errorCode == 4_040_021)
        #expect(try await sim.messaging("DELETE", "realtime/url").errorCode == 4_040_021)
        for bad in ["ftp://example.com/x", "not a url", "https://" + String(repeating: "a", count: 260) + ".com"] {
            #expect(try await sim.messaging("PUT", "realtime/url", sandbox: true, json: ["realtimeURL": bad]).errorCode == 4_000_215)
        }
        let url = "https://cancel.example.com/apple/retention-message"
        #expect(try await sim.messaging("PUT", "realtime/url", sandbox: true, json: ["realtimeURL": url]).status == 200)
        let sandbox = try await sim.messaging("GET", "realtime/url", sandbox: true).decode(RetentionWire.RealtimeURL.self)
        #expect(sandbox.realtimeURL == url)
        #expect(try await sim.messaging("GET", "realtime/url").errorCode == 4_040_021)
        let forbidden = try await sim.messaging("PUT", "realtime/url", json: ["realtimeURL": url])
        #expect(forbidden.status == 403 && forbidden.errorCode == 4_030_026)
        #expect(try await sim.messaging("DELETE", "realtime/url", sandbox: true).status == 200)
        #expect(try await sim.messaging("GET", "realtime/url", sandbox: true).errorCode == 4_040_021)

        var options = SimulatorOptions()
        options.retention.productionURL = "http://127.0.0.1:9/from-the-command-line"
        let configured = try await SimHarness.start(subscribers: 50, options: options)
        defer { Task { try? await configured.stop() } }
        for sandboxHost in [false, true] {
            let got = try await configured.messaging("GET", "realtime/url", sandbox: sandboxHost).decode(RetentionWire.RealtimeURL.self)
            #expect(got.realtimeURL == options.retention.productionURL)
        }
        #expect(try await configured.messaging("PUT", "realtime/url", json: ["realtimeURL": url]).status == 200)
        #expect(try await configured.messaging("GET", "realtime/url").decode(RetentionWire.RealtimeURL.self).realtimeURL == url)
    }
}
