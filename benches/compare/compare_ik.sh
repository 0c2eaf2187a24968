#!/usr/bin/env bash
# fathom vs ik_llama.cpp (plain and with run-time repack `-rtr 1`), side by side in
# alternating rounds on the same GGUF and thread count, with a dated markdown table.
#
#   benches/compare/compare_ik.sh MODEL.gguf [-t 2] [-p 512] [-n 32] [-r 1] [-d 0] [-k 2] [-o FILE]
#
# -d N: each test after N tokens of context (`fathom bench -d`). ik_llama.cpp's llama-bench
#   has no -d: its decode at depth is `-gp N,GEN` (generation after an N-token prompt), and
#   its prefill at depth is not measured (the table shows "-").
# -k K: K rounds of (memory bandwidth, ik plain, ik -rtr 1, fathom): on a shared VM whose speed
#   drifts between minutes, compare within a round and quote the range over rounds.
# -o FILE: also write the table (host, bandwidth, commits, commands) to FILE, e.g.
#   docs/perf/$(date +%F)-compare-ik.md.
#
# First run: clones the public repository ikawrakow/ik_llama.cpp at $IK_COMMIT (default
# 8337e4cd3, the commit docs/perf measured) into $IK_DIR (default target/ik_llama.cpp) and
# builds `llama-bench` with native CPU flags (about 12 min on 2 cores; needs git and cmake).
# IK_BENCH=path/to/llama-bench skips both. FATHOM=path/to/fathom skips fathom's build;
# FATHOM_ARGS adds `fathom bench` arguments (e.g. "--repack all"); FATHOM_CPU_LEVEL (e.g.
# avx2) runs fathom's kernels of that level, and IK_BENCH can name an ik build for the same
# level. IK_CONFIGS="rtr" (or "plain") runs only that ik configuration (default: both; at
# depth each ik run prefills the whole depth itself). Not part of CI.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
model=${1:?usage: compare_ik.sh MODEL.gguf [-t THREADS] [-p PROMPT] [-n GEN] [-r REPS] [-d DEPTH] [-k ROUNDS] [-o FILE]}
shift
threads=2 prompt=512 gen=32 reps=1 depth=0 rounds=2 outfile=
while [ $# -gt 0 ]; do
  case $1 in
    -t) threads=$2; shift 2 ;;
    -p) prompt=$2; shift 2 ;;
    -n) gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    -d) depth=$2; shift 2 ;;
    -k) rounds=$2; shift 2 ;;
    -o) outfile=$2; shift 2 ;;
    *) echo "compare_ik.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -r "$model" ] || { echo "compare_ik.sh: cannot read $model" >&2; exit 2; }
configs=${IK_CONFIGS:-plain rtr}
for c in $configs; do
  case $c in plain | rtr) ;; *) echo "compare_ik.sh: IK_CONFIGS: unknown configuration $c (plain, rtr)" >&2; exit 2 ;; esac
done
ik=${IK_BENCH:-}
commit=${IK_COMMIT:-8337e4cd3}
. "$here/ik_build.sh"
[ -n "$ik" ] || ik=$(ik_tool llama-bench)
fathom=${FATHOM:-}
if [ -z "$fathom" ]; then
  (cd "$root" && cargo build --release -q -p fathom-tools)
  fathom=$root/target/release/fathom
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# every engine maps the file: read it into the page cache right before each run, so that
# none pays for disk reads another did not
warm() { cat "$model" >/dev/null; }
if [ "$depth" = 0 ]; then
  ikargs=(-m "$model" -t "$threads" -p "$prompt" -n "$gen" -r "$reps" -o json)
else
  ikargs=(-m "$model" -t "$threads" -p 0 -n 0 -gp "$depth,$gen" -r "$reps" -o json)
fi
for k in $(seq 1 "$rounds"); do
  echo "round $k/$rounds" >&2
  "$fathom" bench --membw -t "$threads" 2>&1 | tail -1 >"$out/membw.$k"
  for c in plain rtr; do
    name=ik; extra=(); [ $c = rtr ] && { name=ikrtr; extra=(-rtr 1); }
    case " $configs " in
      *" $c "*) warm; "$ik" "${ikargs[@]}" "${extra[@]}" >"$out/$name.$k.json" 2>"$out/$name.$k.log" ;;
      *) echo '[]' >"$out/$name.$k.json" ;;  # not run: "-" in the table
    esac
  done
  warm
  "$fathom" bench -m "$model" -t "$threads" -p "$prompt" -n "$gen" -r "$reps" -d "$depth" \
    --json ${FATHOM_ARGS:-} >"$out/fathom.$k.json"
done
fcommit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 - "$out" "$rounds" "$model" "$threads" "$depth" "$commit" "$fcommit" "${FATHOM_ARGS:-}" "${FATHOM_CPU_LEVEL:-}" >"$out/table.md" <<'PY'
import json, os, platform, re, sys
out, rounds, model, threads, depth, ikc, fc, fargs, level = sys.argv[1:10]
rounds = int(rounds)
def rates(path):
    # an ik `-gp N,GEN` test (prompt and generation) is its decode at depth N: keyed as tgGEN
    return {(0 if o["n_gen"] else o["n_prompt"], o["n_gen"]): o["avg_ts"]
            for o in json.load(open(path))}
cpu = "unknown CPU"
flags = ""
try:
    info = open("/proc/cpuinfo").read()
    cpu = re.search(r"model name\s*:\s*(.*)", info).group(1)
    fl = re.search(r"flags\s*:\s*(.*)", info).group(1).split()
    flags = " ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "amx_int8") if f in fl)
except (OSError, AttributeError):
    pass
print(f"Host: {cpu} ({flags}), {os.cpu_count()} CPUs, {platform.system()}; {threads} threads.")
print(f"Model: `{os.path.basename(model)}`; depth {depth}. ik_llama.cpp `{ikc}`; fathom `{fc}`"
      + (f" with `{fargs}`" if fargs else "")
      + (f", kernels of level `{level}` (`FATHOM_CPU_LEVEL`)" if level else "") + ".\n")
print("| round | memory bandwidth | test | ik_llama.cpp | ik `-rtr 1` | fathom | fathom / ik's best |")
print("|---|---|---|---:|---:|---:|---:|")
for k in range(1, rounds + 1):
    bw = open(f"{out}/membw.{k}").read().strip().removeprefix("memory bandwidth: ")
    ik, rtr, fa = (rates(f"{out}/{n}.{k}.json") for n in ("ik", "ikrtr", "fathom"))
    for key in sorted(fa, key=lambda t: (t[1], t[0])):
        test = f"pp{key[0]}" if key[0] else f"tg{key[1]}"
        a, b, f = ik.get(key), rtr.get(key), fa[key]
        best = max(x for x in (a, b) if x is not None) if (a or b) else None
        cell = lambda x: f"{x:.2f}" if x is not None else "-"
        ratio = f"{f / best:.2f}×" if best else "-"
        print(f"| {k} | {bw} | {test} | {cell(a)} | {cell(b)} | {f:.2f} | {ratio} |")
PY
cat "$out/table.md"
if [ -n "$outfile" ]; then
  {
    echo "# fathom against ik_llama.cpp, $(date -u +'%F %H:%M UTC')"
    echo
    echo '```sh'
    echo "benches/compare/compare_ik.sh $model -t $threads -p $prompt -n $gen -r $reps -d $depth -k $rounds"
    echo '```'
    echo
    cat "$out/table.md"
  } >"$outfile"
  echo "wrote $outfile" >&2
fi
