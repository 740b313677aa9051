#!/usr/bin/env python3
"""Writes benches/RESULTS.md and benches/results.svg from one benchmark run.

    cargo bench --bench pool          # writes target/criterion/
    python3 benches/report.py         # writes benches/RESULTS.md and benches/results.svg

It reads criterion's estimates (target/criterion/**/new/estimates.json) and
the record `cargo bench --bench pool` leaves beside them (the commit, the
start time, the arguments), and, when `go` is installed, runs Go's sync.Pool
benchmarks (benches/go) in the same sitting, so that every number in the
file comes from one machine in one run. Results from groups of other benches
(benches/workers.rs, benches/resources.rs) are rendered as generic tables
with their own dates; fragments in benches/results/*.md are included as they
are.

The chart needs matplotlib; the script installs it with pip if it is
missing (or into a virtual environment under target/), and writes the
tables without the chart if neither works.

Options: --no-go skips Go; --no-chart skips the chart.
"""

import datetime
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RESULTS_MD = os.path.join(HERE, "RESULTS.md")
CHART = os.path.join(HERE, "results.svg")
FRAGMENTS = os.path.join(HERE, "results")
RUN_RECORD = "stashpool-pool-run.json"
PAIRS = "stashpool-pool-pairs.json"
COMMAND = "cargo bench --bench pool && python3 benches/report.py"

FLOOR = "thread_local floor"
CHANNEL_ALONE = "channel alone"
# Not peers: the floors, and no pool at all.
BASELINES = {FLOOR, CHANNEL_ALONE, "plain allocation"}
# How far apart a floor's bests in the samples of different benchmarks may
# be for their ratios to it to compare them (`Report.steady_floor`).
FLOOR_SPREAD = 1.5
STASH_WITH = "stashpool with"
STASH_GET = "stashpool get"
HELD = 100  # buffers per overflow iteration (benches/pool.rs)
GO_REPS = 5  # interleaved runs of the Go benchmarks; the best is kept


# === reading criterion ===


def criterion_home():
    """Where criterion wrote: its own rule, short of asking cargo metadata."""
    if os.environ.get("CRITERION_HOME"):
        return os.environ["CRITERION_HOME"]
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    return os.path.join(target, "criterion")


class Result:
    """One criterion benchmark: its best sample and criterion's median (with
    its 95% confidence interval), in ns per iteration, and how many elements
    (operations over all threads) one iteration is.

    The tables lead with the best sample: interference from the rest of the
    machine only ever adds time, and on a shared machine the samples of a
    parallel workload fall into two modes (the threads had the cores, or
    they did not), where a median reports whichever mode was more common.
    """

    def __init__(self, group, name, best, median, low, high, elements, mtime):
        self.group, self.name = group, name
        self.ns, self.median, self.low, self.high = best, median, low, high
        self.elements = elements
        self.mtime = mtime
        self.iters = []  # criterion's iterations per sample
        # (partner, subject best, partner best) in ns per iteration, over
        # the same samples, when the bench recorded its partner.
        self.pair = None

    def paired(self):
        """This benchmark divided by its partner, timed in the same samples."""
        return self.pair[1] / self.pair[2] if self.pair else None

    def per_element(self):
        return self.ns / self.elements if self.elements else self.ns


def load(home):
    """{group: {name: Result}} for every benchmark under `home`."""
    groups = defaultdict(dict)
    for path in glob.glob(os.path.join(home, "**", "new", "estimates.json"), recursive=True):
        folder = os.path.dirname(path)
        try:
            with open(os.path.join(folder, "benchmark.json")) as f:
                bench = json.load(f)
            with open(path) as f:
                median = json.load(f)["median"]
            with open(os.path.join(folder, "sample.json")) as f:
                sample = json.load(f)
            best = min(t / i for t, i in zip(sample["times"], sample["iters"]))
        except (OSError, KeyError, ValueError, ZeroDivisionError):
            continue
        name = bench["function_id"] or ""
        if bench.get("value_str"):
            name = f"{name}/{bench['value_str']}" if name else bench["value_str"]
        elements = (bench.get("throughput") or {}).get("Elements")
        interval = median["confidence_interval"]
        groups[bench["group_id"]][name] = Result(
            bench["group_id"],
            name,
            best,
            median["point_estimate"],
            interval["lower_bound"],
            interval["upper_bound"],
            elements,
            os.path.getmtime(path),
        )
        groups[bench["group_id"]][name].iters = sample["iters"]
    return groups


