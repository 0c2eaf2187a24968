//! Executor behaviour: barrier elision counts and equivalence, liveness reuse, input/output
//! errors, profiler output.

use fathom_backends::{ExecConfig, ExecError, Executor};
use graph::{Graph, TensorDesc};

fn cfg(threads: usize, elide: bool, profile: bool) -> ExecConfig {
    ExecConfig {
        threads,
        cpus: None,
        pin: false,
        elide_barriers: elide,
        spin: 1000,
        profile: profile.then_some(fathom_backends::profiler::ProfileOutput::Table),
        guards: true,
        ..ExecConfig::default()
    }
}

/// x → rms_norm(w) → mul(g) → scale → silu → add(x) ; then a matmul that needs a barrier.
fn chain() -> (Graph, Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut g = Graph::new();
    let n = 64;
    // three columns: F32 prompt chunks of four or more go through the float tile GEMM,
    // which accumulates in f32 and is only within a bound of the reference; these tests
    // compare the executor with the reference bit for bit
    let x = g.input("x", TensorDesc::f32(&[n, 3]).unwrap()).unwrap();
    let w = g.input("w", TensorDesc::f32(&[n]).unwrap()).unwrap();
    let gate = g.input("g", TensorDesc::f32(&[n, 3]).unwrap()).unwrap();
    let a = g.rms_norm_w(x, w, 1e-6).unwrap();
    let b = g.mul(a, gate).unwrap();
    let c = g.scale(b, 0.5, 0.1).unwrap();
    let d = g.silu(c).unwrap();
    let e = g.add(d, x).unwrap();
    let wm = g
        .weight(
            "wm",
            TensorDesc::f32(&[n, 7]).unwrap(),
            graph::WeightData::from_vec(vec![0x3c; n * 7 * 4]),
        )
        .unwrap();
    let f = g.mul_mat(wm, e).unwrap();
    let h = g.silu(f).unwrap();
    g.output("out", h).unwrap();
    let xs: Vec<f32> = (0..n * 3)
        .map(|i| ((i * 37 % 17) as f32 - 8.0) / 4.0)
        .collect();
    let ws: Vec<f32> = (0..n).map(|i| 1.0 + i as f32 / 64.0).collect();
    let gs: Vec<f32> = (0..n * 3)
        .map(|i| ((i * 11 % 13) as f32 - 6.0) / 3.0)
        .collect();
    (g, xs, ws, gs)
}

fn run(mut e: Executor, xs: &[f32], ws: &[f32], gs: &[f32]) -> (Executor, Vec<f32>) {
    e.set_input_f32("x", xs).unwrap();
    e.set_input_f32("w", ws).unwrap();
    e.set_input_f32("g", gs).unwrap();
    e.fill_guards();
    e.run();
    assert!(e.broken_guards().is_empty());
    let out = e.output_f32("out").unwrap();
    (e, out)
}

#[test]
fn elision_drops_row_wise_barriers_and_changes_nothing() {
    let (g, xs, ws, gs) = chain();
    let (_, want) = run(Executor::reference(g.clone()), &xs, &ws, &gs);
    for t in [1, 2, 3, 4] {
        let (e_on, on) = run(Executor::new(g.clone(), cfg(t, true, false)), &xs, &ws, &gs);
        let (e_off, off) = run(
            Executor::new(g.clone(), cfg(t, false, false)),
            &xs,
            &ws,
            &gs,
        );
        // the row-wise chain norm→mul→scale→silu→add needs no barrier; the matmul and the
        // silu after it (which reads rows of a chunk-split output) do
        assert_eq!(e_on.plan().elided_barriers(), 4, "threads {t}");
        assert_eq!(e_on.plan().barriers(), 2);
        assert_eq!(e_off.plan().elided_barriers(), 0);
        assert_eq!(e_off.plan().barriers(), 6);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&on),
            bits(&off),
            "elision changed results at {t} threads"
        );
        assert_eq!(
            bits(&on),
            bits(&want),
            "executor differs from reference at {t} threads"
        );
    }
}

#[test]
fn repeated_runs_are_identical_and_arena_is_reused() {
    let (g, xs, ws, gs) = chain();
    let (mut e, first) = run(Executor::new(g.clone(), cfg(2, true, false)), &xs, &ws, &gs);
    for _ in 0..20 {
        e.run();
        assert_eq!(e.output_f32("out").unwrap(), first);
    }
    // liveness reuse: the plan without guards (which disables reuse) needs less arena
    let reuse = graph::Plan::new(
        &g,
        graph::PlanOptions {
            elide_barriers: true,
            guards: false,
        },
    );
    let all: usize = g
        .nodes()
        .iter()
        .filter(|n| !matches!(n.kind, graph::NodeKind::Weight(_)))
        .map(|n| n.desc.nbytes().div_ceil(64) * 64)
        .sum();
    assert!(
        reuse.arena_size() < all,
        "arena {} vs {}",
        reuse.arena_size(),
        all
    );
    let mut e2 = Executor::new(
        g.clone(),
        ExecConfig {
            guards: false,
            ..cfg(3, true, false)
        },
    );
    e2.set_input_f32("x", &xs).unwrap();
    e2.set_input_f32("w", &ws).unwrap();
    e2.set_input_f32("g", &gs).unwrap();
    e2.run();
    assert_eq!(e2.output_f32("out").unwrap(), first);
}

