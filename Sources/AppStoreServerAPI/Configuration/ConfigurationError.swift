/// A setting that is missing or wrong. ``description`` is one line naming the setting; it never
/// contains a key or a secret. The CLI exits 78 on it.
public struct ConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The environment variable name, e.g. `APPSTORE_PRIVATE_KEY_PATH`.
    public var setting: String
    public var message: String

    public init(_ setting: String, _ message: String) {
        self.setting = setting
        self.message = message
    }

    public var description: String { "\(setting): \(message)" }
}
