import ChurnModel
import Testing

@Suite("Change feed: the window of the next notification-history sync")
struct NotificationFeedWindowTests {
    static let day = NotificationFeedRules.day, margin = NotificationFeedRules.retentionMargin
    static let now: Int64 = 1_800_000_000_000
    static let hour: Int64 = 3_600_000

    func next(_ cursor: FeedCursor, lookback: Int64 = 30 * day, retention: Int64 = 180) -> FeedWindow {
        NotificationFeedRules.nextWindow(cursor, now: Self.now, overlap: Self.hour, firstLookback: lookback, retentionDays: retention)
    }

    @Test func aFirstSyncReadsTheLookbackUpToNow() {
        #expect(next(FeedCursor()) == FeedWindow(start: Self.now - 30 * Self.day, end: Self.now, paginationToken: nil, gap: nil))
    }

    @Test func aFirstSyncNeverAsksForMoreThanAppleKeeps() {
        let w = next(FeedCursor(), lookback: 400 * Self.day)
        #expect(w.start == Self.now - 180 * Self.day + Self.margin)
        #expect(next(FeedCursor(), lookback: 400 * Self.day, retention: 30).start == Self.now - 30 * Self.day + Self.margin)
    }

    @Test func theNextSyncStartsAnOverlapBeforeTheCursor() {
        let w = next(FeedCursor(syncedUntil: Self.now - 6 * Self.hour))
        #expect(w == FeedWindow(start: Self.now - 7 * Self.hour, end: Self.now, paginationToken: nil, gap: nil))
    }

    @Test func aCursorOlderThanTheRetentionLeavesAGapForTheWindowsToCover() {
        let old = Self.now - 200 * Self.day
        let w = next(FeedCursor(syncedUntil: old))
        #expect(w.start == Self.now - 180 * Self.day + Self.margin)
        #expect(w.gap == old..<w.start)
    }

    @Test func aSyncCutShortResumesWithItsWindowAndToken() {
        let p = FeedCursor.InProgress(start: Self.now - 2 * Self.day, end: Self.now - Self.day, paginationToken: "t3")
        let w = next(FeedCursor(syncedUntil: Self.now - 3 * Self.day, inProgress: p))
        #expect(w == FeedWindow(start: p.start, end: p.end, paginationToken: "t3", gap: nil))
        // One whose start fell out of the retention meanwhile is not resumed.
        let stale = FeedCursor.InProgress(start: Self.now - 181 * Self.day, end: Self.now - 170 * Self.day, paginationToken: "t9")
        #expect(next(FeedCursor(syncedUntil: Self.now - 182 * Self.day, inProgress: stale)).paginationToken == nil)
    }

    @Test func pagesMoveTheCursorOnlyWhenTheWindowIsRead() {
        let w = FeedWindow(start: 10, end: 20, paginationToken: nil, gap: nil)
        let mid = NotificationFeedRules.advance(FeedCursor(syncedUntil: 5), window: w, nextToken: "t1")
        #expect(mid == FeedCursor(syncedUntil: 5, inProgress: .init(start: 10, end: 20, paginationToken: "t1")))
        #expect(NotificationFeedRules.advance(mid, window: w, nextToken: nil) == FeedCursor(syncedUntil: 20, inProgress: nil))
        // Never backwards: a window ending before the cursor leaves it where it was.
        #expect(NotificationFeedRules.advance(FeedCursor(syncedUntil: 30), window: w, nextToken: nil).syncedUntil == 30)
        #expect(NotificationFeedRules.restart(FeedWindow(start: 10, end: 20, paginationToken: "bad", gap: nil)).paginationToken == nil)
    }
}
