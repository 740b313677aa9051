#!/usr/bin/env bash
# The example HTTP server (examples/http_server), pooled and --plain, under
# wrk on 127.0.0.1: requests per second, p99 latency, peak RSS, peak
# anonymous RSS and heap allocations per request, for a few connection
# counts. Writes the table to
# benches/results/http.md (included in benches/RESULTS.md by report.py).
#
#   benches/http.sh                                   # the defaults below
#   CONNECTIONS="1 16" DURATION=2 REPS=1 benches/http.sh   # a quick look
#
# Every run starts a fresh server process, so each peak RSS (VmHWM, read
# from /proc/PID/status before the server is stopped), each peak of its
# anonymous part (RssAnon, sampled from the same file while wrk runs: VmHWM
# also counts the pages of the binary and of libc that each mode's code
# happens to touch, which vary from run to run by more than the pools'
# own memory) and each allocation
# count (the server's counting allocator, printed when it stops) belong to
# that run alone. The two modes alternate within each repetition, in an
# order that flips every repetition, and the table keeps the best
# throughput and the best p99 of the repetitions, the highest RSS figures
# and the most allocations: best case for speed, worst case for memory, in both
# modes alike. wrk gets half the cores (at least one thread, at most one
# per connection), the server the rest.
#
# Needs wrk (Debian package `wrk`): installed with apt-get if missing;
# where it cannot be had, the script says so and exits without a table.
# Linux only (/proc).
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS=${CONNECTIONS:-"1 16 64"}
DURATION=${DURATION:-5}
REPS=${REPS:-3}
ROUTES=${ROUTES:-"hello json echo"}
OUT=${OUT:-benches/results/http.md}

die() {
    echo "benches/http.sh: $*" >&2
    exit 1
}

if ! command -v wrk >/dev/null 2>&1; then
    as_root=""
    [ "$(id -u)" = 0 ] || as_root="sudo -n"
    echo "benches/http.sh: installing wrk with apt-get"
    { $as_root apt-get update -qq && $as_root apt-get install -y -qq wrk; } >/dev/null 2>&1 || true
fi
if ! command -v wrk >/dev/null 2>&1; then
    echo "benches/http.sh: SKIPPED: wrk is not installed and apt-get could not install it" \
        "(Debian package wrk); no table written" >&2
    exit 0
fi

cargo build --release --example http_server
server_bin=target/release/examples/http_server

tmp=$(mktemp -d)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
# Read with a timeout, a FIFO nobody writes to is a sleep without a process.
mkfifo "$tmp/tick"

# POST /echo with a 1 KiB body.
cat >"$tmp/echo.lua" <<'LUA'
wrk.method = "POST"
wrk.body = string.rep("x", 1024)
wrk.headers["Content-Type"] = "application/octet-stream"
LUA

cores=$(nproc)
wrk_threads_max=$((cores / 2 > 0 ? cores / 2 : 1))

# One run: route, connections, mode, repetition. Appends a line to raw.
run_one() {
    local route=$1 conns=$2 mode=$3 rep=$4
    local path=/ script=()
    case $route in
        hello) path=/ ;;
        json) path=/json ;;
        echo) path=/echo script=(-s "$tmp/echo.lua") ;;
        *) die "unknown route $route (hello, json, echo)" ;;
    esac
    local flags=(--addr 127.0.0.1:0 --stats-every 0)
    [ "$mode" = plain ] && flags+=(--plain)
    # A fresh file per run: the background shell creates it in its own
    # time, and the previous run's port must not be read meanwhile.
    rm -f "$tmp/server.out"
    "$server_bin" "${flags[@]}" >"$tmp/server.out" 2>"$tmp/server.err" &
    server_pid=$!
    local port="" tries=0
    while [ -z "$port" ]; do
        port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$tmp/server.out" 2>/dev/null || true)
        tries=$((tries + 1))
        [ "$tries" -le 200 ] || die "the server did not start: $(cat "$tmp/server.err")"
        [ -n "$port" ] || sleep 0.05
    done
    local threads=$((conns < wrk_threads_max ? conns : wrk_threads_max))
    wrk -t"$threads" -c"$conns" -d"${DURATION}s" --latency "${script[@]}" \
        "http://127.0.0.1:$port$path" >"$tmp/wrk.out" 2>&1 &
    local wrk_pid=$!
    # The kernel keeps no peak of the private (anonymous) part of RSS, so
    # it is sampled while wrk runs, with shell builtins only (a process
    # started per sample would load the machine being measured).
    local anon=0 key value _
    while kill -0 "$wrk_pid" 2>/dev/null; do
        while read -r key value _; do
            if [ "$key" = RssAnon: ]; then
                [ "$value" -gt "$anon" ] && anon=$value
                break
            fi
        done <"/proc/$server_pid/status" || die "the server stopped under wrk: $(cat "$tmp/server.err")"
        read -r -t 0.05 <>"$tmp/tick" || true
    done
    wait "$wrk_pid" || die "wrk failed: $(cat "$tmp/wrk.out")"
    local rss
    rss=$(awk '/^VmHWM:/ { print $2 }' "/proc/$server_pid/status")
    kill -TERM "$server_pid"
    wait "$server_pid" || die "the server exited with an error: $(cat "$tmp/server.err")"
    server_pid=""
    # Failed or refused requests would flatter the numbers: none allowed.
    if grep -Eq 'Non-2xx|Socket errors' "$tmp/wrk.out"; then
        die "wrk saw errors ($mode, $conns connections, $route): $(cat "$tmp/wrk.out")"
    fi
    local rps p99 final requests allocations
    rps=$(awk '/^Requests\/sec:/ { print $2 }' "$tmp/wrk.out")
    # wrk prints latencies with a unit: us, ms or s. In microseconds:
    p99=$(awk '$1 == "99%" {
        v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
        f = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "s") ? 1000000 : -1
        if (f < 0) exit 1
        print v * f }' "$tmp/wrk.out")
    final=$(grep '^http_server: final ' "$tmp/server.out") || die "no final counters from the server"
    requests=$(tr ' ' '\n' <<<"$final" | sed -n 's/^requests=//p')
    allocations=$(tr ' ' '\n' <<<"$final" | sed -n 's/^allocations=//p')
    [ -n "$rps" ] && [ -n "$p99" ] && [ -n "$rss" ] && [ "$anon" -gt 0 ] && [ -n "$requests" ] && [ "$requests" -gt 0 ] ||
        die "could not read the results of a run: $(cat "$tmp/wrk.out") / $final"
    echo "$route $conns $mode $rep $rps $p99 $rss $allocations $requests $anon" >>"$tmp/raw"
    printf '  %-5s %3s connections %-6s rep %s: %10.0f req/s  p99 %8.0f us  VmHWM %6s KiB  anon %6s KiB  %s allocations / %s requests\n' \
        "$route" "$conns" "$mode" "$rep" "$rps" "$p99" "$rss" "$anon" "$allocations" "$requests"
}

