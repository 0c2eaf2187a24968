//! Criterion benches of the scalar reference layer: dequantization and reference dot
//! products for every supported weight type, reported as MB/s of weight bytes.
//!
//! Run: `cargo bench -p fathom-benches --bench quant` (add `-- dequant`, `-- dot`, `-- vec_dot`
//! or `-- gemm` to filter). `vec_dot` and `gemm` time the SIMD kernels of issue 5.
//! These numbers are the baseline the SIMD kernels of issue 5 must beat.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fathom_benches::test_data;
use quant::{bytes_for, dequantize_row, quantize_activation, quantize_row, vec_dot, DType};

/// Weight types with a reference dot; IQ types (no quantizer) get random-but-valid blocks by
/// quantizing through a neighbour type is not possible, so they are built from random bytes
/// with a fixed small scale.
const TYPES: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q8_0,
    DType::Q2_0,
    DType::Q1_0,
    DType::MXFP4,
    DType::Q2_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
    DType::IQ2_XXS,
    DType::IQ2_XS,
    DType::IQ1_S,
    DType::IQ1_S_X,
    DType::IQ2_XXS_X,
    DType::IQ1_M,
    DType::IQ1_M_X,
    DType::IQ4_XS,
];

const N: usize = 4096; // one V4-Flash hidden row

fn weights(t: DType) -> Vec<u8> {
    let mut w = vec![0u8; bytes_for(t, N).unwrap()];
    if t.info().quantize.is_some() {
        quantize_row(t, &test_data(N, t as u64), &mut w).unwrap();
    } else {
        // random codes with a valid f16 scale of 0.01 in the first two bytes (IQ2/IQ1_S/IQ4_XS)
        let mut s = 0x9E37_79B9u64 ^ t as u64;
        for b in w.iter_mut() {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (s >> 56) as u8;
        }
        for blk in w.chunks_exact_mut(t.type_size()) {
            match t {
                DType::IQ1_M | DType::IQ1_M_X => {
                    // the scale words are the block's last eight bytes
                    let hi = t.type_size() - 7;
                    for i in 0..4 {
                        blk[hi + 2 * i] &= 0x0F;
                    }
                    blk[hi + 6] |= 0x20; // f16 0x2000-ish: small positive scale
                }
                DType::Q2_K => {
                    blk[80..82].copy_from_slice(&0x211eu16.to_le_bytes());
                    blk[82..84].copy_from_slice(&0x211eu16.to_le_bytes());
                }
                _ => blk[0..2].copy_from_slice(&0x211eu16.to_le_bytes()),
            }
        }
    }
    w
}

