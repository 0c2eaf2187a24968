#!/usr/bin/env python3
"""A bounded load test of `fathom serve` on loopback (issue 33).

    python3 benches/serve_load.py [--bin target/release/fathom] [--clients 64] [--seconds 60]
                                  [--queue 16] [--max-tokens 16] [-- extra serve flags]

Starts the server (the built-in model unless `-m` is passed after `--`), computes the greedy
reply of each of 8 distinct prompts one at a time, then runs `--clients` concurrent clients
for `--seconds`, each sending streaming chat requests for a random one of the prompts. Every
200 reply must equal its prompt's reference (no lost or mixed-up responses); 503s (queue full,
with Retry-After) are counted and retried after the delay; any other status fails the run.
Prints a Markdown table row: requests, 200s, 503s, other errors, mismatches, p50/p99 time to
first token, aggregate generated tokens/s, and the server's peak RSS (VmHWM). Python's
standard library only (one thread per client).
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time

from serve_common import start_server

PROMPTS = [f"Request {i}: tell me about {t}." for i, t in enumerate(
    ["free software", "the GNU project", "copyleft", "licences", "Debian", "compilers",
     "the kernel", "documentation"])]


def start(args):
    return start_server([args.bin, "serve", "--port", "0", "--queue", str(args.queue)]
                        + args.extra, timeout=120)


def body(prompt, max_tokens, stream):
    b = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
         "temperature": 0, "stream": stream}
    if stream:
        b["stream_options"] = {"include_usage": True}
    return b


def post(addr, payload):
    host, port = addr.split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=600)
    c.request("POST", "/v1/chat/completions", body=json.dumps(payload),
              headers={"Content-Type": "application/json"})
    return c, c.getresponse()


def reference(addr, prompt, max_tokens):
    c, r = post(addr, body(prompt, max_tokens, False))
    data = json.loads(r.read())
    c.close()
    return data["choices"][0]["message"]["content"]


def one(addr, prompt, max_tokens):
    """(status, text, ttft seconds, completion tokens)"""
    t0 = time.perf_counter()
    ttft = None
    text = ""
    tokens = 0
    c, r = post(addr, body(prompt, max_tokens, True))
    if r.status != 200:
        r.read()
        c.close()
        return r.status, None, None, 0
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        d = json.loads(line[6:])
        if d.get("usage"):
            tokens = d["usage"]["completion_tokens"]
        delta = d["choices"][0]["delta"] if d.get("choices") else {}
        if delta.get("content"):
            if ttft is None:
                ttft = time.perf_counter() - t0
            text += delta["content"]
    c.close()
    return 200, text, ttft, tokens


def run(args, addr):
    refs = {p: reference(addr, p, args.max_tokens) for p in PROMPTS}
    stats = {"requests": 0, "ok": 0, "busy": 0, "other": 0, "mismatch": 0, "tokens": 0}
    ttfts = []
    lock = threading.Lock()
    end = time.perf_counter() + args.seconds

    def client_loop(seed):
        rng = random.Random(seed)
        while time.perf_counter() < end:
            p = rng.choice(PROMPTS)
            try:
                status, text, ttft, toks = one(addr, p, args.max_tokens)
            except OSError:
                status, text, ttft, toks = -1, None, None, 0
            with lock:
                stats["requests"] += 1
                if status == 200:
                    stats["ok"] += 1
                    stats["tokens"] += toks
                    if ttft is not None:
                        ttfts.append(ttft)
                    if text != refs[p]:
                        stats["mismatch"] += 1
                elif status == 503:
                    stats["busy"] += 1
                else:
                    stats["other"] += 1
            if status == 503:
                time.sleep(1.0)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return stats, ttfts, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/fathom")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--queue", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args()
    proc, addr = start(args)
    try:
        stats, ttfts, wall = run(args, addr)
        with open(f"/proc/{proc.pid}/status") as f:
            hwm = next(l for l in f if l.startswith("VmHWM")).split()[1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    q = statistics.quantiles(ttfts, n=100) if len(ttfts) > 1 else [float("nan")] * 99
    print("| clients | s | requests | 200 | 503 | other | mismatched | TTFT p50 ms | TTFT p99 ms "
          "| tokens/s | peak RSS MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.clients} | {wall:.0f} | {stats['requests']} | {stats['ok']} | {stats['busy']} "
          f"| {stats['other']} | {stats['mismatch']} | {q[49] * 1e3:.0f} | {q[98] * 1e3:.0f} "
          f"| {stats['tokens'] / wall:.1f} | {int(hwm) / 1024:.0f} |")
    if stats["other"] or stats["mismatch"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
