#!/usr/bin/env python3
"""Aggregate decode tokens/s of N parallel streams vs 1 stream through `fathom serve` (issue 33).

    python3 benches/serve_parallel.py MODEL.gguf|builtin [--parallel 1,4] [--prompt 64]
        [--tokens 48] [--rounds 3] [--bin target/release/fathom] [-- extra serve flags]

For each N in --parallel: starts `fathom serve -m MODEL --parallel N`, warms it up with one
request, then runs --rounds rounds of N concurrent streamed /v1/completions (distinct random
token-id prompts of --prompt tokens, --tokens tokens each, greedy, `logprobs: 0` so that every
token is one timestamped chunk). A round's aggregate decode rate is the number of tokens that
arrive while all N streams are generating (from the last stream's first token to the first
stream's end) over that window. Prints one Markdown row per N: median and range of the
rounds, and the rate per stream.
"""
import argparse
import http.client
import json
import random
import statistics
import threading
import time

from serve_common import start_server


def start(args, n):
    model = ["-m", args.model] if args.model != "builtin" else []
    ctx = args.prompt + args.tokens + 16
    return start_server([args.bin, "serve", *model, "--port", "0", "--ctx", str(ctx),
                         "--parallel", str(n), "--queue", str(2 * n), *args.extra])


def stream(addr, ids, tokens, out):
    """One streamed completion; appends (first token time, end time, [token times])."""
    host, port = addr.split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=3600)
    body = {"prompt": ids, "max_tokens": tokens, "temperature": 0, "logprobs": 0,
            "stream": True}
    c.request("POST", "/v1/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    times = []
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        v = json.loads(line[6:])
        if "error" in v:
            raise RuntimeError(v["error"])
        lp = v["choices"][0].get("logprobs")
        if lp and lp.get("tokens"):
            times.append(time.perf_counter())
    out.append((times[0], times[-1], times))


def round_rate(addr, n, args, rng):
    out = []
    threads = [threading.Thread(target=stream, args=(
        addr, [rng.randrange(300, 1000) for _ in range(args.prompt)], args.tokens, out))
        for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == n, "a stream failed"
    lo = max(o[0] for o in out)
    hi = min(o[1] for o in out)
    count = sum(1 for o in out for t in o[2] if lo < t <= hi)
    return count / (hi - lo) if hi > lo else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--parallel", default="1,4")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default="target/release/fathom")
    ap.add_argument("extra", nargs="*", help="more `fathom serve` flags (after --)")
    args = ap.parse_args()
    rng = random.Random(1)
    print("| streams | aggregate decode tok/s (median, range) | per stream |")
    print("|---:|---:|---:|")
    for n in [int(x) for x in args.parallel.split(",")]:
        p, addr = start(args, n)
        try:
            round_rate(addr, 1, args, rng)  # warm-up: graphs built, weights paged in
            if n > 1:
                round_rate(addr, n, args, rng)
            rates = [round_rate(addr, n, args, rng) for _ in range(args.rounds)]
        finally:
            p.terminate()
            p.wait()
        med = statistics.median(rates)
        print(f"| {n} | {med:.2f} ({min(rates):.2f}–{max(rates):.2f}) | {med / n:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
