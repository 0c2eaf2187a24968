#!/usr/bin/env python3
"""Side-by-side half of `benches/compare/compare.sh`: llama.cpp's prefill and decode throughput
through llama-cpp-python's low-level API, measured the way `fathom bench` measures fathom.

- pp<N>: a fresh sequence, N tokens decoded in chunks of --ubatch (rep 0 warms up).
- tg<N>: a fresh sequence, one token decoded, then N timed single-token decodes.
- -d D (llama-bench's depth): each test starts after D tokens already in the cache. The D
  tokens are decoded once (untimed, in --ubatch chunks), their state is saved
  (`llama_state_seq_get_data`) and restored before every repetition of every test, as
  `fathom bench -d` restores its depth state.
- --sweep N (like ik_llama.cpp's `llama-sweep-bench` and `fathom bench --sweep`): one
  sequence filled to N tokens an --ubatch chunk at a time after a one-chunk warm-up, every
  chunk timed; at every --sweep-stride-th chunk the first -n length of decode is timed from
  the state there (saved and restored). One object per measured chunk: n_depth, speed_pp (the
  chunk), speed_prompt (all chunks so far), speed_tg.

Prints one JSON array with llama-bench's field names (n_prompt, n_gen, n_threads, avg_ts,
stddev_ts), one object per test, so compare.sh can join it with `fathom bench --json`.
"""
import argparse
import ctypes
import json
import random
import statistics
import sys
import time

import llama_cpp as L


def decode(ctx, toks, pos0):
    n = len(toks)
    batch = L.llama_batch_init(n, 0, 1)
    try:
        batch.n_tokens = n
        for i, t in enumerate(toks):
            batch.token[i] = t
            batch.pos[i] = pos0 + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1 if i == n - 1 else 0
        rc = L.llama_decode(ctx, batch)
        if rc != 0:
            sys.exit(f"llama_decode failed with {rc}")
    finally:
        L.llama_batch_free(batch)


