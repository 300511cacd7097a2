#!/usr/bin/env python3
"""Scores what churnwatch detected against the simulator's ground truth (`ops/bench detect`).

    bench_detect.py [--misses] run|pool|sync SUFFIX RUN_DIR...
    bench_detect.py at-risk SIM_URL RUN_DIR      (10-minute mode, before the simulator stops)

Each RUN_DIR is one (seed, hour) run of `ops/bench detect`: a fresh simulator and database,
a `churnwatch run` a night (plus, in the 10-minute mode, a `notifications sync` every 10
minutes between nights). ops/bench leaves in it:

  meta.json        {"label", "seed", "hour", "subscribers", "nights", "feed", "calls", "from",
                    "to", "syncs", "sync_seconds_total", "sync_seconds_max"}; FROM is night 0
                    (which only establishes state), TO the last night
  events.json      /_sim/events from FROM to TO + 10 minutes (the true changes)
  truth.json       /_sim/truth at TO (the environment of every subscription)
  churn_events.csv original_transaction_id, event, detected_at (epoch seconds): the log
  save_offers.csv  original_transaction_id, not_before, created_at (epoch seconds; created_at
                   by the database's wall clock): the save_offer entries
  processes.txt    "AS_OF START END" for every run and sync, START and END its wall-clock span
                   in epoch microseconds
  family.txt       the subscriptions whose transactions are FAMILY_SHARED (no campaigns)
  at_risk_before.txt  (10-minute mode; written by `at-risk`) "ID MS": the save-offer changes
                   whose subscription /_sim/truth had in will_not_renew or price_increase_pending
                   already a millisecond before the change (epoch milliseconds)

Matching, by detection time: the true changes with FROM < occurred_at <= TO, newest first,
each take the first row of the log (by detected_at) of the same subscription and kind with
detected_at >= occurred_at - 1 s that no later change took (a row stands for the latest change
of its kind before it: oldest first, a change nobody could see took the next one's row). A change is detected at that
row's detected_at; a change no row is left for was never detected (by TO). The log's own
occurred_at is not used: it cannot credit a change with a row logged before it happened.

`run SUFFIX DIR` prints one run's keys, each with SUFFIX appended:
  notified_recall_24h     share of the changes Apple notified logged within 24 h of occurred_at
  notified_never          notified changes never logged by TO
  coverage_24h            share of all true changes logged within 24 h
  detect_true_events      true changes in (FROM, TO]
  logged_unmatched        rows logged after night 0 that no true change took: a change that
                          never happened, a repeat, or a late row of a change before FROM
  calls_per_sub_night     Apple calls after night 0 / (subscribers x nights)

`pool SUFFIX DIR...` prints the aggregate of several runs: notified_recall_24h is the worst
run's, notified_never the sum, and these over all the runs' changes together:
  coverage_24h, coverage_24h_<event>  (every kind of the vocabulary; `nan` when none)
  detected_share          share detected at all by TO
  calls_per_sub_night     all runs' calls / all runs' subscriber-nights
  detect_true_events, logged_unmatched   the sums
  coverage_24h_notified   coverage_24h of the notified changes
  unnotified_events, unnotified_detected_share
                          the changes Apple never notified, and the share detected by TO
  unnotified_due_by_next_window, unnotified_caught_by_next_window
                          of the unnotified changes whose next window has come (the next true
                          renewal or expiry of the subscription, plus 24 h, by TO; a renewal,
                          expiry or start of billing trouble is its own boundary), how many,
                          and the share detected by then

`sync SUFFIX DIR...` prints the 10-minute mode's keys (several runs: the worst recall, the
sums of counts, the largest latencies):
  notified_recall_24h, notified_never
  notified_latency_p50_minutes, notified_latency_p99_minutes
                          detected_at - occurred_at over the notified changes, a change never
                          detected counting as infinite (`inf`; their number is notified_never)
  save_offer_changes      the true auto_renew_disabled and price_increase_pending changes Apple
                          notified (the save_offer campaign's segments will_not_renew and
                          price_increase_pending), less those of family members (no campaigns
                          by policy: save_offer_family_shared), those of a subscription already
                          at risk (its save offer is an earlier entry of the same period:
                          save_offer_already_at_risk), and those whose risk vanished within 10
                          minutes, before a sync could see it (an auto_renew_enabled, expired,
                          refunded, price_increase_accepted, plan_change_scheduled or renewed
                          change of the same subscription)
  save_offer_never        of those, how many got no save_offer entry by TO
  save_offer_latency_p50_minutes, save_offer_latency_p99_minutes
                          from occurred_at to when the subscription's first save_offer entry
                          claimable at or after occurred_at - 1 s became claimable: the later of
                          its not_before and the --as-of of the run or sync that made it (the
                          feed dates an entry's not_before at the notification's signedDate,
                          before the sync that reads it has run); never counts as infinite
  calls_per_sub_night, syncs, sync_seconds_mean, sync_seconds_max

With --misses, each run's misses go to stderr (the first 20 of each list, then a count by kind
and by environment): notified changes not logged within 24 h (10-minute mode: 20 minutes),
unnotified changes not logged by their next window, and (10-minute mode) save-offer changes
without an entry within 20 minutes.
"""
import bisect
import csv
import datetime
import json
import math
import os
import sys
import urllib.request
from collections import Counter, defaultdict

