import AppStoreModels
import Testing

/// The one reading of an environment name (import files, APPSTORE_ENVIRONMENT, --environment).
@Suite struct RegisteredEnvironmentTests {
    @Test func productionOrSandboxInAnyCaseElseNothing() {
        #expect(AppStoreEnvironment(registered: "production") == .production)
        #expect(AppStoreEnvironment(registered: " Sandbox ") == .sandbox)
        #expect(AppStoreEnvironment(registered: "SANDBOX") == .sandbox)
        for other in ["", "Xcode", "LocalTesting", "prod", "sandbox2"] {
            #expect(AppStoreEnvironment(registered: other) == nil, "\(other)")
        }
    }
}