def sweep(a, ctx, mem, n_vocab, n_gen):
    """The --sweep rows (module doc)."""
    rng = random.Random(0)
    toks = [rng.randrange(n_vocab) for _ in range(a.sweep)]
    L.llama_memory_clear(mem, True)
    decode(ctx, toks[: a.ubatch], 0)  # warm-up
    L.llama_synchronize(ctx)
    L.llama_memory_clear(mem, True)
    rows, total = [], 0.0
    for i, s in enumerate(range(0, a.sweep, a.ubatch)):
        chunk = toks[s : min(s + a.ubatch, a.sweep)]
        measure = i % a.sweep_stride == 0
        tg = None
        if measure and n_gen:
            size = L.llama_state_seq_get_size(ctx, 0)
            state = (ctypes.c_uint8 * size)()
            if s and L.llama_state_seq_get_data(ctx, state, size, 0) != size:
                sys.exit("llama.cpp could not save the sweep's state")
            t0 = time.perf_counter()
            for j in range(n_gen):
                decode(ctx, [rng.randrange(n_vocab)], s + j)
            L.llama_synchronize(ctx)
            tg = n_gen / (time.perf_counter() - t0)
            L.llama_memory_clear(mem, True)
            if s and L.llama_state_seq_set_data(ctx, state, size, 0) != size:
                sys.exit("llama.cpp could not restore the sweep's state")
        t0 = time.perf_counter()
        decode(ctx, chunk, s)
        L.llama_synchronize(ctx)
        dt = time.perf_counter() - t0
        total += dt
        if measure:
            rows.append(
                {
                    "engine": "llama.cpp",
                    "n_threads": a.threads,
                    "n_ubatch": a.ubatch,
                    "n_depth": s,
                    "speed_pp": len(chunk) / dt,
                    "speed_prompt": (s + len(chunk)) / total,
                    "n_gen": n_gen,
                    "speed_tg": tg,
                }
            )
            print(f"llama.cpp sweep: {s + len(chunk)} tokens, {rows[-1]['speed_prompt']:.2f} tok/s so far", file=sys.stderr)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", "--prompt", default="512")
    ap.add_argument("-n", "--gen", default="32")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-r", "--reps", type=int, default=3)
    ap.add_argument("-u", "--ubatch", type=int, default=512)
    ap.add_argument("-d", "--depth", type=int, default=0)
    ap.add_argument("--sweep", type=int, default=0)
    ap.add_argument("--sweep-stride", type=int, default=1)
    a = ap.parse_args()

    @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    def quiet(level, text, user):  # llama.cpp logs to stderr otherwise
        pass

    L.llama_log_set(quiet, ctypes.c_void_p())
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    mp.use_mmap = True
    model = L.llama_model_load_from_file(a.model.encode(), mp)
    if not model:
        sys.exit(f"llama.cpp could not load {a.model}")
    n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    prompts = [int(x) for x in a.prompt.split(",") if int(x) > 0]
    gens = [int(x) for x in a.gen.split(",") if int(x) > 0]
    cp = L.llama_context_default_params()
    cp.n_ctx = max(a.depth + max(prompts + [0]), a.sweep) + max(gens + [0]) + 16
    cp.n_batch = a.ubatch
    cp.n_ubatch = a.ubatch
    cp.n_threads = a.threads
    cp.n_threads_batch = a.threads
    ctx = L.llama_init_from_model(model, cp)
    if not ctx:
        sys.exit("llama.cpp could not create a context")
    mem = L.llama_get_memory(ctx)
    rng = random.Random(0)
    out = []

    if a.sweep:
        print(json.dumps(sweep(a, ctx, mem, n_vocab, max(gens + [0]))))
        L.llama_free(ctx)
        L.llama_model_free(model)
        return

    # the depth: decoded once (untimed), its state saved and restored before every repetition
    # of every test (V4's compressed caches cannot be cut back: `llama_memory_seq_rm` refuses)
    d = a.depth
    state = None
    if d:
        L.llama_memory_clear(mem, True)
        fill = [rng.randrange(n_vocab) for _ in range(d)]
        for s in range(0, d, a.ubatch):
            decode(ctx, fill[s : min(s + a.ubatch, d)], s)
        L.llama_synchronize(ctx)
        size = L.llama_state_seq_get_size(ctx, 0)
        state = (ctypes.c_uint8 * size)()
        if L.llama_state_seq_get_data(ctx, state, size, 0) != size:
            sys.exit("llama.cpp could not save the depth's state")

    def run(n_prompt, n_gen):
        samples = []
        for rep in range(a.reps + 1):
            L.llama_memory_clear(mem, True)
            if state is not None:
                if L.llama_state_seq_set_data(ctx, state, len(state), 0) != len(state):
                    sys.exit("llama.cpp could not restore the depth's state")
            toks = [rng.randrange(n_vocab) for _ in range(max(n_prompt, 1) + n_gen)]
            if n_prompt:
                t0 = time.perf_counter()
                for s in range(0, n_prompt, a.ubatch):
                    decode(ctx, toks[s : min(s + a.ubatch, n_prompt)], d + s)
                L.llama_synchronize(ctx)
                dt = time.perf_counter() - t0
                rate = n_prompt / dt
            else:
                decode(ctx, toks[:1], d)
                t0 = time.perf_counter()
                for i in range(n_gen):
                    decode(ctx, [toks[1 + i]], d + 1 + i)
                L.llama_synchronize(ctx)
                rate = n_gen / (time.perf_counter() - t0)
            if rep > 0:  # rep 0 warms up, as in `fathom bench`
                samples.append(rate)
        sd = statistics.stdev(samples) if len(samples) > 1 else 0.0
        out.append(
            {
                "engine": "llama.cpp",
                "test": f"pp{n_prompt}" if n_prompt else f"tg{n_gen}",
                "n_prompt": n_prompt,
                "n_gen": n_gen,
                "n_depth": a.depth,
                "n_threads": a.threads,
                "avg_ts": statistics.mean(samples),
                "stddev_ts": sd,
            }
        )
        print(f"llama.cpp {out[-1]['test']}: {out[-1]['avg_ts']:.2f} ± {sd:.2f} tok/s", file=sys.stderr)

    for p in prompts:
        run(p, 0)
    for g in gens:
        run(0, g)
    print(json.dumps(out))
    L.llama_free(ctx)
    L.llama_model_free(model)


if __name__ == "__main__":
    main()
