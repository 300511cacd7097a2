import ChurnInput
import Foundation
import Postgres

/// What an import did.
public struct ImportCounts: Sendable, Equatable {
    /// Good records read from the file.
    public var read = 0
    /// New subscriptions registered.
    public var inserted = 0
    /// Records whose subscription was already registered (left unchanged).
    public var alreadyKnown = 0
    /// Records repeating an id seen earlier in the same file (the first one counts).
    public var duplicatesInFile = 0
    /// Lines rejected, in file order (all of them are counted; the first 1,000 are kept).
    public var rejectedCount = 0
    public var rejections: [ImportRejection] = []
}

extension ChurnStore {
    /// Registers the subscriptions of an import file, parsed before (``ImportSpool``): COPY of
    /// its good records into a staging table, then one `INSERT ... ON CONFLICT DO NOTHING`, all
    /// in one transaction. Re-importing the same file changes nothing; rows already registered
    /// keep every column as it is.
    public func subscriptionsImport(_ spool: ImportSpool) async throws -> ImportCounts {
        let result = try await pool.withTransaction(maxAttempts: 2) { db in
            var counts = ImportCounts()
            counts.read = spool.read
            counts.rejectedCount = spool.rejectedCount
            counts.rejections = spool.rejections
            try db.runScript("""
                CREATE TEMP TABLE import_stage (
                    line int NOT NULL, original_transaction_id text NOT NULL, app_account_token uuid,
                    customer_ref text, environment text NOT NULL, receipt_data text
                ) ON COMMIT DROP
                """)
            try db.copyFrom("COPY import_stage (line, original_transaction_id, app_account_token, customer_ref, environment, receipt_data) FROM STDIN") { writer in
                try spool.forEach { r in
                    try writer.row([Int32(r.line), r.originalTransactionId, r.appAccountToken, r.customerRef, r.environment, r.receiptData])
                }
            }
            // Registered with a receipt alone: a placeholder key until the first poll learns the id.
            try db.execute("""
                UPDATE import_stage
                SET original_transaction_id = \(ReceiptRegistration.placeholderPrefix)::text
                                              || encode(sha256(convert_to(receipt_data, 'UTF8')), 'hex')
                WHERE original_transaction_id = '' AND receipt_data IS NOT NULL
                """)
            let distinct = try db.query("SELECT count(DISTINCT original_transaction_id) FROM import_stage")[0].decode(Int.self, at: 0)
            counts.duplicatesInFile = counts.read - distinct
            counts.inserted = try db.execute("""
                INSERT INTO churnwatch.subscriptions (bundle_id, original_transaction_id, app_account_token, customer_ref, environment,
                                                      receipt_data)
                SELECT DISTINCT ON (original_transaction_id)
                       \(app), original_transaction_id, app_account_token, customer_ref, environment, receipt_data
                FROM import_stage
                ORDER BY original_transaction_id, line
                ON CONFLICT (original_transaction_id) DO NOTHING
                """)
            counts.alreadyKnown = distinct - counts.inserted
            return counts
        }
        await refreshStatistics(.subscriptions)
        return result
    }
}