#[test]
fn input_errors_are_typed() {
    let (g, ..) = chain();
    let mut e = Executor::new(g, cfg(1, true, false));
    assert_eq!(
        e.set_input_f32("nope", &[1.0]),
        Err(ExecError::UnknownName("nope".into()))
    );
    assert!(matches!(
        e.set_input_f32("x", &[1.0; 3]),
        Err(ExecError::Size { .. })
    ));
    assert!(e.output_f32("missing").is_err());
}

#[test]
fn profiler_table_and_json() {
    let (g, xs, ws, gs) = chain();
    let (mut e, _) = run(Executor::new(g, cfg(2, true, true)), &xs, &ws, &gs);
    e.run();
    let p = e.profiler_mut().unwrap();
    p.add_tokens(2);
    let t = p.table();
    assert!(
        t.contains(
            "| op / subsystem | tensor types | calls | calls/tok | ms | ms/tok | share | GB/s |"
        ),
        "{t}"
    );
    assert!(
        t.contains("MUL_MAT") && t.contains("RMS_NORM") && t.contains("4 elided"),
        "{t}"
    );
    let j = p.to_json();
    assert_eq!(j["tokens"], 2);
    assert_eq!(j["elided_barriers_per_run"], 4);
    let ops = j["ops"].as_array().unwrap();
    let mm = ops.iter().find(|o| o["op"] == "MUL_MAT").unwrap();
    assert_eq!(mm["calls"], 2);
}

#[test]
fn profiler_gets_every_threads_timings_for_every_run() {
    // the worker threads hand their timings in before the run's last barrier; handing them
    // in after it raced with the collection and lost or mixed up runs
    let (g, xs, ws, gs) = chain();
    let (mut e, _) = run(Executor::new(g, cfg(3, true, true)), &xs, &ws, &gs);
    for _ in 0..200 {
        e.run();
        let got = e.profiler().unwrap().last_run_entries().to_vec();
        assert_eq!(got.len(), 3);
        assert!(got[0] > 0 && got.iter().all(|&n| n == got[0]), "{got:?}");
    }
}

/// Runs a masked-matmul graph (inputs `x` and `m`, output `out`) on `threads` threads.
fn run_masked(g: &Graph, threads: usize, xs: &[f32], mask: &[f32]) -> Vec<f32> {
    let mut e = Executor::new(g.clone(), cfg(threads, true, false));
    e.set_input_f32("x", xs).unwrap();
    e.set_input_f32("m", mask).unwrap();
    e.run();
    e.output_f32("out").unwrap()
}

#[test]
fn masked_matmul_never_reads_masked_weight_rows() {
    // row 1 of the weight is NaN: if it were read, the output would be NaN
    let mut g = Graph::new();
    let mut w = [0.5f32; 3 * 8];
    w[8..16].fill(f32::NAN);
    let wb: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
    let wid = g
        .weight(
            "w",
            TensorDesc::f32(&[8, 3]).unwrap(),
            graph::WeightData::from_vec(wb),
        )
        .unwrap();
    let x = g.input("x", TensorDesc::f32(&[8, 2]).unwrap()).unwrap();
    let m = g.input("m", TensorDesc::f32(&[3, 2]).unwrap()).unwrap();
    let y = g.mul_mat_masked(wid, x, m).unwrap();
    g.output("out", y).unwrap();
    for threads in [1, 2] {
        assert_eq!(
            run_masked(&g, threads, &[1.0; 16], &[1.0, 0.0, 2.0, 1.0, 0.0, 1.0]),
            vec![4.0, 0.0, 4.0, 4.0, 0.0, 4.0]
        );
    }
}

