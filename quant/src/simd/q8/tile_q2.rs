//! Register-tiled Q2_0 · Q8_0 GEMM for prompt chunks (AVX-512 VBMI/VNNI) on the packed Q8_0
//! activation panel of [`crate::simd::q8::tile`]: up to four weight rows × eight columns per call,
//! every output with the scalar reference's bits. The same kernel runs on Q2_0_X rows (the
//! load-time layout of the decode kernels), taking each block's code bytes back from it.
//!
//! Each 64-element weight block's 2-bit codes c (0..3, value c − 1) are cut into bytes by
//! `vpmultishiftqb` once per row, and each 32-element half is broadcast to both halves of a
//! register so that it lines up with a column pair's activation block in the panel.
//! `vpdpbusd` forms Σ c·y per 4-element lane, starting from −Σ y (the panel's −128·Σ₄y
//! shifted right by seven, exact; one shift per column pair and half, shared by the four
//! rows), which leaves the exact Σ (c − 1)·y.
//! The reference combines each half's integer sum as a scalar —
//! `s += d·(dy₀·Σ₀ + dy₁·Σ₁)` — so the lane sums are reduced per (row, column, half): four
//! rows' registers at a time by an unpack tree, leaving four rows of one column per 128-bit
//! lane, and the float combine runs on four rows at once, in the reference's order.

use crate::simd::q8::tile::TILE_COLS;

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::TILE_COLS;
    use crate::simd::q8::q2_0::q2_block;
    use crate::simd::{f16c, fold_pairs, store_tile, tile_shapes, tree4};
    use std::arch::x86_64::*;

    use crate::simd::q8::tile::PAIR_BLOCK;

    /// Safe entry: checks the shapes, then runs the kernel for the tile's row and pair count
    /// (`X`: Q2_0_X rows, whole groups of eight blocks).
    pub(crate) fn tile_entry<const X: bool>(
        n: usize,
        rows: &[&[u8]],
        panel: &[u8],
        cols: usize,
        out: &mut [f32],
    ) {
        let nb = check_shapes::<X>(n, rows, panel, cols, out);
        macro_rules! go {
            ($r:literal, $p:literal) => {{
                let xs: &[&[u8]; $r] = rows.try_into().expect("row count checked above");
                // SAFETY: `table::kernels` hands this entry out only after checking the
                // features; the shapes are checked above (every block and pair-block index
                // is in bounds).
                let s = unsafe { tile::<$r, $p, X>(nb, xs, panel) };
                store_tile(&s, $r, cols, 1.0, out);
            }};
        }
        tile_shapes!(rows.len(), cols.div_ceil(2), go)
    }

    /// Checks a Q2_0 tile call's shapes (`X`: Q2_0_X rows, whole groups of eight blocks) —
    /// row and column counts, panel, output and row lengths — and returns the blocks per row.
    /// Shared by this tile and the AVX2 one ([`super::super::tile_q2_avx2`]).
    ///
    /// # Panics
    /// On any mismatch.
    pub(crate) fn check_shapes<const X: bool>(
        n: usize,
        rows: &[&[u8]],
        panel: &[u8],
        cols: usize,
        out: &[f32],
    ) -> usize {
        let nb = n / 64;
        assert_eq!(
            n % if X { 512 } else { 64 },
            0,
            "whole Q2_0 / Q2_0_X blocks"
        );
        crate::simd::q8::tile::x86::check_panel_call(n, rows, panel, cols, out, nb * 18);
        nb
    }

    /// The f32 at byte `at` of `b`.
    fn f32_at(b: &[u8], at: usize) -> f32 {
        f32::from_le_bytes(crate::blocks::le4(b, at))
    }

    /// The tile's sums `[column][row]` for `R` rows × `P` column pairs (see the module docs).
    ///
    /// # Safety
    /// The CPU must have the enabled features; every row holds `nb` Q2_0 blocks (`X`: in
    /// Q2_0_X groups of eight) and `panel` `2·nb·P` pair-blocks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,f16c")]
    unsafe fn tile<const R: usize, const P: usize, const X: bool>(
        nb: usize,
        xs: &[&[u8]; R],
        panel: &[u8],
    ) -> [[f32; 4]; TILE_COLS] {
        let zero = _mm512_setzero_si512();
        let m2 = _mm512_set1_epi8(3);
        // SAFETY: CUT has 64 bytes (unaligned load).
        let cut = unsafe { _mm512_loadu_si512(crate::simd::q8::q2_0::CUT.as_ptr().cast()) };
        let spread = _mm512_setr_epi64(0, 0, 0, 0, 1, 1, 1, 1);
        let mut s = [_mm_setzero_ps(); TILE_COLS];
        for i in 0..nb {
            let mut halves = [[zero; 2]; R];
            let mut dxs = [0f32; 4];
            for r in 0..R {
                let (q, d) = q2_block::<X>(&xs[r][144 * (i / 8)..], i % 8);
                let q = _mm512_permutexvar_epi64(spread, _mm512_castsi128_si512(q));
                let codes = _mm512_and_si512(_mm512_multishift_epi64_epi8(cut, q), m2);
                halves[r] = [
                    _mm512_shuffle_i64x2::<0b01_00_01_00>(codes, codes),
                    _mm512_shuffle_i64x2::<0b11_10_11_10>(codes, codes),
                ];
                dxs[r] = f16c!(d.to_le_bytes());
            }
            // SAFETY: `dxs` is 16 readable bytes (unaligned load).
            let dx = unsafe { _mm_loadu_ps(dxs.as_ptr()) };
            for p in 0..P {
                // integer sums per half of the pair's two columns, four rows per register
                let mut isum = [[_mm_setzero_si128(); 2]; 2];
                for (h, isum_h) in isum.iter_mut().enumerate() {
                    let pb = (2 * i + h) * P + p;
                    let at = &panel[pb * PAIR_BLOCK..(pb + 1) * PAIR_BLOCK];
                    // SAFETY: 64 code bytes at the start of the pair-block and the 64 bytes of
                    // −128·Σ₄y at 128 (unaligned loads).
                    let (y, neg) = unsafe {
                        (
                            _mm512_loadu_si512(at.as_ptr().cast()),
                            _mm512_srai_epi32::<7>(_mm512_loadu_si512(at[128..].as_ptr().cast())),
                        )
                    };
                    let a: [__m512i; 4] = std::array::from_fn(|r| {
                        if r < R {
                            _mm512_dpbusd_epi32(neg, halves[r][h], y)
                        } else {
                            zero
                        }
                    });
                    let (first, second) = fold_pairs(tree4(a[0], a[1], a[2], a[3]));
                    *isum_h = [first, second];
                }
                for k in 0..2 {
                    let c = 2 * p + k;
                    let dy = |h: usize| {
                        let pb = (2 * i + h) * P + p;
                        _mm_set1_ps(f32_at(panel, pb * PAIR_BLOCK + 64 + 32 * k))
                    };
                    let inner = _mm_add_ps(
                        _mm_mul_ps(dy(0), _mm_cvtepi32_ps(isum[0][k])),
                        _mm_mul_ps(dy(1), _mm_cvtepi32_ps(isum[1][k])),
                    );
                    s[c] = _mm_add_ps(s[c], _mm_mul_ps(dx, inner));
                }
            }
        }
        let mut out = [[0f32; 4]; TILE_COLS];
        for (o, v) in out.iter_mut().zip(s) {
            // SAFETY: `o` has room for 4 f32.
            unsafe { _mm_storeu_ps(o.as_mut_ptr(), v) };
        }
        out
    }
}