KINDS = [
    "auto_renew_disabled", "auto_renew_enabled", "billing_retry_started", "grace_period_started",
    "grace_period_expired", "billing_recovered", "renewed", "expired", "refunded", "refund_reversed",
    "plan_change_scheduled", "plan_change_cancelled", "plan_changed", "price_increase_pending",
    "price_increase_accepted", "resubscribed",
]
DAY = 86_400
TOLERANCE = 1  # seconds: a row may be stamped up to a second before the change
SAVE_RISKS = {"auto_renew_disabled", "price_increase_pending"}
SAVE_SEGMENTS = {"will_not_renew", "price_increase_pending"}
RISK_GONE = {"auto_renew_enabled", "expired", "refunded", "price_increase_accepted", "plan_change_scheduled", "renewed"}
RISK_GONE_WITHIN = 600
BOUNDARY_KINDS = {"renewed", "expired", "billing_retry_started", "grace_period_started"}
SHOW = 20


def parse(iso: str) -> float:
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def iso(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Change:
    """One true change of the simulator, with when churnwatch logged it (None: never)."""
    __slots__ = ("otid", "kind", "t", "notified", "at", "boundary", "save_at", "save")

    def __init__(self, e: dict):
        self.otid, self.kind, self.t = e["original_transaction_id"], e["event"], parse(e["occurred_at"])
        self.notified = e.get("notified") is not False
        self.at = self.boundary = self.save_at = None
        self.save = False  # counted among save_offer_changes

    def latency(self) -> float:
        return math.inf if self.at is None else self.at - self.t


class Run:
    """One (seed, hour) run's data, scored."""

    def __init__(self, path: str):
        self.path = path
        with open(os.path.join(path, "meta.json")) as f:
            self.meta = json.load(f)
        self.lo, self.hi = parse(self.meta["from"]), parse(self.meta["to"])
        with open(os.path.join(path, "events.json")) as f:
            # The event log's vocabulary: a refund request or Apple's refusal of one is no churn
            # event (churnwatch records it in refund_requests, checked apart).
            events = [Change(e) for e in json.load(f)["events"] if e["event"] in KINDS]
        events.sort(key=lambda c: c.t)
        self.changes = [c for c in events if self.lo < c.t <= self.hi]
        later = [c for c in events if c.t > self.lo]  # up to TO + 10 minutes, for vanished risks
        with open(os.path.join(path, "truth.json")) as f:
            self.env = {s["original_transaction_id"]: s["environment"] for s in json.load(f)["subscriptions"]}
        self.family = set(_lines(os.path.join(path, "family.txt")))
        self._match()
        self._boundaries()
        self._save_offers(later)

    def _match(self) -> None:
        rows: dict[tuple[str, str], list[float]] = defaultdict(list)
        with open(os.path.join(self.path, "churn_events.csv"), newline="") as f:
            for otid, kind, at in csv.reader(f):
                rows[(otid, kind)].append(float(at))
        for found in rows.values():
            found.sort()
        # Changes newest first; rows of one key in detection order. A row logged at D stands for
        # the latest change of its kind before D: matched oldest first, a change churnwatch could
        # not see (one Apple never notified, undone before anything looked) took the row of the
        # next one and made that one look never logged.
        used: dict[tuple[str, str], set[int]] = defaultdict(set)
        for c in sorted(self.changes, key=lambda c: c.t, reverse=True):
            key = (c.otid, c.kind)
            found, taken = rows.get(key, ()), used[key]
            i = bisect.bisect_left(found, c.t - TOLERANCE)
            while i < len(found) and i in taken:
                i += 1
            if i < len(found):
                c.at = found[i]
                taken.add(i)
        # Rows of the nights and syncs after night 0 (a run stamps detected_at its --as-of plus
        # the time it has run, so night 0's rows come a little after FROM).
        as_ofs = sorted({parse(line.split()[0]) for line in _lines(os.path.join(self.path, "processes.txt"))})
        after = as_ofs[1] - TOLERANCE if len(as_ofs) > 1 else self.lo
        later_rows = sum(at >= after for found in rows.values() for at in found)
        self.unmatched = later_rows - sum(c.at is not None and c.at >= after for c in self.changes)

    def _boundaries(self) -> None:
        """The safety net's deadline of a change Apple never notified: its next window."""
        ends: dict[str, list[float]] = defaultdict(list)
        for c in self.changes:
            if c.kind in ("renewed", "expired"):
                ends[c.otid].append(c.t)
        for c in self.changes:
            if c.notified:
                continue
            if c.kind in BOUNDARY_KINDS:
                c.boundary = c.t
            else:
                times = ends.get(c.otid, [])
                i = bisect.bisect_right(times, c.t)
                c.boundary = times[i] if i < len(times) else None

    def _save_offers(self, later: list[Change]) -> None:
        """Which changes count for the save offer, and when their entry became claimable."""
        # A process (run or sync) per line: its --as-of and its wall-clock span, in which the
        # database stamped created_at on the entries it made.
        procs = sorted((float(start) / 1e6, float(end) / 1e6, parse(as_of))
                       for as_of, start, end in (line.split() for line in _lines(os.path.join(self.path, "processes.txt"))))
        starts = [p[0] for p in procs]
        entries: dict[str, list[float]] = defaultdict(list)
        self.unplaced = 0
        for otid, not_before, created in _rows(os.path.join(self.path, "save_offers.csv")):
            i = bisect.bisect_right(starts, float(created)) - 1
            if i >= 0 and float(created) <= procs[i][1]:
                entries[otid].append(max(float(not_before), procs[i][2]))
            else:  # made outside any process this bench started: its not_before stands
                self.unplaced += 1
                entries[otid].append(float(not_before))
        for times in entries.values():
            times.sort()
        self.save_entries = entries
        gone: dict[str, list[float]] = defaultdict(list)
        for c in later:
            if c.kind in RISK_GONE:
                gone[c.otid].append(c.t)
        at_risk = set(_lines(os.path.join(self.path, "at_risk_before.txt")))
        self.family_excluded = self.already_at_risk = 0
        for c in self.changes:
            if c.kind not in SAVE_RISKS or not c.notified:
                continue
            if c.otid in self.family:
                self.family_excluded += 1
                continue
            if f"{c.otid} {round(c.t * 1000)}" in at_risk:
                self.already_at_risk += 1
                continue
            times = gone.get(c.otid, [])
            i = bisect.bisect_right(times, c.t)
            if i < len(times) and times[i] <= c.t + RISK_GONE_WITHIN:
                continue
            c.save = True
            times = entries.get(c.otid, [])
            i = bisect.bisect_left(times, c.t - TOLERANCE)
            c.save_at = times[i] if i < len(times) else None

    @property
    def label(self) -> str:
        return self.meta["label"]

    def notified(self) -> list[Change]:
        return [c for c in self.changes if c.notified]

    def recall_24h(self) -> float:
        n = self.notified()
        return sum(c.latency() <= DAY for c in n) / len(n) if n else math.nan

    def never(self) -> int:
        return sum(c.at is None for c in self.notified())

    def misses(self, within: float) -> None:
        """The run's misses on stderr."""
        tag = f"bench_detect{self.label}"
        late = [c for c in self.notified() if c.latency() > within]
        _report(tag, f"notified changes not logged within {_span(within)}", late, self,
                lambda c: "never" if c.at is None else f"logged {iso(c.at)} ({_span(c.at - c.t)} later)")
        due = [c for c in self.changes if not c.notified and c.boundary is not None and c.boundary + DAY <= self.hi]
        missed = [c for c in due if c.at is None or c.at > c.boundary + DAY]
        _report(tag, "unnotified changes not logged by their next window", missed, self,
                lambda c: f"window {iso(c.boundary)}, " + ("never" if c.at is None else f"logged {iso(c.at)}"))
        if self.meta.get("syncs"):
            slow = [c for c in self.changes if c.save and (c.save_at is None or c.save_at - c.t > 1200)]
            _report(tag, "save-offer changes without a save_offer entry within 20 minutes", slow, self,
                    lambda c: ("no entry" if c.save_at is None else f"entry from {iso(c.save_at)}")
                    + (f", change logged {iso(c.at)}" if c.at is not None else ", change never logged")
                    + _earlier_entry(self, c))


def _earlier_entry(run: Run, c: Change) -> str:
    """A save_offer entry of the same subscription made before the change (one per period)."""
    times = run.save_entries.get(c.otid, [])
    i = bisect.bisect_left(times, c.t - TOLERANCE)
    return f", an earlier save_offer entry from {iso(times[i - 1])}" if i else ""


def _rows(path: str):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [row for row in csv.reader(f) if row]


def _lines(path: str) -> list[str]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def _span(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.0f} h"


def _report(tag: str, what: str, changes: list[Change], run: Run, detail) -> None:
    if not changes:
        return
    for c in changes[:SHOW]:
        print(f"{tag}: {what}: {c.otid} ({run.env.get(c.otid, '?')}) {c.kind} at {iso(c.t)}: {detail(c)}",
              file=sys.stderr)
    kinds = Counter(c.kind for c in changes)
    envs = Counter(run.env.get(c.otid, "?") for c in changes)
    print(f"{tag}: {len(changes)} {what}"
          + (f" (the first {SHOW} above)" if len(changes) > SHOW else "")
          + ": " + ", ".join(f"{k} {n}" for k, n in envs.most_common())
          + "; " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()), file=sys.stderr)


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.4f}" if whole else "nan"