started=$(date -u +"%Y-%m-%d %H:%M UTC")
: >"$tmp/raw"
for rep in $(seq 1 "$REPS"); do
    echo "repetition $rep of $REPS"
    for route in $ROUTES; do
        for conns in $CONNECTIONS; do
            if [ $((rep % 2)) = 1 ]; then order="pooled plain"; else order="plain pooled"; fi
            for mode in $order; do
                run_one "$route" "$conns" "$mode" "$rep"
            done
        done
    done
done

commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- src examples benches/http.sh 2>/dev/null || commit="$commit (with uncommitted changes)"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
command="CONNECTIONS=\"$CONNECTIONS\" DURATION=$DURATION REPS=$REPS ROUTES=\"$ROUTES\" benches/http.sh"

mkdir -p "$(dirname "$OUT")"
{
    echo "## HTTP server under wrk"
    echo
    echo "\`examples/http_server\` (pooled: \`WorkerPool\`, pooled readers, writers and"
    echo "buffers) against the same server with \`--plain\` (a \`std::thread\` per"
    echo "connection, std's \`BufReader\`/\`BufWriter\`, a fresh \`Vec\` per buffer), both"
    echo "on 127.0.0.1 under \`wrk --latency\`, ${DURATION} s per run, keep-alive connections."
    echo "Routes: \`hello\` is \`GET /\` (a static body), \`json\` is \`GET /json\` (a"
    echo "document built per request), \`echo\` is \`POST /echo\` with a 1 KiB body."
    echo "Best requests/s and best p99 of $REPS interleaved runs; highest peak RSS"
    echo "(VmHWM), highest peak anonymous RSS (RssAnon, sampled every 50 ms under"
    echo "load: heap, stacks and other private memory, without the pages of the"
    echo "binary and of libc that VmHWM also counts, and that differ between the"
    echo "modes by which code runs) and most allocations per request (the whole"
    echo "process's heap allocations over the requests it served, start-up"
    echo "included). Ratios are pooled / plain: above 1 is faster for requests/s,"
    echo "below 1 is better for the rest."
    echo
    echo "| route | conns | req/s pooled | req/s plain | ratio | p99 pooled | p99 plain | peak RSS pooled | peak RSS plain | ratio | peak anon pooled | peak anon plain | ratio | allocs/req pooled | allocs/req plain |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    for route in $ROUTES; do
        for conns in $CONNECTIONS; do
            awk -v route="$route" -v conns="$conns" '
                $1 == route && $2 == conns {
                    m = $3
                    if (!(m in rps) || $5 > rps[m]) rps[m] = $5
                    if (!(m in p99) || $6 < p99[m]) p99[m] = $6
                    if (!(m in rss) || $7 > rss[m]) rss[m] = $7
                    if (!(m in anon) || $10 > anon[m]) anon[m] = $10
                    a = $8 / $9
                    if (!(m in apr) || a > apr[m]) apr[m] = a
                }
                function lat(us) { return us >= 1000 ? sprintf("%.2f ms", us / 1000) : sprintf("%.0f us", us) }
                function mib(kib) { return sprintf("%.2f MiB", kib / 1024) }
                END {
                    printf "| %s | %s | %.0f | %.0f | %.2f | %s | %s | %s | %s | %.2f | %s | %s | %.2f | %.3f | %.2f |\n",
                        route, conns, rps["pooled"], rps["plain"], rps["pooled"] / rps["plain"],
                        lat(p99["pooled"]), lat(p99["plain"]), mib(rss["pooled"]), mib(rss["plain"]),
                        rss["pooled"] / rss["plain"], mib(anon["pooled"]), mib(anon["plain"]),
                        anon["pooled"] / anon["plain"], apr["pooled"], apr["plain"]
                }' "$tmp/raw"
        done
    done
    echo
    echo "_${started}; commit ${commit}; ${cpu:-unknown CPU}, ${cores} cores; $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2);"
    echo "\`${command}\`._"
} >"$OUT"
echo
cat "$OUT"
