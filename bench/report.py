"""Reads the raw outputs scripts/bench left in a results directory and prints the table of
docs/BENCHMARKS.md: figure, value, reference, ratio, target, met/missed.

    python3 bench/report.py RESULTS_DIR

Inputs (each optional; a missing or failed measurement becomes a row saying so):
  machine.txt                     date, CPU, load, server version
  figure1.json, figure4.json, figure8.json
                                  Google Benchmark JSON (medians of the repetitions if any)
  figure7-dlock-<peer>-<settings>.json  dlock's woven cycle measured just before that peer
  figure2-<threads>.txt, figure3.txt, figure5.txt, figure6.txt, figure7-<peer>-<settings>.txt,
  figure12-handoff.txt, figure13.txt, figure13-handoff.txt, figure14.txt, figure14-handoff.txt,
  figure15.txt
                                  program output whose RESULT lines carry the figures
"""
import json
import os
import sys


def read(results, name):
    """The text of a result file, or None if it is missing; 'FAILED' marks a failed run."""
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def result_line(text, kind):
    """The key=value pairs of the last 'RESULT <kind> ...' line, or None."""
    if text is None:
        return None
    found = None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "RESULT" and parts[1] == kind:
            found = dict(part.split("=", 1) for part in parts[2:] if "=" in part)
    return found


def benchmark_us(results, name):
    """Real time per iteration in microseconds of each benchmark in a JSON file: the median
    aggregate when there were repetitions, else the single run."""
    text = read(results, name)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    times, medians = {}, {}
    for b in data.get("benchmarks", []):
        if b.get("error_occurred"):
            continue
        value = b["real_time"] * scale[b.get("time_unit", "ns")]
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[b["run_name"]] = value
        else:
            times.setdefault(b.get("run_name", b["name"]), value)
    times.update(medians)
    return times


def us(value):
    return f"{value:,.0f} µs" if value >= 100 else f"{value:.1f} µs"


class Table:
    def __init__(self):
        self.rows = []

    def add(self, figure, value, reference, ratio, target, met):
        self.rows.append([figure, value, reference, ratio, target, met])

    def missing(self, figure, why):
        self.rows.append([figure, why, "", "", "", "not measured"])

    def print(self):
        header = ["figure", "value", "reference", "ratio", "target", "met/missed"]
        widths = [max(len(str(r[i])) for r in self.rows + [header]) for i in range(len(header))]

        def line(cells):
            return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

        print(line(header))
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in self.rows:
            print(line(row))


def verdict(ok):
    return "met" if ok else "MISSED"


def figure1(results, table):
    times = benchmark_us(results, "figure1.json")
    if not times or "BM_RawSetNxPxAndDel" not in times:
        table.missing("1 cycle, woven guard", "failed (see figure1.txt)")
        return None
    floor, ping = times["BM_RawSetNxPxAndDel"], times["BM_RawPing"]
    reference = f"floor {us(floor)}, PING {us(ping)}"
    woven = times.get("BM_WovenCycle")
    if woven is not None:
        table.add("1 cycle, woven guard", us(woven), reference,
                  f"{woven / floor:.2f}× floor, {woven / ping:.2f}× PING", "≤ 0.7× floor",
                  verdict(woven / floor <= 0.7))
    else:
        table.missing("1 cycle, woven guard", "not built (no dlock-codegen)")
    scripts = times.get("BM_RawDlockScripts")
    if scripts is not None:
        table.add("1 dlock's scripts, raw hiredis", us(scripts), reference,
                  f"{scripts / floor:.2f}× floor, {scripts / ping:.2f}× PING", "(for comparison)", "")
    one_wait = times.get("BM_RawDlockScriptsOneWait")
    if one_wait is not None:
        table.add("1 dlock's scripts, raw, release not awaited", us(one_wait), reference,
                  f"{one_wait / floor:.2f}× floor, {one_wait / ping:.2f}× PING",
                  "(the woven cycle's floor)", "")
        if woven is not None:
            table.add("1 woven guard over its floor", us(woven),
                      f"dlock's scripts, raw, release not awaited {us(one_wait)}",
                      f"{woven / one_wait:.2f}×", "(the client's share)", "")
    api = times.get("BM_LockReleaseCycle")
    if api is not None:
        table.add("1 cycle, Client::acquire", us(api), reference,
                  f"{api / floor:.2f}× floor, {api / ping:.2f}× PING", "(for comparison)", "")
    return woven if woven is not None else api