def _percentile(values: list[float], p: float) -> float:
    """Nearest rank; inf when the rank falls among the never-detected."""
    if not values:
        return math.nan
    values = sorted(values)
    return values[max(0, math.ceil(p * len(values)) - 1)]


def _worst(recalls) -> str:
    recalls = [x for x in recalls if not math.isnan(x)]
    return f"{min(recalls):.4f}" if recalls else "nan"


def _minutes(seconds: float) -> str:
    return "inf" if math.isinf(seconds) else "nan" if math.isnan(seconds) else f"{seconds / 60:.1f}"


def _calls(runs: list[Run]) -> str:
    nights = sum(r.meta["subscribers"] * r.meta["nights"] for r in runs)
    return f"{sum(r.meta['calls'] for r in runs) / nights:.4f}" if nights else "nan"


def keys_run(s: str, runs: list[Run]) -> None:
    (r,) = runs
    print(f"notified_recall_24h{s}={_worst([r.recall_24h()])}")
    print(f"notified_never{s}={r.never()}")
    print(f"coverage_24h{s}={_share(sum(c.latency() <= DAY for c in r.changes), len(r.changes))}")
    print(f"detect_true_events{s}={len(r.changes)}")
    print(f"logged_unmatched{s}={r.unmatched}")
    print(f"calls_per_sub_night{s}={_calls(runs)}")