def load_pairs(home, groups):
    """Attaches to each timed benchmark its partner's best over the same
    samples. The bench logs every call, warm-up included; criterion's samples
    are the last calls, one each, which the iteration counts confirm."""
    try:
        with open(os.path.join(home, PAIRS)) as f:
            entries = json.load(f)
    except (OSError, ValueError):
        return
    for entry in entries:
        result = groups.get(entry["group"], {}).get(entry["name"])
        if not result or not result.iters:
            continue
        # Each call: iterations criterion asked for, iterations run (never
        # fewer than a minimum rep needs), subject best, partner best.
        calls = entry["calls"][-len(result.iters) :]
        if [c[0] for c in calls] != [int(i) for i in result.iters]:
            continue  # not the run criterion's results came from
        subject = min(s / n for _, n, s, _ in calls)
        result.pair = (entry["partner"], subject, min(p / n for _, n, _, p in calls))
        # The same best as criterion's samples, without their rounding to
        # whole nanoseconds per sample.
        result.ns = subject


def bench_of_groups():
    """Which bench target defines each group name (or prefix), read from
    the benches' sources: {prefix: bench name}."""
    owners = {}
    for path in glob.glob(os.path.join(HERE, "*.rs")):
        bench = os.path.splitext(os.path.basename(path))[0]
        with open(path) as f:
            source = f.read()
        for match in re.finditer(r'_group\((?:\s*\w+\s*,)?\s*&?(?:format!\(\s*)?"([^"]*)"', source):
            owners[match.group(1).split("{")[0]] = bench
    return owners


def owner_of(group, owners):
    best = max((p for p in owners if group.startswith(p)), key=len, default=None)
    return owners.get(best)


def bench_command(bench):
    """The command that runs one bench target (the benches' package turns on
    every feature of stashpool that they need)."""
    return f"cargo bench --bench {bench}"


# === the machine and the run ===


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def first_line(*command, cwd=REPO):
    try:
        out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0] if out.returncode == 0 and lines else None


def utc(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC"
    )


# === Go ===