def figure2(results, table):
    for threads in (1, 8, 50):
        text = read(results, f"figure2-{threads}.txt")
        r = result_line(text, "throughput")
        label = f"2 throughput, {threads} thread{'s' if threads > 1 else ''}"
        target = 1.0 if threads == 50 else 0.8
        if r is None:
            table.missing(label, "failed" if text else "not run")
            continue
        value, ceiling = float(r["cycles_per_s"]), float(r["ceiling_cycles_per_s"])
        reference = f"redis-benchmark -c {threads} EVALSHA: {ceiling:,.0f} cycles/s"
        if "cpu_bound_cycles_per_s" in r:
            reference += (f"; CPU per cycle {r['client_cpu_us']} µs client + "
                          f"{r['server_cpu_us']} µs server: at most "
                          f"{float(r['cpu_bound_cycles_per_s']):,.0f} cycles/s")
        if "server_bound_cycles_per_s" in r:
            reference += (f"; the server alone at most {float(r['server_bound_cycles_per_s']):,.0f} "
                          f"cycles/s (ceiling's CPU per cycle: server {r['ceiling_server_cpu_us']} µs"
                          + (f", redis-benchmark {r['ceiling_client_cpu_us']} µs"
                             if "ceiling_client_cpu_us" in r else "") + ")")
        if "lean_bound_cycles_per_s" in r:
            reference += (f"; a client as cheap as redis-benchmark, with dlock's scripts, at most "
                          f"{float(r['lean_bound_cycles_per_s']):,.0f} cycles/s")
        table.add(label, f"{value:,.0f} cycles/s", reference,
                  f"{value / ceiling:.2f}×", f"≥ {target}× ceiling", verdict(value / ceiling >= target))
        if float(r.get("raw_cycles_per_s", 0)) > 0:
            raw = float(r["raw_cycles_per_s"])
            table.add(f"{label}, raw hiredis", f"{raw:,.0f} cycles/s",
                      f"dlock's scripts from {threads} threads, a blocking hiredis connection each; "
                      f"CPU per cycle {r['raw_client_cpu_us']} µs client + "
                      f"{r['raw_server_cpu_us']} µs server",
                      f"{raw / ceiling:.2f}× ceiling", "(a plain client, for comparison)", "")
            table.add(f"{label}, dlock against raw hiredis", f"{value:,.0f} cycles/s",
                      f"raw hiredis {raw:,.0f} cycles/s", f"{value / raw:.2f}× the rate",
                      "(for comparison)", "")


def figure3(results, table):
    r = result_line(read(results, "figure3.txt"), "handoff")
    if r is None:
        table.missing("3 handoff", "failed or not run")
        return None
    median, p99, ping = float(r["median_us"]), float(r["p99_us"]), float(r["ping_us"])
    floor = float(r["floor_median_us"])
    table.add("3 handoff median", us(median), f"raw pub/sub floor {us(floor)}, PING {us(ping)}",
              f"{median / floor:.2f}× floor, {median / ping:.2f}× PING", "≤ 1.3× floor",
              verdict(median / floor <= 1.3))
    table.add("3 handoff p99", us(p99), f"PING {us(ping)}", f"{p99 / ping:.2f}× PING", "", "")
    if "handoffs" in r:
        table.add("3 grants made by the release", r["handoffs"], f"of {r['rounds']} rounds", "", "", "")
    return median


