/// Which stretch of Apple's notification history the next sync reads (issue #14's change feed).
/// Pure: every moment is a parameter, in milliseconds since 1970.
///
/// - A sync reads `[start, end]` page by page; after each page the caller stores the window and
///   the next page's token (``FeedCursor/inProgress``), so a killed sync resumes on the same body.
/// - A finished sync stores its `end` as ``FeedCursor/syncedUntil``. The next one starts
///   `overlap` earlier, because Apple files some records after their `signedDate`; the repeats
///   are deduplicated on `notificationUUID`.
/// - Apple keeps 180 days (Sandbox 30) and refuses an older `startDate` (4000012), so the start
///   is clamped to the retention, an hour inside it (``retentionMargin``: this host's clock and
///   Apple's may disagree, and a run's `--as-of` may lie a little in the past). What lies between an old cursor and the
///   retention is gone from the feed: ``FeedWindow/gap`` names it, and the caller falls back to
///   polling (the windows) for it.
public struct FeedCursor: Sendable, Hashable {
    /// Everything signed up to here was read by a finished sync; nil before the first.
    public var syncedUntil: Int64?
    /// A sync cut short: its window and the token of the next page to read.
    public var inProgress: InProgress?

    public struct InProgress: Sendable, Hashable {
        public var start: Int64
        public var end: Int64
        public var paginationToken: String

        public init(start: Int64, end: Int64, paginationToken: String) {
            self.start = start
            self.end = end
            self.paginationToken = paginationToken
        }
    }

    public init(syncedUntil: Int64? = nil, inProgress: InProgress? = nil) {
        self.syncedUntil = syncedUntil
        self.inProgress = inProgress
    }
}

/// The request of the next sync.
public struct FeedWindow: Sendable, Hashable {
    public var start: Int64
    public var end: Int64
    /// The token to resume with (same `start` and `end` as when it was issued); nil for page one.
    public var paginationToken: String?
    /// Records signed in `[from, to)` that the feed no longer holds (or, on a first sync, that
    /// lie before the lookback): the windows must cover them. nil when nothing is missing.
    public var gap: Range<Int64>?

    public init(start: Int64, end: Int64, paginationToken: String?, gap: Range<Int64>?) {
        self.start = start
        self.end = end
        self.paginationToken = paginationToken
        self.gap = gap
    }
}

public enum NotificationFeedRules {
    /// How far inside Apple's retention a sync starts at the oldest.
    public static let retentionMargin: Int64 = 3_600_000
    public static let day: Int64 = 86_400_000

    /// The window of the next sync at `now`.
    /// - Parameters:
    ///   - overlap: how far back of the cursor to read again (late-filed records).
    ///   - firstLookback: how far back a first sync reads (at most the retention).
    ///   - retentionDays: 180 in Production, 30 in Sandbox.
    public static func nextWindow(
        _ cursor: FeedCursor, now: Int64, overlap: Int64, firstLookback: Int64, retentionDays: Int64
    ) -> FeedWindow {
        let oldest = now - retentionDays * day + retentionMargin
        if let p = cursor.inProgress, p.start >= oldest, p.start <= p.end, p.end <= now {
            return FeedWindow(start: p.start, end: p.end, paginationToken: p.paginationToken, gap: nil)
        }
        let wanted = cursor.syncedUntil.map { $0 - overlap } ?? (now - firstLookback)
        let start = min(max(wanted, oldest), now)
        let gap: Range<Int64>? = cursor.syncedUntil.flatMap { until in until < oldest ? until..<oldest : nil }
        return FeedWindow(start: start, end: now, paginationToken: nil, gap: gap)
    }

    /// The cursor after a page of `window` was stored: the next page's token, or, after the
    /// last page, the window's end as the new `syncedUntil`.
    public static func advance(_ cursor: FeedCursor, window: FeedWindow, nextToken: String?) -> FeedCursor {
        guard let nextToken else { return FeedCursor(syncedUntil: max(cursor.syncedUntil ?? window.end, window.end), inProgress: nil) }
        return FeedCursor(syncedUntil: cursor.syncedUntil,
                          inProgress: .init(start: window.start, end: window.end, paginationToken: nextToken))
    }

    /// After Apple refused a stored token (4000014 invalid, 4000017 expired): the same window
    /// read again from its first page.
    public static func restart(_ window: FeedWindow) -> FeedWindow {
        FeedWindow(start: window.start, end: window.end, paginationToken: nil, gap: window.gap)
    }
}
