//! Register-tiled Q8_0 · Q8_0 GEMM for prompt chunks on AVX2 CPUs, on the same packed
//! activation panel as the AVX-512 tile ([`crate::simd::q8::tile`]): up to four weight rows ×
//! eight columns per call, every output with the scalar reference's bits.
//!
//! AVX2 has no `vpdpbusd`, and the panel's +128 offset cannot be used with `vpmaddubsw` (a
//! pair of 255·127 products saturates 16 bits), so each (row, column, block) takes the sign
//! trick of [`super::avx2`]'s one-column kernel: |x| once per row and block, `vpsignb` of
//! the column's codes by x, `vpmaddubsw`, `vpmaddwd` by ones (lane k = the exact Σ of
//! elements 4k..4k+3), conversion, the scale product dw·dy and the FMA — the reference's
//! lanes and order. What the tile saves over the multi-column kernel
//! ([`super::avx2`]`::dot_q8_0_avx2_multi`) is everything around those six operations: the
//! panel's codes are 64-byte aligned (the raw activation blocks are 34 bytes apart, so half
//! of their 32-byte loads cross a cache line), its scales are already eight-lane vectors,
//! each column block serves two rows and each row block two columns from registers, and
//! there are no per-column branches. Two rows × one column pair (four accumulators) per
//! pass over the blocks keeps every value in the sixteen registers.

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use crate::blocks::{view, BlockQ8_0};
    use crate::simd::q8::tile::{x86::check_raw, x86::finish, PAIR_BLOCK};
    use std::arch::x86_64::*;

    /// Safe entry: checks the shapes, then runs the kernel for the tile's row and pair count.
    pub(crate) fn tile_entry(n: usize, rows: &[&[u8]], panel: &[u8], cols: usize, out: &mut [f32]) {
        let nb = check_raw(n, rows, panel, cols, out);
        macro_rules! go {
            ($r:literal, $p:literal) => {{
                let xs: [&[BlockQ8_0]; $r] = std::array::from_fn(|i| view::<BlockQ8_0>(rows[i]));
                // SAFETY: `table::kernels` hands this entry out only after checking the
                // features the kernel is compiled for; the shapes are checked above (every
                // block and pair-block index is in bounds).
                let acc = unsafe { tile::<$r, $p>(nb, &xs, panel) };
                finish(&acc, cols, out);
            }};
        }
        crate::simd::tile_shapes!(rows.len(), cols.div_ceil(2), go)
    }

    /// Blocks per span: each row's block scales are converted once per span, into a stack
    /// buffer the passes over that span read.
    const SPAN: usize = 64;

    /// The tile's lane accumulators (`R` rows × `P` column pairs, sixteen lanes per pair:
    /// eight of each column, as [`finish`] reads them). Span by span of [`SPAN`] blocks: the
    /// rows' scales are converted to f32 (eight at a time), then two rows × one column pair
    /// per pass over the span.
    ///
    /// # Safety
    /// The CPU must have the enabled features; every row holds `nb` blocks and `panel`
    /// `nb · P` pair-blocks.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile<const R: usize, const P: usize>(
        nb: usize,
        xs: &[&[BlockQ8_0]; R],
        panel: &[u8],
    ) -> [[[f32; 16]; P]; R] {
        // accumulators per row: pair p's two columns at [2p], [2p + 1]
        let mut acc = [[[_mm256_setzero_ps(); 2]; P]; R];
        let mut dws = [[0f32; SPAN]; R];
        for b0 in (0..nb).step_by(SPAN) {
            let len = SPAN.min(nb - b0);
            for (dw, x) in dws.iter_mut().zip(xs) {
                for (d8, x8) in dw.chunks_exact_mut(8).zip(x[b0..b0 + len].chunks(8)) {
                    let mut h = [0u16; 8];
                    for (h, x) in h.iter_mut().zip(x8) {
                        *h = u16::from_le_bytes(x.d);
                    }
                    // SAFETY: F16C is enabled; `h` is 16 readable bytes and `d8` 32 writable
                    // ones (unaligned).
                    unsafe {
                        let v = _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr().cast()));
                        _mm256_storeu_ps(d8.as_mut_ptr(), v);
                    }
                }
            }
            for r0 in (0..R).step_by(2) {
                let r1 = (r0 + 1).min(R - 1);
                for p in 0..P {
                    let mut a = [acc[r0][p][0], acc[r0][p][1], acc[r1][p][0], acc[r1][p][1]];
                    // SAFETY: same features as this function; rows r0, r1, pair p and the
                    // span's blocks are in bounds (the shapes the entry checked).
                    unsafe {
                        pass(
                            (xs[r0], xs[r1]),
                            (&dws[r0], &dws[r1]),
                            b0..b0 + len,
                            (p, P),
                            panel,
                            &mut a,
                        )
                    };
                    // (a single last row: r1 = r0, the same sums twice)
                    acc[r1][p] = [a[2], a[3]];
                    acc[r0][p] = [a[0], a[1]];
                }
            }
        }
        let mut lanes = [[[0f32; 16]; P]; R];
        for (l, a) in lanes.iter_mut().zip(&acc) {
            for (l, a) in l.iter_mut().zip(a) {
                // SAFETY: `l` has room for 16 f32.
                unsafe {
                    _mm256_storeu_ps(l.as_mut_ptr(), a[0]);
                    _mm256_storeu_ps(l[8..].as_mut_ptr(), a[1]);
                }
            }
        }
        lanes
    }

    /// One pass over `blocks` (within one span; `dws` are the two rows' span scales) for two
    /// rows and column pair `pair.0` of `pair.1`: accumulators (row 0 · column 2p, row 0 ·
    /// column 2p + 1, row 1 · column 2p, row 1 · column 2p + 1).
    ///
    /// # Safety
    /// The CPU must have the enabled features; the blocks and the pair are in bounds.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn pass(
        (x0, x1): (&[BlockQ8_0], &[BlockQ8_0]),
        (dw0, dw1): (&[f32; SPAN], &[f32; SPAN]),
        blocks: std::ops::Range<usize>,
        (p, pairs): (usize, usize),
        panel: &[u8],
        acc: &mut [__m256; 4],
    ) {
        let ones = _mm256_set1_epi16(1);
        let [mut c00, mut c01, mut c10, mut c11] = *acc;
        let b0 = blocks.start;
        assert!(blocks.end <= x0.len().min(x1.len()) && blocks.len() <= SPAN);
        assert!(blocks.end * pairs * PAIR_BLOCK <= panel.len() && p < pairs);
        for b in blocks {
            // SAFETY: blocks b of both rows and pair-block (b, p) of the panel are in bounds
            // (asserted above): each block's 32 code bytes and the pair-block's codes at
            // 0..64 and eight-lane scales at 64..128 are readable (unaligned loads).
            let (q0, q1, y0, y1, dy0, dy1) = unsafe {
                let pb = panel.as_ptr().add((b * pairs + p) * PAIR_BLOCK);
                (
                    _mm256_loadu_si256(x0.get_unchecked(b).qs.as_ptr().cast()),
                    _mm256_loadu_si256(x1.get_unchecked(b).qs.as_ptr().cast()),
                    _mm256_loadu_si256(pb.cast()),
                    _mm256_loadu_si256(pb.add(32).cast()),
                    _mm256_loadu_ps(pb.add(64).cast()),
                    _mm256_loadu_ps(pb.add(96).cast()),
                )
            };
            let (a0, a1) = (_mm256_sign_epi8(q0, q0), _mm256_sign_epi8(q1, q1));
            // SAFETY: b − b0 < SPAN (asserted above).
            let (d0, d1) = unsafe {
                (
                    _mm256_set1_ps(*dw0.get_unchecked(b - b0)),
                    _mm256_set1_ps(*dw1.get_unchecked(b - b0)),
                )
            };
            let lanes = |ax, qx, y| {
                let p16 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, qx));
                _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones))
            };
            c00 = _mm256_fmadd_ps(_mm256_mul_ps(d0, dy0), lanes(a0, q0, y0), c00);
            c01 = _mm256_fmadd_ps(_mm256_mul_ps(d0, dy1), lanes(a0, q0, y1), c01);
            c10 = _mm256_fmadd_ps(_mm256_mul_ps(d1, dy0), lanes(a1, q1, y0), c10);
            c11 = _mm256_fmadd_ps(_mm256_mul_ps(d1, dy1), lanes(a1, q1, y1), c11);
        }
        *acc = [c00, c01, c10, c11];
    }
}