def figure4(results, table):
    times = benchmark_us(results, "figure4.json")
    if not times or "BM_SingleCycle" not in times:
        table.missing("4 Redlock cycle", "failed or not run")
        return
    single = times["BM_SingleCycle"]
    for n, target in ((3, 1.3), (5, 1.6)):
        value = times.get(f"BM_RedlockCycle/{n}")
        if value is None:
            table.missing(f"4 Redlock N={n} cycle", "failed")
            continue
        table.add(f"4 Redlock N={n} cycle", us(value), f"single node {us(single)}",
                  f"{value / single:.2f}×", f"≤ {target}×", verdict(value / single <= target))


def figure5(results, table):
    r = result_line(read(results, "figure5.txt"), "watchdog")
    if r is None:
        table.missing("5 watchdog", "failed or not run")
        return
    leases, lease_ms = int(r["leases"]), int(r["lease_ms"])
    p99_pct = float(r["lag_p99_pct"])
    lease = f"lease {lease_ms / 1000:g} s"
    table.add(f"5 watchdog, {leases:,} leases: renewal lag p99",
              f"≤ {int(r['lag_p99_us']) / 1000:.1f} ms (max {int(r['lag_max_us']) / 1000:.1f} ms)", lease,
              f"{p99_pct:.2f}% of the lease", "≤ 5%", verdict(p99_pct <= 5 and int(r["lost"]) == 0))
    table.add("5 watchdog thread CPU", f"{float(r['watchdog_cpu_pct']):.1f}% of a core",
              f"{int(r['renewals']):,} renewals", f"process {float(r['process_cpu_pct']):.1f}%", "", "")
    table.add("5 memory per lease", f"client {int(r['client_bytes_per_lease']):,} B",
              f"server {int(r['server_bytes_per_lease']):,} B", "", "", "")


def figure6(results, table):
    text = read(results, "figure6.txt")
    if text is None:
        table.missing("6 build time, woven", "not measured (bench/build_time/run.sh missing)")
        return
    r = result_line(text, "build_time")
    if r is None:
        table.missing("6 build time, woven", "failed (see figure6.txt)")
        return
    plain, woven, ratio = float(r["plain_s"]), float(r["woven_s"]), float(r["ratio"])
    table.add("6 build time, woven", f"{woven:.2f} s", f"without weaving {plain:.2f} s", f"{ratio:.2f}×",
              "≤ 1.10×", verdict(ratio <= 1.10))


def figure7(results, table, dlock_cycle_us, dlock_handoff_us):
    if read(results, "peers-skipped.txt") is not None:
        table.missing("7 peers", "not run (--no-peers)")
        return
    for name in ("redis-py", "node-redlock"):
        for settings in ("default", "fast"):
            text = read(results, f"figure7-{name}-{settings}.txt")
            r = result_line(text, "peer")
            label = f"7 {name} ({settings})"
            if r is None:
                table.missing(label, "failed (see its output)" if text else "not installed")
                continue
            peer_cycle, peer_handoff = float(r["cycle_us"]), float(r["handoff_median_us"])
            # dlock's woven cycle measured just before this peer, else figure 1's.
            adjacent = benchmark_us(results, f"figure7-dlock-{name}-{settings}.json") or {}
            cycle_us = adjacent.get("BM_WovenCycle", dlock_cycle_us)
            if cycle_us:
                rate = peer_cycle / cycle_us
                table.add(f"{label}: cycle rate", f"dlock {1e6 / cycle_us:,.0f}/s",
                          f"{name} {1e6 / peer_cycle:,.0f}/s", f"{rate:.2f}×", "≥ 2×", verdict(rate >= 2))
            # The most a cycle of one awaited round trip could get against this peer: with
            # dlock's scripts over raw hiredis, and with nothing but a PING.
            for floor, words in (("BM_RawDlockScriptsOneWait", "dlock's scripts, raw, one wait"),
                                 ("BM_RawPing", "one PING")):
                if floor in adjacent:
                    table.add(f"{label}: at most, {words}", f"{1e6 / adjacent[floor]:,.0f}/s",
                              f"{name} {1e6 / peer_cycle:,.0f}/s",
                              f"{peer_cycle / adjacent[floor]:.2f}×", "(the most the ratio above can be)", "")
            if dlock_handoff_us:
                better = peer_handoff / dlock_handoff_us
                table.add(f"{label}: handoff median", f"dlock {us(dlock_handoff_us)}",
                          f"{name} {us(peer_handoff)}", f"{better:,.1f}× better", "≥ 10× better",
                          verdict(better >= 10))


