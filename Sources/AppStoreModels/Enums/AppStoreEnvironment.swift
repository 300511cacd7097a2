import Foundation

/// The server environment that produced a payload or response (`environment`).
///
/// Payloads keep the raw value beside this type, so a value Apple adds later decodes as `nil`
/// here while the raw value is preserved.
public enum AppStoreEnvironment: String, Codable, Hashable, Sendable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
    case xcode = "Xcode"
    case localTesting = "LocalTesting"
}

extension AppStoreEnvironment {
    /// The environment a subscription is registered in or churnwatch is configured for, from
    /// text in any case and surrounding blanks (`production`, ` Sandbox`): Production or Sandbox,
    /// nil for anything else. The one place such text is read.
    public init?(registered text: String) {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "production": self = .production
        case "sandbox": self = .sandbox
        default: return nil
        }
    }
}