#[test]
fn masked_multi_column_matmul_gives_zeros_only_where_masked() {
    // Q8_0 weights {32, 3}: row 1 has a NaN scale. With 3 activation columns the prompt path
    // uses the multi-column kernel; row 1 is masked for every column and no NaN may reach the
    // output, row 2 is masked for one column only and must be 0 there and a dot elsewhere.
    let k = 32;
    let mut wb = Vec::new();
    for r in 0..3u8 {
        let d: u16 = if r == 1 { 0x7E00 } else { 0x3C00 }; // NaN, 1.0
        wb.extend_from_slice(&d.to_le_bytes());
        wb.extend((0..k).map(|i| (i as i8 - 16 + r as i8) as u8));
    }
    let mut g = Graph::new();
    let wid = g
        .weight(
            "w",
            TensorDesc::new(quant::DType::Q8_0, &[k, 3]).unwrap(),
            graph::WeightData::from_vec(wb),
        )
        .unwrap();
    let x = g.input("x", TensorDesc::f32(&[k, 3]).unwrap()).unwrap();
    let m = g.input("m", TensorDesc::f32(&[3, 3]).unwrap()).unwrap();
    let y = g.mul_mat_masked(wid, x, m).unwrap();
    g.output("out", y).unwrap();
    let xs: Vec<f32> = (0..3 * k).map(|i| ((i % 7) as f32 - 3.0) * 0.5).collect();
    // mask[t][n]: row 1 masked everywhere, row 2 masked for column 1
    let mask = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0];
    for threads in [1, 2] {
        let out = run_masked(&g, threads, &xs, &mask);
        assert!(out.iter().all(|v| v.is_finite()), "{out:?}");
        assert_eq!(out[4], 0.0); // column 1, row 1
        assert_eq!(out[5], 0.0); // column 1, row 2 (masked)
        assert!(out[2] != 0.0 && out[8] != 0.0, "{out:?}"); // row 2 where not masked
    }
}

#[test]
fn masked_q8_0_matvec_streams_rows_with_the_reference_bits() {
    // Q8_0 weights {288, 301} (nine blocks: a partial scale group) and one activation column:
    // the multi-row matvec path, in quarter-chunk row groups. Masked rows have NaN scales
    // and must give exactly 0; every other row must carry the reference dot's bits.
    let (k, n) = (288usize, 301usize);
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let masked: Vec<bool> = (0..n).map(|_| next() % 5 == 0).collect();
    let mut wb = Vec::new();
    for &m in &masked {
        for _ in 0..k / 32 {
            let d: u16 = if m {
                0x7E00
            } else {
                0x2000 + (next() % 0x1000) as u16
            };
            wb.extend_from_slice(&d.to_le_bytes());
            wb.extend((0..32).map(|_| next() as u8));
        }
    }
    let mut g = Graph::new();
    let wid = g
        .weight(
            "w",
            TensorDesc::new(quant::DType::Q8_0, &[k, n]).unwrap(),
            graph::WeightData::from_vec(wb.clone()),
        )
        .unwrap();
    let x = g.input("x", TensorDesc::f32(&[k, 1]).unwrap()).unwrap();
    let m = g.input("m", TensorDesc::f32(&[n, 1]).unwrap()).unwrap();
    let y = g.mul_mat_masked(wid, x, m).unwrap();
    g.output("out", y).unwrap();
    let xs: Vec<f32> = (0..k)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.03)
        .collect();
    let mask: Vec<f32> = masked.iter().map(|&m| if m { 0.0 } else { 1.0 }).collect();
    let mut qa = vec![0u8; quant::bytes_for(quant::DType::Q8_0, k).unwrap()];
    quant::quantize_activation(quant::DType::Q8_0, &xs, &mut qa).unwrap();
    let reference = quant::DType::Q8_0.info().vec_dot.unwrap();
    let rb = k / 32 * 34;
    for threads in [1, 2] {
        let out = run_masked(&g, threads, &xs, &mask);
        for r in 0..n {
            let want = if masked[r] {
                0.0
            } else {
                reference(k, &wb[r * rb..(r + 1) * rb], &qa)
            };
            assert_eq!(
                out[r].to_bits(),
                want.to_bits(),
                "row {r}, {threads} threads"
            );
        }
    }
}

#[test]
fn any_number_of_active_threads_gives_the_reference_bits() {
    // a pool of 3 whose runs use 1, 2 or 3 threads in a scrambled order (workers left out of
    // runs for long stretches, woken from parking): every run gives the reference's bits
    let (g, xs, ws, gs) = chain();
    let (_, want) = run(Executor::reference(g.clone()), &xs, &ws, &gs);
    let mut e = Executor::new(g, cfg(3, true, false));
    let mut s = 7u32;
    for i in 0..300 {
        s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let n = if i % 50 < 25 {
            1
        } else {
            1 + (s >> 16) as usize % 3
        };
        e.set_active_threads(Some(n));
        if i % 97 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(2)); // workers park
        }
        let out;
        (e, out) = run(e, &xs, &ws, &gs);
        assert_eq!(out, want, "run {i} with {n} threads");
    }
    // and back to the policy
    e.set_active_threads(None);
    for _ in 0..20 {
        let out;
        (e, out) = run(e, &xs, &ws, &gs);
        assert_eq!(out, want);
    }
}

