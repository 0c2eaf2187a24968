#!/usr/bin/env bash
# Run every fuzz target (or those named) for SECONDS each (default 600), one after the other,
# with libFuzzer's memory and time limits; the corpora grow in corpus/<target>/. A summary
# line per target (time, executions, result) goes to logs/summary.txt. Needs cargo-fuzz
# (`cargo install cargo-fuzz`); RUSTC_BOOTSTRAP=1 lets a stable toolchain build it.
set -u
cd "$(dirname "$0")"
SECONDS_EACH=${SECONDS_EACH:-600}
TARGETS=${*:-gguf safetensors safetensors_index config_json tokenizer moe_config dsml chat_request}
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O || exit 1
mkdir -p logs
for t in $TARGETS; do
  case $t in
    gguf|tokenizer|safetensors_index) max_len=300000 ;;
    *) max_len=16384 ;;
  esac
  log=logs/$t.log
  cargo fuzz run -O "$t" "corpus/$t" -- \
    -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=10 -max_len=$max_len \
    -print_final_stats=1 >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  result=$([ $rc -eq 0 ] && echo "no crash, OOM or timeout" || echo "FAILED (rc $rc, see $log)")
  echo "$(date -u +%F) $t ${SECONDS_EACH}s execs=${execs:-?} $result" | tee -a logs/summary.txt
done