def keys_pool(s: str, runs: list[Run]) -> None:
    changes = [c for r in runs for c in r.changes]
    print(f"notified_recall_24h{s}={_worst(r.recall_24h() for r in runs)}")
    print(f"notified_never{s}={sum(r.never() for r in runs)}")
    within, total = Counter(), Counter()
    for c in changes:
        total[c.kind] += 1
        within[c.kind] += c.latency() <= DAY
    print(f"coverage_24h{s}={_share(sum(within.values()), len(changes))}")
    for kind in KINDS:
        print(f"coverage_24h_{kind}{s}={_share(within[kind], total[kind])}")
    print(f"detected_share{s}={_share(sum(c.at is not None for c in changes), len(changes))}")
    print(f"calls_per_sub_night{s}={_calls(runs)}")
    print(f"detect_true_events{s}={len(changes)}")
    print(f"logged_unmatched{s}={sum(r.unmatched for r in runs)}")
    notified = [c for c in changes if c.notified]
    print(f"coverage_24h_notified{s}={_share(sum(c.latency() <= DAY for c in notified), len(notified))}")
    silent = [c for c in changes if not c.notified]
    print(f"unnotified_events{s}={len(silent)}")
    print(f"unnotified_detected_share{s}={_share(sum(c.at is not None for c in silent), len(silent))}")
    due = [(r, c) for r in runs for c in r.changes
           if not c.notified and c.boundary is not None and c.boundary + DAY <= r.hi]
    print(f"unnotified_due_by_next_window{s}={len(due)}")
    print(f"unnotified_caught_by_next_window{s}="
          + _share(sum(c.at is not None and c.at <= c.boundary + DAY for _, c in due), len(due)))


