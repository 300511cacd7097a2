import Crypto
import Foundation

/// Everything secret or stable about one simulator installation: the In-App Purchase API key
/// (with its key id and issuer id), the app's shared secret for verifyReceipt, the signing chain,
/// and a rogue chain for fault payloads. Kept in a directory so restarts reuse it.
public struct SimulatorIdentity: Sendable {
    public let issuerId: String
    public let keyId: String
    /// The API key (P-256) churnwatch signs its request tokens with.
    public let apiKey: P256.Signing.PrivateKey
    /// Hex shared secret for verifyReceipt.
    public let sharedSecret: String
    public let chain: SigningChain
    /// A chain shaped like the real one but under a root nobody trusts.
    public let rogueChain: SigningChain

    public static func generate() throws -> SimulatorIdentity {
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        let keyId = String((0..<10).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
        let secret = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &rng)) }.joined()
        return SimulatorIdentity(
            issuerId: UUID().uuidString.lowercased(), keyId: keyId, apiKey: P256.Signing.PrivateKey(),
            sharedSecret: secret, chain: try .generate(name: "appstore-sim"), rogueChain: try .generate(name: "rogue"))
    }

    init(issuerId: String, keyId: String, apiKey: P256.Signing.PrivateKey, sharedSecret: String,
         chain: SigningChain, rogueChain: SigningChain) {
        self.issuerId = issuerId
        self.keyId = keyId
        self.apiKey = apiKey
        self.sharedSecret = sharedSecret
        self.chain = chain
        self.rogueChain = rogueChain
    }

    private struct Stored: Codable {
        var issuerId: String
        var keyId: String
        var sharedSecret: String
    }

    /// The file name Apple gives a downloaded API key.
    public var apiKeyFileName: String { "AuthKey_\(keyId).p8" }

    /// Loads the identity kept in `dir`, or creates one there (the directory too).
    public static func loadOrCreate(dir: String) throws -> SimulatorIdentity {
        let url = URL(fileURLWithPath: dir, isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        let identityURL = url.appendingPathComponent("identity.json")
        if let data = FileIO.read(identityURL) {
            let stored = try JSONDecoder().decode(Stored.self, from: Data(data))
            guard let keyPEM = FileIO.read(url.appendingPathComponent("AuthKey_\(stored.keyId).p8")),
                let chain = try SigningChain.read(from: url, prefix: ""),
                let rogue = try SigningChain.read(from: url, prefix: "rogue-")
            else {
                throw SimulatorError("\(dir) holds identity.json but not all of its keys and certificates")
            }
            return SimulatorIdentity(
                issuerId: stored.issuerId, keyId: stored.keyId,
                apiKey: try .init(pemRepresentation: String(decoding: keyPEM, as: UTF8.self)),
                sharedSecret: stored.sharedSecret, chain: chain, rogueChain: rogue)
        }
        let id = try generate()
        try FileIO.write(Array(id.apiKey.pemRepresentation.utf8), to: url.appendingPathComponent(id.apiKeyFileName), mode: 0o600)
        try id.chain.write(to: url, prefix: "")
        try id.rogueChain.write(to: url, prefix: "rogue-")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        try FileIO.write(
            Array(try encoder.encode(Stored(issuerId: id.issuerId, keyId: id.keyId, sharedSecret: id.sharedSecret))),
            to: identityURL, mode: 0o600)
        return id
    }
}

/// A simulator failure with a message for the operator.
public struct SimulatorError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