def figure8(results, table):
    times = benchmark_us(results, "figure8.json")
    if not times or "BM_TlsCycle" not in times or "BM_PlainCycle" not in times:
        table.missing("8 cycle over TLS", "failed (see figure8.txt)")
        return
    tls, plain = times["BM_TlsCycle"], times["BM_PlainCycle"]
    table.add("8 cycle over TLS", us(tls), f"same cycle over TCP {us(plain)}", f"{tls / plain:.2f}×",
              "≤ 1.20×", verdict(tls / plain <= 1.20))
    tls_ping, plain_ping = times.get("BM_TlsPing"), times.get("BM_PlainPing")
    if tls_ping is not None and plain_ping is not None:
        table.add("8 PING over TLS (floor)", us(tls_ping), f"PING over TCP {us(plain_ping)}",
                  f"{tls_ping / plain_ping:.2f}×", "(the floor of the ratio above)", "")


def figure12(results, table):
    times = benchmark_us(results, "figure12.json")
    if not times or "BM_PostgresCycle" not in times or "BM_RawFloor" not in times:
        table.missing("12 postgres cycle", "failed (see figure12.txt)")
    else:
        cycle, floor = times["BM_PostgresCycle"], times["BM_RawFloor"]
        table.add("12 postgres cycle", us(cycle), f"raw floor (INSERT ON CONFLICT + DELETE) {us(floor)}",
                  f"{cycle / floor:.2f}×", "≤ 1.3×", verdict(cycle / floor <= 1.3))
        raw = times.get("BM_RawDlockStatements")
        if raw is not None:
            table.add("12 dlock's statements, raw libpq", us(raw), f"raw floor {us(floor)}",
                      f"{raw / floor:.2f}×", "(for comparison)", "")
    r = result_line(read(results, "figure12-handoff.txt"), "postgres_handoff")
    if r is None:
        table.missing("12 postgres handoff", "failed or not run")
        return
    median, floor = float(r["median_us"]), float(r["floor_median_us"])
    table.add("12 postgres handoff median", us(median), f"raw LISTEN/NOTIFY floor {us(floor)}",
              f"{float(r['floor_ratio']):.2f}× (blocks in turn)", "≤ 1.3×",
              verdict(float(r["floor_ratio"]) <= 1.3))