def keys_sync(s: str, runs: list[Run]) -> None:
    print(f"notified_recall_24h{s}={_worst(r.recall_24h() for r in runs)}")
    print(f"notified_never{s}={sum(r.never() for r in runs)}")
    for p in (50, 99):
        worst = max((_percentile([c.latency() for c in r.notified()], p / 100) for r in runs), default=math.nan)
        print(f"notified_latency_p{p}_minutes{s}={_minutes(worst)}")
    saves = [[c.save_at - c.t if c.save_at is not None else math.inf for c in r.changes if c.save] for r in runs]
    print(f"save_offer_changes{s}={sum(map(len, saves))}")
    print(f"save_offer_never{s}={sum(math.isinf(x) for lat in saves for x in lat)}")
    print(f"save_offer_family_shared{s}={sum(r.family_excluded for r in runs)}")
    print(f"save_offer_already_at_risk{s}={sum(r.already_at_risk for r in runs)}")
    for p in (50, 99):
        worst = max((_percentile(lat, p / 100) for lat in saves if lat), default=math.nan)
        print(f"save_offer_latency_p{p}_minutes{s}={_minutes(worst)}")
    print(f"calls_per_sub_night{s}={_calls(runs)}")
    for r in runs:
        if r.unplaced:
            print(f"bench_detect{r.label}: {r.unplaced} save_offer entries made outside the bench's runs and syncs "
                  "(their not_before taken as when they became claimable)", file=sys.stderr)
    syncs = sum(r.meta.get("syncs", 0) for r in runs)
    print(f"syncs{s}={syncs}")
    if syncs:
        print(f"sync_seconds_mean{s}={sum(r.meta['sync_seconds_total'] for r in runs) / syncs:.3f}")
        print(f"sync_seconds_max{s}={max(r.meta['sync_seconds_max'] for r in runs):.3f}")


def at_risk_before(sim_url: str, path: str) -> None:
    """Writes at_risk_before.txt: the save-offer changes whose subscription the simulator's
    truth had in a save-offer segment already, a millisecond before the change."""
    stale = os.path.join(path, "at_risk_before.txt")
    if os.path.exists(stale):
        os.remove(stale)
    run = Run(path)
    found = []
    for c in run.changes:
        if not c.save:
            continue
        ms = round(c.t * 1000)
        at = datetime.datetime.fromtimestamp((ms - 1) / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        with urllib.request.urlopen(f"{sim_url}/_sim/truth?at={at}") as r:
            truth = json.load(r)["subscriptions"]
        if any(s["original_transaction_id"] == c.otid and s["segment"] in SAVE_SEGMENTS for s in truth):
            found.append(f"{c.otid} {ms}\n")
    with open(os.path.join(path, "at_risk_before.txt"), "w") as f:
        f.writelines(found)


def main(argv: list[str]) -> int:
    args = argv[1:]
    if len(args) == 3 and args[0] == "at-risk":
        at_risk_before(args[1], args[2])
        return 0
    misses = bool(args) and args[0] == "--misses"
    if misses:
        args = args[1:]
    if len(args) < 3 or args[0] not in ("run", "pool", "sync") or (args[0] == "run" and len(args) != 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    what, suffix, dirs = args[0], args[1], args[2:]
    runs = [Run(d) for d in dirs]
    if misses:
        for r in runs:
            r.misses(1200 if what == "sync" else DAY)
    {"run": keys_run, "pool": keys_pool, "sync": keys_sync}[what](suffix, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
