import AppStoreModels
import AppStoreServerAPI
import ChurnModel
import ChurnStore
import Foundation

/// What one history read brought.
struct HistoryRead: Sendable {
    /// The subscription's transactions in the answer: all of them on a full read, those added
    /// or modified since the stored revision on an incremental one.
    var facts: [TransactionFacts]
    /// Rows for `churnwatch.transactions` (the latest transaction is stored by the caller).
    var records: [TransactionRecord]
    /// Apple's final revision: the cursor for the next read.
    var revision: String?
    /// Revoked transactions this read shows churnwatch for the first time (see
    /// ``SubscriptionPoller/readHistory(_:latest:environment:calls:)``).
    var newlyRevoked: [TransactionFacts]
}

enum HistoryReadOutcome: Sendable {
    case read(HistoryRead)
    case failed(SubscriptionPoller.Result)
}

extension SubscriptionPoller {
    /// The filters of every history read. A revision is only valid with the filters it was
    /// issued for (Apple: "the same filters as the first call"), so they never change.
    static let historyFilters = TransactionHistoryRequest(productTypes: [.autoRenewable])

    /// Reads the subscription's history through Apple's revision cursor.
    ///
    /// With a stored `history_revision` (and not `--full-history`), Apple returns only the
    /// transactions added or modified since that read: new periods, and refunds, revocations
    /// and upgrades of any earlier transaction. Without one (first poll), with
    /// `--full-history`, or when Apple rejects the stored one (400 InvalidRequestRevision: stale,
    /// or issued for other filters by an older version that filtered on `startDate`), it starts
    /// over with a full read. The final revision is stored for the next read.
    ///
    /// Revoked transactions of an incremental read are new to churnwatch. A full read returns
    /// every revocation ever made; of those, only the ones dated after the stored snapshot was
    /// signed count as new (older ones were either seen or predate churnwatch's knowledge).
    func readHistory(_ item: ClaimedItem, latest: TransactionFacts, environment: AppStoreEnvironment,
                     calls: inout [AppStoreEndpoint: Int]) async -> HistoryReadOutcome {
        let otid = item.originalTransactionId
        let stored = fullHistory || item.snapshot == nil ? nil : item.historyRevision
        var outcome = await client.transactionHistory(for: otid, filters: Self.historyFilters, environment: environment, since: stored)
        calls[.transactionHistory, default: 0] += max(1, outcome.value?.pages ?? 1)
        var incremental = stored != nil
        if incremental, case .badRequest(let code) = outcome, code == .invalidRequestRevision {
            incremental = false
            outcome = await client.transactionHistory(for: otid, filters: Self.historyFilters, environment: environment)
            calls[.transactionHistory, default: 0] += max(1, outcome.value?.pages ?? 1)
        }
        guard case .success(let h) = outcome else {
            return .failed(failure(item, outcome, endpoint: .transactionHistory, calls: calls))
        }
        var read = HistoryRead(facts: [], records: [], revision: h.revision, newlyRevoked: [])
        let signedBefore = item.snapshot?.signedDate
        for (payload, signed) in zip(h.transactions, h.signedTransactions) where payload.originalTransactionId == otid {
            guard let f = TransactionFacts(payload) else { continue }
            read.facts.append(f)
            if f.transactionId != latest.transactionId {
                read.records.append(TransactionRecord(facts: f, payload: Self.signedPayload(signed) ?? Self.json(payload)))
            }
            if let revoked = f.revocationDate,
               incremental || signedBefore.map({ revoked > $0 }) == true {
                read.newlyRevoked.append(f)
            }
        }
        return .read(read)
    }
}