fn bench_dequant(c: &mut Criterion) {
    let mut g = c.benchmark_group("dequant");
    for &t in TYPES {
        let w = weights(t);
        let mut out = vec![0f32; N];
        g.throughput(Throughput::Bytes(w.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(t.name()), &w, |b, w| {
            b.iter(|| dequantize_row(t, black_box(w), &mut out).unwrap())
        });
    }
    g.finish();
}

fn bench_dot(c: &mut Criterion) {
    let mut g = c.benchmark_group("dot_ref");
    for &t in TYPES {
        let w = weights(t);
        let vt = t.info().dot_type.unwrap();
        let mut a = vec![0u8; bytes_for(vt, N).unwrap()];
        quantize_activation(vt, &test_data(N, 99), &mut a).unwrap();
        g.throughput(Throughput::Bytes(w.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(t.name()), &w, |b, w| {
            b.iter(|| vec_dot(t, N, black_box(w), black_box(&a)).unwrap())
        });
    }
    g.finish();
}

/// Every dot and multi-row kernel of the kernel table this CPU runs, at every level it has
/// (`vec_dot/<type>/<kernel>`, the multi-row ones as `rows4-<kernel>`: four rows against one
/// activation row, bytes of all four rows per second). A lower level's kernel is benched
/// too: on an AVX-512 CPU the AVX2 kernels are what an AVX2 CPU would run.
fn bench_kernels(c: &mut Criterion) {
    use quant::simd::table::{column, CpuLevel};
    let mut g = c.benchmark_group("vec_dot");
    let level = CpuLevel::detect();
    for &t in TYPES {
        let dots = column(t, level, |r| r.dot);
        let rows = column(t, level, |r| r.rows);
        if dots.is_empty() && rows.is_empty() {
            continue;
        }
        let w = weights(t);
        let vt = t.info().dot_type.unwrap();
        let mut a = vec![0u8; bytes_for(vt, N).unwrap()];
        quantize_activation(vt, &test_data(N, 99), &mut a).unwrap();
        g.throughput(Throughput::Bytes(w.len() as u64));
        for (_, k) in dots {
            g.bench_with_input(BenchmarkId::new(t.name(), k.name), &w, |b, w| {
                b.iter(|| (k.f)(N, black_box(w), black_box(&a)))
            });
        }
        let four: Vec<Vec<u8>> = (0..4).map(|_| weights(t)).collect();
        let wr: Vec<&[u8]> = four.iter().map(|w| w.as_slice()).collect();
        g.throughput(Throughput::Bytes(4 * w.len() as u64));
        for (_, k) in rows {
            let mut out = [0f32; 4];
            g.bench_function(
                BenchmarkId::new(t.name(), format!("rows4-{}", k.name)),
                |b| b.iter(|| (k.f)(N, black_box(&wr), black_box(&a), &mut out)),
            );
        }
    }
    g.finish();
}

/// The activation quantizers (`act_quant/<type>`, bytes of f32 input per second), and each
/// SIMD form and the scalar one (`act_quant/<type>/<form>`).
fn bench_act_quant(c: &mut Criterion) {
    let mut g = c.benchmark_group("act_quant");
    let x = test_data(N, 5);
    for t in [DType::Q8_0, DType::Q8_K] {
        let mut a = vec![0u8; bytes_for(t, N).unwrap()];
        g.throughput(Throughput::Bytes((N * 4) as u64));
        g.bench_function(t.name(), |b| {
            b.iter(|| quantize_activation(t, black_box(&x), &mut a).unwrap())
        });
        let (forms, scalar): (_, quant::simd::QuantizeFn) = match t {
            DType::Q8_0 => (
                quant::simd::q8_0_forms(),
                quant::codec::q8::quant_q8_0_x86_scalar,
            ),
            _ => (
                quant::simd::q8_k_forms(),
                quant::codec::q8::quant_q8_k_scalar,
            ),
        };
        for (name, f) in forms.into_iter().chain([("scalar", scalar)]) {
            g.bench_function(BenchmarkId::new(t.name(), name), |b| {
                b.iter(|| f(black_box(&x), &mut a))
            });
        }
    }
    g.finish();
}

/// Prompt-chunk kernels on one thread, in cache (`gemm/<type>/<kernel>`), as FLOP per
/// second (`2·N` per row-column; criterion prints elem/s: read Gelem/s as GFLOP/s): the
/// multi-column kernel (one row × eight columns) next to the register tiles (four rows ×
/// eight columns, four × four for the float types; Q8_0's sixteen-row group tile), and the
/// row expanders (Q8_0 groups, IQ2_XXS, IQ2_XXS_X, IQ1_S, IQ1_S_X; bytes of the packed type
/// per second).
fn bench_gemm_kernels(c: &mut Criterion) {
    use quant::simd::iq::tile as tile_grid;
    use quant::simd::q8::tile as tile_q8;
    use quant::simd::Tile;
    let mut g = c.benchmark_group("gemm");
    for t in [
        DType::Q8_0,
        DType::Q2_0,
        DType::IQ2_XXS,
        DType::IQ1_S,
        DType::IQ1_S_X,
        DType::IQ2_XXS_X,
        DType::IQ1_M,
        DType::IQ1_M_X,
        DType::Q4_K,
        DType::Q5_K,
        DType::MXFP4,
        DType::Q6_K,
        DType::BF16,
        DType::F32,
    ] {
        let rows: Vec<Vec<u8>> = (0..4).map(|_| weights(t)).collect();
        let vt = t.info().dot_type.unwrap();
        let acts: Vec<Vec<u8>> = (0..8u64)
            .map(|i| {
                let mut a = vec![0u8; bytes_for(vt, N).unwrap()];
                quantize_activation(vt, &test_data(N, 99 + i), &mut a).unwrap();
                a
            })
            .collect();
        let ar: Vec<&[u8]> = acts.iter().map(|a| a.as_slice()).collect();
        let wr: Vec<&[u8]> = rows.iter().map(|w| w.as_slice()).collect();
        let Some(k) = quant::simd::kernels(t, quant::simd::CpuLevel::detect()) else {
            continue;
        };
        if let Some(multi) = k.multi.map(|m| m.f) {
            let mut out = [0f32; 8];
            g.throughput(Throughput::Elements((2 * N * 8) as u64));
            g.bench_function(BenchmarkId::new(t.name(), "multi1x8"), |b| {
                b.iter(|| multi(N, black_box(wr[0]), &ar, &mut out))
            });
            // one column: the in-register lookup against the one-column kernel's gathers
            g.bench_function(BenchmarkId::new(t.name(), "multi1x1"), |b| {
                b.iter(|| multi(N, black_box(wr[0]), &ar[..1], &mut out[..1]))
            });
            // the lower levels' multi-column kernels (the AVX2 prompt path)
            let lower = quant::simd::table::column(t, k.level, |r| r.multi);
            for (level, other) in lower.into_iter().rev().skip(1) {
                g.throughput(Throughput::Elements((2 * N * 8) as u64));
                g.bench_function(
                    BenchmarkId::new(t.name(), format!("multi1x8-{level}")),
                    |b| b.iter(|| (other.f)(N, black_box(wr[0]), &ar, &mut out)),
                );
            }
        }
        let mut out = [0f32; 32];
        match k.tile.map(|k| k.f) {
            Some(Tile::Panel(tile)) => {
                let mut panel = vec![0u8; tile_q8::panel_bytes(N, 8)];
                tile_q8::pack_q8_0_panel(N, &ar, &mut panel);
                g.throughput(Throughput::Elements((2 * N * 32) as u64));
                g.bench_function(BenchmarkId::new(t.name(), "tile4x8"), |b| {
                    b.iter(|| tile(N, black_box(&wr), &panel, 8, &mut out))
                });
            }
            Some(Tile::Q8Group { tile, expand }) => {
                use quant::simd::q8::tile_x16;
                let rows16: Vec<&[u8]> = (0..16).map(|i| wr[i % 4]).collect();
                let mut group = vec![0u8; tile_x16::group_bytes(N)];
                expand(N, &rows16, &mut group);
                let mut panel = vec![0u8; tile_x16::panel_bytes(N, 8)];
                tile_x16::pack_panel(N, &ar, &mut panel);
                let mut gout = [[0f32; 16]; 8];
                g.throughput(Throughput::Elements((2 * N * 128) as u64));
                g.bench_function(BenchmarkId::new(t.name(), "group16x8"), |b| {
                    b.iter(|| tile(N, black_box(&group), &panel, 8, &mut gout))
                });
                // the lower levels' group tiles (AVX2 with and without AVX-VNNI), on groups
                // from their own expanders
                let lower = quant::simd::table::column(t, k.level, |r| r.tile);
                for (level, other) in lower.into_iter().rev().skip(1) {
                    let Tile::Q8Group { tile, expand } = other.f else {
                        continue;
                    };
                    let mut lgroup = vec![0u8; tile_x16::group_bytes(N)];
                    expand(N, &rows16, &mut lgroup);
                    g.bench_function(
                        BenchmarkId::new(t.name(), format!("group16x8-{level}")),
                        |b| b.iter(|| tile(N, black_box(&lgroup), &panel, 8, &mut gout)),
                    );
                }
                g.throughput(Throughput::Bytes((16 * wr[0].len()) as u64));
                g.bench_function(BenchmarkId::new(t.name(), "expand-group"), |b| {
                    b.iter(|| expand(N, black_box(&rows16), &mut group))
                });
            }
            Some(Tile::Grid {
                tile,
                expand,
                group,
                amx,
            }) => {
                let mut ex = vec![vec![0u8; tile_grid::expanded_bytes(N)]; 4];
                for (w, e) in wr.iter().zip(ex.iter_mut()) {
                    expand(w, e);
                }
                let er: Vec<&[u8]> = ex.iter().map(|e| e.as_slice()).collect();
                let mut panel = vec![0u8; tile_grid::panel_bytes(N, 8)];
                tile_grid::pack_panel(N, &ar, &mut panel);
                g.throughput(Throughput::Elements((2 * N * 32) as u64));
                g.bench_function(BenchmarkId::new(t.name(), "tile4x8"), |b| {
                    b.iter(|| tile(N, black_box(&er), &ar, &panel, &mut out))
                });
                let mut e = vec![0u8; tile_grid::expanded_bytes(N)];
                g.throughput(Throughput::Bytes(wr[0].len() as u64));
                g.bench_function(BenchmarkId::new(t.name(), "expand"), |b| {
                    b.iter(|| expand(black_box(wr[0]), &mut e))
                });
                bench_grid_group(&mut g, t, group, "", &wr, &ar);
                // the lower levels' group tiles (AVX-VNNI)
                let lower = quant::simd::table::column(t, k.level, |r| r.tile);
                for (level, other) in lower.into_iter().rev().skip(1) {
                    if let Tile::GridGroup(gg) = other.f {
                        bench_grid_group(&mut g, t, gg, &format!("-{level}"), &wr, &ar);
                    }
                }
                if let Some(amx) = amx {
                    bench_amx_tile(&mut g, t, amx, &er, wr[0]);
                }
            }
            Some(Tile::Float(tile)) => {
                let dot = k.dot.f;
                g.throughput(Throughput::Elements((2 * N * 16) as u64));
                g.bench_function(BenchmarkId::new(t.name(), "single4x4"), |b| {
                    b.iter(|| {
                        for (r, w) in wr.iter().enumerate() {
                            for (c, a) in ar[..4].iter().enumerate() {
                                out[4 * r + c] = dot(N, black_box(w), a);
                            }
                        }
                    })
                });
                g.bench_function(BenchmarkId::new(t.name(), "tile4x4"), |b| {
                    b.iter(|| tile(N, black_box(&wr), &ar[..4], &mut out[..16]))
                });
                // the lower levels' float tiles (BF16 without AVX512-BF16)
                let lower = quant::simd::table::column(t, k.level, |r| r.tile);
                for (level, other) in lower.into_iter().rev().skip(1) {
                    let Tile::Float(other) = other.f else {
                        continue;
                    };
                    g.bench_function(
                        BenchmarkId::new(t.name(), format!("tile4x4-{level}")),
                        |b| b.iter(|| other(N, black_box(&wr), &ar[..4], &mut out[..16])),
                    );
                }
            }
            Some(Tile::GridGroup(gg)) => bench_grid_group(&mut g, t, gg, "", &wr, &ar),
            None => {}
        }
    }
    g.finish();
}

/// The sixteen-row group tile of IQ2_XXS or IQ1_M (`gemm/<type>/group16x8<suffix>`: 16 rows, made
/// from the four weight rows `rows`, × 8 columns) and its group expander
/// (`gemm/<type>/expand-group<suffix>`, bytes of the sixteen weight rows per second); the
/// suffix names a lower level's kernels.
fn bench_grid_group(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    t: DType,
    gg: quant::simd::table::GridGroup,
    suffix: &str,
    rows: &[&[u8]],
    acts: &[&[u8]],
) {
    use quant::simd::iq::group as iq_group;
    let rows16: Vec<&[u8]> = (0..16).map(|i| rows[i % rows.len()]).collect();
    let mut group = vec![0u8; iq_group::group_bytes(N, gg.scales)];
    (gg.expand)(N, &rows16, &mut group);
    let mut panel = vec![0u8; iq_group::panel_bytes(N, 8, gg.scales)];
    iq_group::pack_panel(N, &acts[..8], &mut panel, gg.scales);
    let mut out = [[0f32; 16]; 8];
    g.throughput(Throughput::Elements((2 * N * 128) as u64));
    g.bench_function(
        BenchmarkId::new(t.name(), format!("group16x8{suffix}")),
        |b| b.iter(|| (gg.tile)(N, black_box(&group), &panel, 8, &mut out)),
    );
    g.throughput(Throughput::Bytes((16 * rows[0].len()) as u64));
    g.bench_function(
        BenchmarkId::new(t.name(), format!("expand-group{suffix}")),
        |b| b.iter(|| (gg.expand)(N, black_box(&rows16), &mut group)),
    );
}

/// The AMX grid tile (`gemm/<type>/amx16x16`: 16 rows × 16 columns, rows made from the four
/// expanded rows), its splitter (`gemm/<type>/amx-split`, bytes of the packed type per
/// second) and, for IQ2_XXS_X, the direct expander that replaces expander and splitter
/// (`gemm/IQ2_XXS_X/amx-direct`, from the packed row `w`), where this process may use AMX.
fn bench_amx_tile(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    t: DType,
    amx: quant::simd::table::AmxTile,
    expanded: &[&[u8]],
    w: &[u8],
) {
    use quant::simd::iq::amx as tile_amx;
    let kind = amx.kind;
    let ab = tile_amx::amx_bytes(N);
    let mut rows = vec![0u8; 16 * ab];
    for (i, r) in rows.chunks_exact_mut(ab).enumerate() {
        tile_amx::split_expanded(kind, expanded[i % expanded.len()], r);
    }
    let acts: Vec<Vec<u8>> = (0..16u64)
        .map(|i| {
            let mut a = vec![0u8; bytes_for(DType::Q8_K, N).unwrap()];
            quantize_activation(DType::Q8_K, &test_data(N, 199 + i), &mut a).unwrap();
            a
        })
        .collect();
    let ar: Vec<&[u8]> = acts.iter().map(|a| a.as_slice()).collect();
    let mut panel = vec![0u8; tile_amx::panel_bytes(N, 16)];
    tile_amx::pack_panel(N, &ar, &mut panel);
    let mut out = vec![0f32; 256];
    g.throughput(Throughput::Elements((2 * N * 256) as u64));
    g.bench_function(BenchmarkId::new(t.name(), "amx16x16"), |b| {
        b.iter(|| (amx.tile)(N, black_box(&rows), 16, &panel, 16, &mut out))
    });
    let mut a = vec![0u8; ab];
    g.throughput(Throughput::Bytes((N / 256 * t.info().type_size) as u64));
    g.bench_function(BenchmarkId::new(t.name(), "amx-split"), |b| {
        b.iter(|| (amx.split)(kind, black_box(expanded[0]), &mut a))
    });
    if let Some(direct) = amx.direct {
        g.bench_function(BenchmarkId::new(t.name(), "amx-direct"), |b| {
            b.iter(|| direct(black_box(w), &mut a))
        });
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_millis(800));
    targets = bench_dequant, bench_dot, bench_kernels, bench_act_quant, bench_gemm_kernels
}
criterion_main!(benches);