def run_go(cpus):
    """Go's sync.Pool benchmarks, best of GO_REPS interleaved runs:
    ({(name, procs): ns per op}, go version, command) or a reason string."""
    go = shutil.which("go")
    if not go:
        return "`go` is not installed (`apt-get install golang-go`), so Go was not measured"
    cpu_list = ",".join(str(n) for n in cpus)
    command = ["go", "test", "-run", "^$", "-bench", ".", "-benchtime", "100ms", "-cpu", cpu_list]
    best = {}
    for rep in range(GO_REPS):
        print(f"go: run {rep + 1} of {GO_REPS}: {' '.join(command)}", file=sys.stderr)
        try:
            out = subprocess.run(
                command, cwd=os.path.join(HERE, "go"), capture_output=True, text=True, timeout=600
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"`go test` failed: {err}"
        if out.returncode != 0:
            return f"`go test` failed: {(out.stderr or out.stdout).strip()[-500:]}"
        for line in out.stdout.splitlines():
            match = re.match(r"Benchmark(\w+?)(?:-(\d+))?\s+\d+\s+([\d.]+) ns/op", line)
            if match:
                key = (match.group(1), int(match.group(2) or 1))
                best[key] = min(best.get(key, float("inf")), float(match.group(3)))
    version = first_line("go", "version") or "go"
    return best, version, "cd benches/go && " + " ".join(
        f"'{a}'" if a == "^$" else a for a in command
    ) + f"  (best of {GO_REPS} runs)"


# === tables ===


def fmt_ns(ns):
    if ns is None:
        return ""
    if ns >= 100_000:
        return f"{ns / 1000:,.0f} µs"
    if ns >= 100:
        return f"{ns:,.0f} ns"
    return f"{ns:.1f} ns"


def fmt_ratio(value):
    return "" if value is None else f"{value:.2f}"


def md_table(header, rows, align):
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


class Report:
    def __init__(self, groups, record, go):
        self.groups, self.record = groups, record
        self.go = go if isinstance(go, tuple) else None
        self.go_missing = go if isinstance(go, str) else None
        self.cores = record.get("cores") or os.cpu_count()
        commit = record.get("commit", "unknown")
        self.commit = commit[:12] + (" with local changes" if record.get("dirty") else "")
        self.machine = f"{cpu_model()}, {os.cpu_count()} logical CPUs"
        self.when = utc(record["started"]) if record.get("started") else "unknown"
        args = " ".join(record.get("args", [])).replace(" --bench", "").replace("--bench", "")
        self.bench_command = "cargo bench --bench pool" + (f" -- {args.strip()}" if args.strip() else "")

    def caption(self):
        return (
            f"_commit `{self.commit}`, {self.when}, {self.machine}; "
            f"`{self.bench_command}` then `python3 benches/report.py`._"
        )

    def go_caption(self):
        return (
            f"_{self.go[1]}, same sitting as the commit above, {self.machine}; `{self.go[2]}`;"
            " each run is Go's own average over 100 ms, and the best run is kept._"
        )

    def get(self, group, name):
        return self.groups.get(group, {}).get(name)

    def per_op(self, group, name):
        """Best ns per element over all threads: per operation for hot and
        handoff, per buffer for overflow (its throughput counts buffers)."""
        result = self.get(group, name)
        return result.per_element() if result else None

    def go_ns(self, name, procs, per=1):
        if not self.go:
            return None
        ns = self.go[0].get((name, procs))
        return ns / per if ns is not None else None

    def steady_floor(self, rows):
        """Whether `rows` were each timed beside the same floor, and that
        floor's best in their samples varied by less than FLOOR_SPREAD: a
        floor that falls into different regimes in different samples (the
        handoff's channel, whose two threads either run in step or not) is
        no common yardstick, and its ratios would compare the regimes."""
        if not rows or not all(r.pair for r in rows) or len({r.pair[0] for r in rows}) != 1:
            return False
        floors = [r.pair[2] for r in rows]
        return max(floors) <= FLOOR_SPREAD * min(floors)

    def best_peer(self, group):
        """The fastest peer: by its ratio to the floor timed in the same
        samples when every peer has a steady one, else by its own best."""
        rows = [
            r
            for n, r in self.groups.get(group, {}).items()
            if n not in BASELINES and not n.startswith("stashpool")
        ]
        if self.steady_floor(rows):
            return min(rows, key=lambda r: r.paired())
        return min(rows, key=lambda r: r.ns, default=None)

    def peer_ratio(self, group, peer, stash):
        """The best peer divided by stashpool: through their ratios to the
        same floor when it was steady, else from their own bests."""
        mine = self.get(group, stash)
        if self.steady_floor([peer, mine]):
            return peer.paired() / mine.paired()
        return peer.ns / mine.ns

    def workloads(self):
        """(label, group, stashpool name, floor name, Go benchmark, Go procs, Go divisor)"""
        n = self.cores
        return [
            ("hot, 1 thread, `with`", "hot/1", STASH_WITH, FLOOR, "Hot1", 1, 1),
            ("hot, 1 thread, guard", "hot/1", STASH_GET, FLOOR, "Hot1", 1, 1),
            (f"hot, {n} threads, `with` (aggregate)", "hot/all", STASH_WITH, FLOOR, "HotAll", n, 1),
            (f"hot, {n} threads, guard (aggregate)", "hot/all", STASH_GET, FLOOR, "HotAll", n, 1),
            ("overflow, 1 thread, per buffer", "overflow/1", STASH_GET, FLOOR, "Overflow1", 1, HELD),
            (
                f"overflow, {n} threads, per buffer (aggregate)",
                "overflow/all",
                STASH_GET,
                FLOOR,
                "OverflowAll",
                n,
                HELD,
            ),
            ("handoff, per buffer", "handoff", STASH_GET, CHANNEL_ALONE, "Handoff", max(n, 2), 1),
        ]

    def against_floor(self, group, name, floor):
        """(this benchmark, its floor, the ratio) in ns per element: from the
        samples where the two alternated when the bench recorded them, else
        from each one's own best."""
        result, base = self.get(group, name), self.get(group, floor)
        if result is None:
            return None, None, None
        elements = result.elements or 1
        if result.pair and result.pair[0] == floor:
            _, mine, theirs = result.pair
            return mine / elements, theirs / elements, mine / theirs
        if base is None:
            return result.per_element(), None, None
        return result.per_element(), base.per_element(), result.ns / base.ns

    def summary(self):
        rows = []
        for label, group, stash, floor, go_name, procs, per in self.workloads():
            mine, base, ratio = self.against_floor(group, stash, floor)
            if mine is None:
                continue
            peer = self.best_peer(group)
            go = self.go_ns(go_name, procs, per)
            rows.append(
                [
                    label,
                    fmt_ns(mine),
                    f"{fmt_ns(base)} ({floor})" if floor != FLOOR else fmt_ns(base),
                    fmt_ratio(ratio),
                    f"{peer.name} {fmt_ns(peer.per_element())}" if peer else "",
                    fmt_ratio(self.peer_ratio(group, peer, stash)) if peer else "",
                    fmt_ns(go),
                    fmt_ratio(go / mine if go else None),
                ]
            )
        header = [
            "workload",
            "stashpool",
            "floor, same samples",
            "stashpool ÷ floor",
            "best peer",
            "peer ÷ stashpool",
            "Go `sync.Pool`",
            "Go ÷ stashpool",
        ]
        return md_table(header, rows, ["---"] + ["---:"] * 3 + ["---", "---:", "---:", "---:"])

    def targets(self):
        """The design's targets, each with what this run measured."""
        rows = []

        def row(target, measured, met):
            verdict = "not measured" if met is None else ("met" if met else "**not met**")
            rows.append([target, measured, verdict])

        for label, group, stash, floor, go_name, procs, per in self.workloads():
            mine, _, ratio = self.against_floor(group, stash, floor)
            if group == "handoff":
                peer = self.best_peer(group)
                ahead = self.peer_ratio(group, peer, stash) if mine and peer else None
                row(
                    "handoff: ahead of every peer",
                    f"fastest peer ({peer.name}) ÷ stashpool: {ahead:.2f}" if ahead else "",
                    ahead > 1 if ahead else None,
                )
            else:
                bound = 1.25 if group.startswith("hot") else 1.5
                row(
                    f"{label}: within {bound}x the floor",
                    f"{ratio:.2f}x" if ratio else "",
                    ratio <= bound if ratio else None,
                )
            go = self.go_ns(go_name, procs, per)
            row(
                f"{label}: ahead of Go's `sync.Pool`",
                f"{fmt_ns(mine)} against {fmt_ns(go)}" if mine and go else "",
                mine < go if mine and go else None,
            )
        lines = self.scaling_points()
        for series in (STASH_WITH, STASH_GET):
            points = dict(lines.get(series, []))
            for threads in sorted(points):
                if threads == 1 or 1 not in points:
                    continue
                ratio = points[threads] / (threads * points[1])
                row(
                    f"scaling, {series}, {threads} threads: at least 0.9 x {threads} of one thread",
                    f"{ratio:.2f} x {threads}",
                    ratio >= 0.9,
                )
        return md_table(["target", "this run", ""], rows, ["---", "---:", "---"])

    def scaling_points(self):
        """{series: [(threads, million ops per second)]}"""
        lines = defaultdict(list)
        for name, result in self.groups.get("scaling", {}).items():
            series, _, threads = name.rpartition("/")
            if threads.isdigit():
                lines[series].append((int(threads), 1e3 / result.per_element()))
        if self.go:
            for (name, procs), ns in self.go[0].items():
                if name == "HotAll":
                    lines["Go sync.Pool"].append((procs, 1e3 / ns))
        return {k: sorted(v) for k, v in lines.items()}

    def scaling(self):
        lines = self.scaling_points()
        if not lines:
            return None
        series = [s for s in (STASH_WITH, STASH_GET, FLOOR, "Go sync.Pool") if s in lines]
        threads = sorted({t for pts in lines.values() for t, _ in pts})
        rows = []
        for t in threads:
            row = [str(t)]
            for s in series:
                points = dict(lines[s])
                if t in points and 1 in points:
                    row.append(f"{points[t]:.0f} ({points[t] / (t * points[1]):.2f})")
                else:
                    row.append(f"{points[t]:.0f}" if t in points else "")
            rows.append(row)
        header = ["threads"] + [f"{s}: Mops/s (÷ N × 1 thread)" for s in series]
        return md_table(header, rows, ["---:"] * len(header))

    def group_table(self, group, floor=None):
        rows = self.groups[group]
        base = rows.get(floor) if floor else None
        ordered = sorted(rows.values(), key=lambda r: r.ns)
        has_elements = any(r.elements for r in ordered)
        header = ["benchmark", "best", "median [95% CI]"]
        if has_elements:
            header.append("best per element")
        paired = any(r.pair for r in ordered)
        base = None if paired else base
        if base:
            header.append(f"best ÷ {floor}")
        if paired:
            header.append("÷ its partner, same samples")
        out = []
        for r in ordered:
            row = [r.name, fmt_ns(r.ns), f"{fmt_ns(r.median)} [{fmt_ns(r.low)}, {fmt_ns(r.high)}]"]
            if has_elements:
                row.append(fmt_ns(r.per_element()))
            if base:
                row.append(fmt_ratio(r.ns / base.ns))
            if paired:
                row.append(f"{fmt_ratio(r.paired())} ({r.pair[0]})" if r.pair else "")
            out.append(row)
        return md_table(header, out, ["---"] + ["---:"] * (len(header) - 1))


def write_markdown(report, pool_groups, stale, other_groups, owners, chart_note):
    cores = report.cores
    lines = [
        "# stashpool benchmark results",
        "",
        "Generated by `benches/report.py` from one run; do not edit by hand. To reproduce from a",
        "clean clone:",
        "",
        "```sh",
        "cargo bench --bench pool      # a few minutes on 2 cores",
        "python3 benches/report.py     # this file and benches/results.svg (runs Go if installed)",
        "```",
        "",
        f"- commit: `{report.commit}`",
        f"- measured: {report.when} (the start of `cargo bench`)",
        f"- machine: {report.machine}, Linux {platform.release()}; load average when the run"
        f" started: {report.record.get('load', 'not recorded')} (1, 5, 15 minutes)",
        f"- toolchains: {report.record.get('rustc', 'rustc unknown')}; "
        + (report.go[1] if report.go else report.go_missing),
        f"- command: `{report.bench_command}`, then `python3 benches/report.py`",
        "",
        "How it is timed: every parallel workload starts its threads together from a spinning",
        "start, each thread stamps its own start and end, and the time is the last end minus the",
        "first start; no run is shorter than 2 ms, so the start is a rounding error. A criterion",
        f"sample is the best of {report.record.get('reps', 3)} runs alternated with the",
        "workload's floor (the floor's own entry alternates with `stashpool get`), and the",
        "floor's best in those same samples is kept too: every \"÷ floor\" in the summary and",
        "\"÷ its partner\" in the full tables divides by a floor timed at the same moments, so a",
        "busy machine slows both sides alike. A peer is compared with stashpool through those ratios",
        f"when the floor's bests in their samples are within {FLOOR_SPREAD}x of each other, else",
        "through their own bests (the handoff's channel alone falls into two regimes, its threads",
        "in step or not, so its ratios would compare the regimes). The tables lead with the best sample (interference only",
        "ever adds time, and on a shared machine the samples of a parallel workload split between",
        "\"the threads had the cores\" and \"they did not\"), with criterion's median and its 95%",
        "confidence interval beside it in the full tables. Peers run in the same process, so read",
        "the numbers as ratios within one table: a shared machine moves absolute times from run",
        "to run. One caveat for peers built on shared state (a lock, a shared queue): a run",
        "whose threads were not all on a core at once contends less, so their multi-thread",
        "numbers can read better than true contention; they can never read better than the",
        "same operations run one thread after another.",
        "",
        "The floors: `thread_local floor` is a bare `thread_local!` `RefCell<Vec<Vec<u8>>>` (a pop",
        "and a push, no guard); `channel alone` is handoff's bounded channel moving an empty",
        "`Vec<u8>`, with no pool. `plain allocation` makes a new buffer every time.",
        "",
        "## Summary",
        "",
        "Times per operation (aggregate over all threads for the multi-thread rows: the wall time",
        "divided by the operations of every thread). The best peer is the fastest Rust pool crate",
        "or `Mutex<Vec>` in the same group.",
        "",
        report.summary(),
        "",
        report.caption(),
    ]
    if report.go:
        lines += ["", "Go columns: " + report.go_caption()]
    else:
        lines += ["", f"Go columns: empty, {report.go_missing}."]
    lines += ["", chart_note, ""]

    lines += [
        "## Targets",
        "",
        "The design's targets (DESIGN.md, \"What fast means here\"), against this run:",
        "",
        report.targets(),
        "",
        report.caption(),
        "",
    ]

    lines += ["## Scaling", ""]
    scaling = report.scaling()
    if scaling:
        lines += [
            "`hot` (get, write, return) on 1, 2, 4, ... threads up to the machine's cores:",
            "million operations per second over all threads, and in brackets that throughput",
            "divided by N times the one-thread throughput (1.00 is perfect scaling).",
            "",
            scaling,
            "",
            report.caption(),
            "",
        ]
        if cores <= 2:
            lines += [
                f"This machine has {cores} cores, so the curve stops at {cores} threads. No bigger",
                "machine was measured, and nothing here says how stashpool scales past it; run",
                "the same two commands on one to extend the curve.",
                "",
            ]
    else:
        lines += ["No `scaling` results in this run.", ""]

    if report.go:
        lines += ["## Go's `sync.Pool`", "", "ns per operation (`-N`: GOMAXPROCS), best of the runs:", ""]
        rows = [
            [f"{name}" + (f"-{procs}" if procs > 1 else ""), fmt_ns(ns)]
            for (name, procs), ns in sorted(report.go[0].items())
        ]
        lines += [md_table(["benchmark", "ns/op"], rows, ["---", "---:"]), "", report.go_caption(), ""]

    lines += ["## Every group of `cargo bench --bench pool`", ""]
    for group in pool_groups:
        floor = CHANNEL_ALONE if group == "handoff" else FLOOR
        floor = floor if floor in report.groups[group] else None
        lines += [f"### {group}", "", report.group_table(group, floor), "", report.caption(), ""]
    if stale:
        lines += [
            "Left out, because they are older than this run (a filtered `cargo bench`): "
            + ", ".join(f"`{g}`" for g in stale)
            + ".",
            "",
        ]

    if other_groups:
        lines += [
            "## Other benches",
            "",
            "Groups that other bench targets left in `target/criterion`, each from its own run:",
            "the date is when that group was measured, and its commit was not recorded.",
            "",
        ]
        for group in other_groups:
            bench = owner_of(group, owners)
            command = bench_command(bench) if bench else "an unknown bench"
            when = utc(max(r.mtime for r in report.groups[group].values()))
            lines += [
                f"### {group}",
                "",
                report.group_table(group),
                "",
                f"_{when}, {report.machine}; `{command}` then `python3 benches/report.py`._",
                "",
            ]

    fragments = sorted(glob.glob(os.path.join(FRAGMENTS, "*.md")))
    for path in fragments:
        with open(path) as f:
            text = f.read().rstrip("\n")
        lines += [f"<!-- included verbatim from benches/results/{os.path.basename(path)} -->", text, ""]

    with open(RESULTS_MD, "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")


# === the chart ===


def import_matplotlib():
    """matplotlib, installed with pip if missing; None (and a reason) if not."""
    try:
        import matplotlib  # noqa: F401

        return None
    except ImportError:
        pass
    attempts = [
        [sys.executable, "-m", "pip", "install", "--quiet", "matplotlib"],
        [sys.executable, "-m", "pip", "install", "--quiet", "--break-system-packages", "matplotlib"],
    ]
    for command in attempts:
        print("installing matplotlib: " + " ".join(command), file=sys.stderr)
        if subprocess.run(command).returncode == 0:
            import importlib

            importlib.invalidate_caches()
            try:
                import matplotlib  # noqa: F401

                return None
            except ImportError:
                continue
    # A virtual environment: re-run this script inside it.
    venv = os.path.join(REPO, "target", "report-venv")
    python = os.path.join(venv, "bin", "python")
    if os.environ.get("STASHPOOL_REPORT_VENV"):
        return "matplotlib could not be installed, even in a virtual environment"
    print(f"installing matplotlib into {venv}", file=sys.stderr)
    if (
        subprocess.run([sys.executable, "-m", "venv", venv]).returncode == 0
        and subprocess.run([python, "-m", "pip", "install", "--quiet", "matplotlib"]).returncode == 0
    ):
        env = dict(os.environ, STASHPOOL_REPORT_VENV="1")
        sys.exit(subprocess.run([python, os.path.abspath(__file__)] + sys.argv[1:], env=env).returncode)
    return "matplotlib is not installed and pip could not install it (`pip install matplotlib`)"


def draw_chart(report):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "stashpool", "font.size": 9})
    fig, (bars, curve) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})

    # Left: ns per operation by workload, log scale.
    series = ["stashpool guard", "stashpool `with`", "floor", "best peer", "Go sync.Pool"]
    colors = ["#1f77b4", "#6baed6", "#7f7f7f", "#ff7f0e", "#2ca02c"]
    labels, values = [], defaultdict(list)
    seen = set()
    for label, group, stash, floor, go_name, procs, per in report.workloads():
        if stash == STASH_WITH or (group, stash) in seen or report.get(group, stash) is None:
            continue
        seen.add((group, stash))
        short = {"hot/1": "hot\n1 thread", "hot/all": f"hot\n{report.cores} threads"}.get(group)
        short = short or {
            "overflow/1": "overflow\n1 thread",
            "overflow/all": f"overflow\n{report.cores} threads",
            "handoff": "handoff",
        }[group]
        labels.append(short)
        peer = report.best_peer(group)
        values["stashpool guard"].append(report.per_op(group, stash))
        values["stashpool `with`"].append(report.per_op(group, STASH_WITH))
        # The floor as timed in the same samples as the guard.
        values["floor"].append(report.against_floor(group, stash, floor)[1])
        values["best peer"].append(peer.per_element() if peer else None)
        values["Go sync.Pool"].append(report.go_ns(go_name, procs, per))
    width = 0.16
    for i, (name, color) in enumerate(zip(series, colors)):
        xs = [j + (i - 2) * width for j in range(len(labels))]
        ys = values[name]
        points = [(x, y) for x, y in zip(xs, ys) if y]
        if points:
            bars.bar([x for x, _ in points], [y for _, y in points], width, label=name, color=color)
    bars.set_xticks(range(len(labels)))
    bars.set_xticklabels(labels)
    bars.set_yscale("log")
    bars.set_ylabel("ns per operation, best sample (aggregate; log scale)")
    bars.set_title("cost per operation, lower is better")
    bars.legend(fontsize=8, frameon=False)
    bars.grid(axis="y", which="both", alpha=0.3)
    bars.text(
        0.0,
        -0.2,
        "floor: a bare thread_local! stash (handoff: the channel alone), timed in the same samples as the guard."
        " Best peer: the fastest Rust pool in the group.",
        transform=bars.transAxes,
        fontsize=7,
    )

    # Right: scaling.
    lines = report.scaling_points()
    styles = {
        STASH_WITH: ("#1f77b4", "o"),
        STASH_GET: ("#6baed6", "s"),
        FLOOR: ("#7f7f7f", "^"),
        "Go sync.Pool": ("#2ca02c", "D"),
    }
    threads = sorted({t for pts in lines.values() for t, _ in pts})
    for name, (color, marker) in styles.items():
        if name in lines:
            xs, ys = zip(*lines[name])
            curve.plot(xs, ys, marker=marker, color=color, label=name)
    one = dict(lines.get(STASH_WITH, []))
    if 1 in one and threads:
        curve.plot(threads, [one[1] * t for t in threads], "--", color="#bbbbbb", label="N × one thread (`with`)")
    curve.set_xscale("log", base=2)
    curve.set_xticks(threads or [1])
    curve.set_xticklabels([str(t) for t in threads] or ["1"])
    curve.set_xlabel("threads" + (f" (this machine has {report.cores} cores)" if report.cores <= 2 else ""))
    curve.set_ylabel("million operations per second, all threads")
    curve.set_title("hot: throughput by threads, higher is better")
    curve.set_ylim(bottom=0)
    curve.legend(fontsize=8, frameon=False)
    curve.grid(alpha=0.3)

    fig.suptitle(f"stashpool {report.commit} — {report.machine} — {report.when}", fontsize=9)
    fig.tight_layout()
    fig.savefig(CHART, metadata={"Date": None})
    plt.close(fig)