#[test]
fn a_worker_left_out_of_a_run_is_never_lost_to_the_next() {
    // a worker woken by a run it takes no part in may read the job only after that run and
    // a later caller-alone run (which opens no gate) have been published; it must still
    // wake for the run after them. Oversubscribed pools (6 threads on any number of cores)
    // deschedule workers inside that window; a lost worker would deadlock the next run, so
    // the runs go on a thread of their own and a stall fails the test instead of hanging it
    let (g, xs, ws, gs) = chain();
    let (_, want) = run(Executor::reference(g.clone()), &xs, &ws, &gs);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut e = Executor::new(
            g,
            ExecConfig {
                spin: 0,
                ..cfg(6, true, false)
            },
        );
        for i in 0..3000 {
            for n in [2 + i % 4, 1, 6] {
                e.set_active_threads(Some(n));
                let out;
                (e, out) = run(e, &xs, &ws, &gs);
                assert_eq!(out, want, "run {i} with {n} threads");
            }
            if tx.send(i).is_err() {
                return;
            }
        }
    });
    let mut done = 0;
    while done < 2999 {
        match rx.recv_timeout(std::time::Duration::from_secs(20)) {
            Ok(i) => done = i,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("the runs stalled after round {done}: a worker missed its start")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the runs' thread failed after round {done}")
            }
        }
    }
}

/// x → rms_norm → rope (copying); the same rows → rms_norm → rope in place; and a third
/// rms_norm whose rows another node reads before a rope rotates them in place.
#[test]
fn rope_in_place_matches_the_copying_rope_and_keeps_only_the_barriers_it_needs() {
    use graph::op::rope::Rope;
    let (d, h, t) = (512, 3, 5);
    let mut g = Graph::new();
    let x = g.input("x", TensorDesc::f32(&[d, h, t]).unwrap()).unwrap();
    let pos = g
        .input("pos", TensorDesc::new(quant::DType::I32, &[t]).unwrap())
        .unwrap();
    let rope = Rope::ds4_compress(448, false);
    let a = g.rms_norm(x, 1e-6).unwrap();
    let ra = g.rope(a, pos, rope.clone()).unwrap();
    let b = g.rms_norm(x, 1e-6).unwrap();
    let rb = g.rope(b, pos, rope.clone().in_place()).unwrap();
    let c = g.rms_norm(x, 1e-6).unwrap();
    let sc = g.scale(c, 2.0, 0.0).unwrap();
    let rc = g.rope(c, pos, rope.clone().in_place()).unwrap();
    g.output("copy", ra).unwrap();
    g.output("in_place", rb).unwrap();
    g.output("read_first", rc).unwrap();
    g.output("scaled", sc).unwrap();
    let xs: Vec<f32> = (0..d * h * t)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 16.0)
        .collect();
    let ps: Vec<i32> = (0..t as i32).map(|i| 3 + 97 * i).collect();
    let plan = graph::Plan::new(&g, graph::PlanOptions::default());
    let barrier = |id| {
        plan.steps()
            .iter()
            .find(|s| s.node == id)
            .map(|s| s.barrier_before)
            .unwrap()
    };
    // rows the same thread wrote and nobody else read: no barrier; rows `scale` read: one
    assert!(
        !barrier(rb),
        "the in-place rope after its rms_norm kept a barrier"
    );
    assert!(
        barrier(rc),
        "an in-place rope over rows another node read lost its barrier"
    );
    let outs = |mut e: Executor| {
        e.set_input_f32("x", &xs).unwrap();
        e.set_input_i32("pos", &ps).unwrap();
        e.fill_guards();
        e.run();
        assert!(e.broken_guards().is_empty());
        ["copy", "in_place", "read_first", "scaled"].map(|n| {
            e.output_f32(n)
                .unwrap()
                .iter()
                .map(|f| f.to_bits())
                .collect::<Vec<_>>()
        })
    };
    let want = outs(Executor::reference(g.clone()));
    assert_eq!(want[0], want[1], "the reference's in-place rope differs");
    assert_eq!(want[0], want[2]);
    for threads in 1..=4 {
        let got = outs(Executor::new(g.clone(), cfg(threads, true, false)));
        assert_eq!(got, want, "threads {threads}");
    }
    // the scaled rows were read before the rotation: twice the unrotated norm
    let a_plain = {
        let mut g2 = Graph::new();
        let x2 = g2.input("x", TensorDesc::f32(&[d, h, t]).unwrap()).unwrap();
        let n = g2.rms_norm(x2, 1e-6).unwrap();
        let s = g2.scale(n, 2.0, 0.0).unwrap();
        g2.output("s", s).unwrap();
        let mut e = Executor::reference(g2);
        e.set_input_f32("x", &xs).unwrap();
        e.run();
        e.output_f32("s").unwrap()
    };
    let scaled: Vec<u32> = a_plain.iter().map(|f| f.to_bits()).collect();
    assert_eq!(want[3], scaled);
}
