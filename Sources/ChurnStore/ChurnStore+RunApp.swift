import Foundation
import Postgres

extension ChurnStore {
    /// The app (bundle id) run `runId` is of, whatever this store's app; nil when there is no
    /// such run. Run ids are global: `churnwatch status RUN` shows a run of any app.
    public func runApp(_ runId: Int64) async throws -> String? {
        try await pool.withConnection { db in
            try db.query("SELECT bundle_id FROM churnwatch.runs WHERE id = \(runId)").first?.decode(String.self, at: 0)
        }
    }
}