# === main ===


def main():
    args = set(sys.argv[1:])
    home = criterion_home()
    record_path = os.path.join(home, RUN_RECORD)
    if not os.path.exists(record_path):
        sys.exit(f"no record of a run in {home}: run `cargo bench --bench pool` first")
    with open(record_path) as f:
        record = json.load(f)
    groups = load(home)
    load_pairs(home, groups)

    # The pool bench's groups from this run; anything older is stale.
    started = record.get("started", 0)
    pool_groups, stale = [], []
    for group in record.get("groups", []):
        if group not in groups:
            continue
        # Results this run did not write (a filtered run, a renamed
        # benchmark) are older than its start.
        fresh = {n: r for n, r in groups[group].items() if r.mtime + 1 >= started}
        if fresh:
            groups[group] = fresh
            pool_groups.append(group)
        else:
            stale.append(group)
            del groups[group]
    owners = bench_of_groups()
    other_groups = sorted(
        g for g in groups if g not in record.get("groups", []) and owner_of(g, owners) != "pool"
    )
    if not pool_groups:
        sys.exit("the last `cargo bench --bench pool` wrote no results: run it again")

    cores = record.get("cores") or os.cpu_count()
    # Go at the thread counts of `scaling`, and at 2 for handoff's two goroutines.
    cpus = sorted({1 << k for k in range(cores.bit_length()) if (1 << k) < cores} | {cores, max(cores, 2)})
    go = run_go(cpus) if "--no-go" not in args else "Go was skipped (`--no-go`)"
    report = Report(groups, record, go)

    chart_note = ""
    if "--no-chart" in args:
        chart_note = "No chart: `--no-chart`."
    else:
        missing = import_matplotlib()
        if missing:
            chart_note = f"No chart: {missing}."
            print(chart_note, file=sys.stderr)
        else:
            draw_chart(report)
            chart_note = "![cost per operation by workload, and throughput by threads](results.svg)"
            print(f"wrote {os.path.relpath(CHART)}", file=sys.stderr)

    write_markdown(report, pool_groups, stale, other_groups, owners, chart_note)
    print(f"wrote {os.path.relpath(RESULTS_MD)}", file=sys.stderr)


if __name__ == "__main__":
    main()
