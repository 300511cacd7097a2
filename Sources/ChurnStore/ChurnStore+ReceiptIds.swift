import Foundation
import Postgres

/// Subscribers registered with a legacy receipt alone (issue 19, item 3).
///
/// `subscriptions.original_transaction_id` stays the key (NOT NULL, the app's
/// `ON CONFLICT DO NOTHING` target). A row registered without the id gets a placeholder key:
/// `receipt:` followed by any text unique to that receipt; `churnwatch import` uses
/// `receipt:` + the hex SHA-256 of the receipt data. Apple's ids are digits, so a placeholder
/// never meets a real one. The first poll learns the real id from verifyReceipt and the batch
/// writer re-keys the row to it (or, when the id is registered already, merges the placeholder
/// row into that one); from then on the subscription is polled through the App Store Server API.
public enum ReceiptRegistration {
    public static let placeholderPrefix = "receipt:"

    /// True for a placeholder key (a subscriber registered with a receipt alone).
    public static func isPlaceholder(_ originalTransactionId: String) -> Bool {
        originalTransactionId.hasPrefix(placeholderPrefix)
    }
}

extension PollWrite {
    /// The item as the subscription's own rows see it: with the id this poll learned, if any.
    var subscriptionItem: ClaimedItem {
        guard let learned = learnedOriginalTransactionId else { return item }
        var copy = item
        copy.originalTransactionId = learned
        // Decided from the placeholder's row, written to the learned id's (which may have been
        // registered already, with a version of its own): a first poll, written whatever it holds.
        copy.stateVersion = ClaimedItem.anyVersion
        return copy
    }
}

extension ChurnStore {
    /// Re-keys placeholder rows to the ids their first poll learned, inside the batch's
    /// transaction and before its other writes (which use the learned ids). A learned id that is
    /// registered already keeps its row, which takes the placeholder's app_account_token,
    /// customer_ref and receipt_data where it has none; the placeholder row is deleted.
    static func adoptLearnedIds(_ db: PostgresConnection, placeholders: [String], learned: [String]) throws {
        guard !placeholders.isEmpty else { return }
        try db.execute("""
            UPDATE churnwatch.subscriptions AS s SET
                app_account_token = coalesce(s.app_account_token, p.app_account_token),
                customer_ref = coalesce(s.customer_ref, p.customer_ref),
                receipt_data = coalesce(s.receipt_data, p.receipt_data), updated_at = now()
            FROM unnest(\(placeholders)::text[], \(learned)::text[]) AS u(placeholder, learned)
            JOIN churnwatch.subscriptions AS p ON p.original_transaction_id = u.placeholder
            WHERE s.original_transaction_id = u.learned
            """)
        try db.execute("""
            DELETE FROM churnwatch.subscriptions AS p
            USING unnest(\(placeholders)::text[], \(learned)::text[]) AS u(placeholder, learned)
            WHERE p.original_transaction_id = u.placeholder
              AND EXISTS (SELECT 1 FROM churnwatch.subscriptions s WHERE s.original_transaction_id = u.learned)
            """)
        // Two placeholders that learned the same id in one batch: one is re-keyed, the other
        // stays and is merged at its next poll.
        try db.execute("""
            UPDATE churnwatch.subscriptions AS s SET original_transaction_id = u.learned, updated_at = now()
            FROM (SELECT DISTINCT ON (learned) placeholder, learned
                  FROM unnest(\(placeholders)::text[], \(learned)::text[]) AS x(placeholder, learned)
                  ORDER BY learned, placeholder) AS u
            WHERE s.original_transaction_id = u.placeholder
            """)
    }
}