def engine_figure(results, table, figure, engine, words):
    """An engine's cycle and handoff next to its raw floors (figures 13 and 14), from the
    RESULT lines <engine>_cycle and <engine>_handoff; `words` says what each floor is."""
    r = result_line(read(results, f"figure{figure}.txt"), f"{engine}_cycle")
    if r is None:
        table.missing(f"{figure} {engine} cycle", f"failed (see figure{figure}.txt)")
    else:
        guard, floor = float(r["guard_median_us"]), float(r["floor_median_us"])
        reference = f"raw floor ({words['floor']}) {us(floor)}, p99 {us(float(r['floor_p99_us']))}"
        table.add(f"{figure} {engine} cycle (destructor)",
                  f"{us(guard)}, p99 {us(float(r['guard_p99_us']))}", reference,
                  f"{guard / floor:.2f}×", "≤ 1.3×", verdict(guard / floor <= 1.3))
        if "waited_median_us" in r:
            waited = float(r["waited_median_us"])
            table.add(f"{figure} {engine} cycle, release()",
                      f"{us(waited)}, p99 {us(float(r['waited_p99_us']))}", f"raw floor {us(floor)}",
                      f"{waited / floor:.2f}×", "(for comparison)", "")
        if "dlock_requests_median_us" in r:
            raw = float(r["dlock_requests_median_us"])
            table.add(f"{figure} dlock's requests, {words['client']}", us(raw), f"raw floor {us(floor)}",
                      f"{raw / floor:.2f}×", "(for comparison)", "")
    r = result_line(read(results, f"figure{figure}-handoff.txt"), f"{engine}_handoff")
    if r is None:
        table.missing(f"{figure} {engine} handoff", "failed or not run")
        return
    median, floor = float(r["median_us"]), float(r["floor_median_us"])
    table.add(f"{figure} {engine} handoff median", f"{us(median)}, p99 {us(float(r['p99_us']))}",
              f"raw {words['handoff']} floor {us(floor)}",
              f"{float(r['floor_ratio']):.2f}× (blocks in turn)", "≤ 1.3×",
              verdict(float(r["floor_ratio"]) <= 1.3))
    other, what = words["other_floor"]
    if f"{other}_floor_median_us" in r:
        table.add(f"{figure} {engine} handoff, {other} floor", us(median),
                  f"raw {what} floor {us(float(r[f'{other}_floor_median_us']))}",
                  f"{float(r[f'{other}_floor_ratio']):.2f}× (blocks in turn)", "(for comparison)", "")


def figure13(results, table):
    engine_figure(results, table, 13, "zookeeper", {
        "floor": "create + delete, waited", "client": "raw C client",
        "handoff": "watch + getChildren", "other_floor": ("create", "watch + create")})


def figure14(results, table):
    engine_figure(results, table, 14, "etcd", {
        "floor": "put Txn + delete, waited", "client": "raw gRPC",
        "handoff": "watch + Txn", "other_floor": ("range", "watch + Range")})


def figure15(results, table):
    r = result_line(read(results, "figure15.txt"), "kinds")
    if r is None:
        table.missing("15 lock kinds", "failed or not run")
        return
    x = float(r["exclusive_us"])
    two = float(r["two_keys_us"])
    table.add("15 cycle, two keys on one server", us(two), f"one key {us(x)}",
              f"{two / x:.2f}×", "≤ 1.2×", verdict(two / x <= 1.2))
    for kind, word in (("permit", "a permit of 3"), ("shared", "a shared hold")):
        value = float(r[f"{kind}_us"])
        table.add(f"15 cycle, {word}", us(value), f"exclusive {us(x)}", f"{value / x:.2f}×", "", "")
    st, xt = float(r["shared_tput"]), float(r["exclusive_tput"])
    table.add("15 8 threads on one key, shared", f"{st:,.0f}/s", f"exclusive {xt:,.0f}/s",
              f"{st / xt:.2f}×", "", "")
    ph, fh = float(r["plain_handoff_us"]), float(r["fair_handoff_us"])
    table.add("15 handoff, fair", us(fh), f"plain {us(ph)}", f"{fh / ph:.2f}×", "", "")


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: report.py RESULTS_DIR", file=sys.stderr)
        return 2
    results = sys.argv[1]
    machine = read(results, "machine.txt")
    if machine:
        print(machine.rstrip())
        print()
    table = Table()
    cycle = figure1(results, table)
    figure2(results, table)
    handoff = figure3(results, table)
    figure4(results, table)
    figure5(results, table)
    figure6(results, table)
    figure7(results, table, cycle, handoff)
    figure8(results, table)
    figure12(results, table)
    figure13(results, table)
    figure14(results, table)
    figure15(results, table)
    table.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
