//! Register-tiled IQ2_XXS · Q8_K GEMM for MoE experts chosen by several tokens (AVX-512):
//! weight rows are first *expanded* — grid lookups, signs and scales done once per row — and
//! then up to four expanded rows × eight activation columns are multiplied per call, every
//! output with the scalar reference's bits.
//!
//! The expanded layout is its own format with its own reference ([`expand_iq2_xxs`], and an
//! AVX-512 expander tested byte for byte against it): per 256-element super-block
//! [`EXPANDED_SB`] bytes —
//! - bytes 0..256: the signed grid values `±grid` (int8, |v| ≤ 43) in element order;
//! - bytes 256..272: the eight group scales `2·(a1 >> 28) + 1` as little-endian i16;
//! - bytes 272..276: the super-block scale `d` as f32;
//! - bytes 276..280: the offset correction `128 · Σ_g ls_g · Σ_{j∈g} v_j` as i32.
//!
//! The kernel offsets the activation codes by 128 (`y ^ 0x80`, unsigned) so that
//! `vpmaddubsw` can multiply them by the signed values (pair sums ≤ 2·255·43, no
//! saturation); `vpdpwssd` multiplies the pair sums by their group's scale and accumulates.
//! Subtracting the correction leaves the exact integer Σ ls·v·y of the reference, and the
//! float combine `s += d·dy·Σ` and final `×0.125` are the reference's operations in the
//! reference's order. A 512-bit register holds a 32-element group of two columns against
//! one row's group broadcast to both halves, so per (row, column pair, group) the work is
//! one `vpmaddubsw` and one `vpdpwssd`; the activation register is reused for four rows and
//! the row's values for four column pairs. The multi-column kernel instead re-signs the
//! activations and reduces across lanes once per column and super-block.

use crate::blocks::{view, BlockIQ2XXS};
use crate::grids::{IQ2XXS_GRID, KSIGNS_IQ2XS};
use crate::scalar::le_f16;

/// Expanded bytes per 256-element super-block (see the module docs).
pub const EXPANDED_SB: usize = 280;

/// Most expanded weight rows in one tile call.
pub const TILE_ROWS: usize = 4;

/// Most activation columns in one tile call.
pub const TILE_COLS: usize = 8;

/// Bytes of an expanded row of `n` elements.
pub fn expanded_bytes(n: usize) -> usize {
    n / 256 * EXPANDED_SB
}

/// An expander: IQ2_XXS row `w` → its expanded layout in `out` ([`expanded_bytes`] long).
pub type ExpandFn = fn(w: &[u8], out: &mut [u8]);

/// The scalar reference expander (see the module docs for the layout).
///
/// # Panics
/// If `out` is not [`expanded_bytes`] of the row's length (a caller's bug).
pub fn expand_iq2_xxs(w: &[u8], out: &mut [u8]) {
    let xs = view::<BlockIQ2XXS>(w);
    assert_eq!(out.len(), xs.len() * EXPANDED_SB, "expanded row length");
    for (x, o) in xs.iter().zip(out.chunks_exact_mut(EXPANDED_SB)) {
        let mut corr = 0i32;
        for g in 0..8 {
            let q = &x.qs[8 * g..8 * g + 8];
            let a1 = u32::from_le_bytes([q[4], q[5], q[6], q[7]]);
            let ls = (2 * (a1 >> 28) + 1) as i32;
            let mut sum = 0i32;
            for k in 0..4 {
                let signs = KSIGNS_IQ2XS[((a1 >> (7 * k)) & 127) as usize];
                let grid = IQ2XXS_GRID[q[k] as usize];
                for j in 0..8 {
                    let v = (grid >> (8 * j)) as u8 as i32;
                    let v = if signs & (1 << j) != 0 { -v } else { v };
                    o[32 * g + 8 * k + j] = v as i8 as u8;
                    sum += v;
                }
            }
            o[256 + 2 * g..258 + 2 * g].copy_from_slice(&(ls as i16).to_le_bytes());
            corr += ls * sum;
        }
        o[272..276].copy_from_slice(&le_f16(x.d).to_le_bytes());
        o[276..280].copy_from_slice(&(128 * corr).to_le_bytes());
    }
}

/// The fastest expander on this CPU (AVX-512 VBMI, else the reference).
pub fn expand_iq2_xxs_fn() -> ExpandFn {
    #[cfg(target_arch = "x86_64")]
    if super::avx512_iq::has_features() && !super::force_scalar() {
        return x86::expand_entry;
    }
    expand_iq2_xxs
}

/// A tile kernel: `out[r * cols + c] = dot_iq2_xxs(n, row r, acts[c])` for up to
/// [`TILE_ROWS`] expanded rows and [`TILE_COLS`] Q8_K activation rows.
pub type TileFn = fn(n: usize, rows: &[&[u8]], acts: &[&[u8]], out: &mut [f32]);

/// The tiled IQ2_XXS GEMM kernel if this CPU has the AVX-512 features it needs.
pub fn iq2_xxs_tile_fn() -> Option<TileFn> {
    #[cfg(target_arch = "x86_64")]
    if super::avx512_iq::has_features() && !super::force_scalar() {
        return Some(x86::tile_entry);
    }
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{EXPANDED_SB, TILE_COLS, TILE_ROWS};
    use crate::blocks::{view, BlockQ8K};
    use std::arch::x86_64::*;

    /// Safe entry of the AVX-512 expander: checks the length, then expands.
    pub(super) fn expand_entry(w: &[u8], out: &mut [u8]) {
        assert_eq!(out.len(), w.len() / 66 * EXPANDED_SB, "expanded row length");
        assert_eq!(w.len() % 66, 0, "whole IQ2_XXS blocks");
        // SAFETY: `expand_iq2_xxs_fn` hands this entry out only after checking the
        // features; the lengths are checked above.
        unsafe { crate::simd::avx512_iq::expand_iq2_xxs_avx512(w, out) }
    }

    /// Safe entry: checks the shapes, then runs the kernel for the tile's row and pair count.
    pub(super) fn tile_entry(n: usize, rows: &[&[u8]], acts: &[&[u8]], out: &mut [f32]) {
        let nsb = n / 256;
        let cols = acts.len();
        assert!((1..=TILE_ROWS).contains(&rows.len()), "tile rows");
        assert!((1..=TILE_COLS).contains(&cols), "tile columns");
        assert_eq!(out.len(), rows.len() * cols, "tile output length");
        assert!(
            rows.iter().all(|r| r.len() == nsb * EXPANDED_SB),
            "expanded row length"
        );
        assert!(
            acts.iter().all(|a| a.len() == nsb * 292),
            "activation length"
        );
        // an odd last column is paired with itself
        let ys: [&[BlockQ8K]; TILE_COLS] =
            std::array::from_fn(|c| view::<BlockQ8K>(acts[c.min(cols - 1)]));
        macro_rules! go {
            ($r:literal, $($p:literal),*) => {{
                let xs: [&[u8]; $r] = std::array::from_fn(|i| rows[i]);
                match cols.div_ceil(2) {
                    $($p => {
                        // SAFETY: `iq2_xxs_tile_fn` hands this entry out only after checking
                        // the features; the shapes are checked above.
                        let s = unsafe { tile::<$r, $p>(nsb, &xs, &ys) };
                        for r in 0..$r {
                            for c in 0..cols {
                                out[r * cols + c] = 0.125 * s[c][r];
                            }
                        }
                    })*
                    _ => unreachable!("pairs checked above"),
                }
            }};
        }
        match rows.len() {
            1 => go!(1, 1, 2, 3, 4),
            2 => go!(2, 1, 2, 3, 4),
            3 => go!(3, 1, 2, 3, 4),
            _ => go!(4, 1, 2, 3, 4),
        }
    }

    /// Per 128-bit lane, the lane sums of `a`, `b`, `c`, `d` (exact).
    #[target_feature(enable = "avx512f,avx512bw")]
    #[inline]
    fn tree4(a: __m512i, b: __m512i, c: __m512i, d: __m512i) -> __m512i {
        let ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
        let cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
        _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd))
    }

    /// The tile's float sums before the final ×0.125: `[column][row]` for `R` rows × `P`
    /// column pairs (see the module docs).
    ///
    /// # Safety
    /// The CPU must have the enabled features; every row holds `nsb` expanded super-blocks
    /// and every activation row `nsb` Q8_K blocks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
    unsafe fn tile<const R: usize, const P: usize>(
        nsb: usize,
        xs: &[&[u8]; R],
        ys: &[&[BlockQ8K]; TILE_COLS],
    ) -> [[f32; 4]; TILE_COLS] {
        let zero = _mm512_setzero_si512();
        let c80 = _mm512_set1_epi8(0x80u8 as i8);
        let mut s = [_mm_setzero_ps(); TILE_COLS];
        for b in 0..nsb {
            let sb: [&[u8]; R] =
                std::array::from_fn(|r| &xs[r][b * EXPANDED_SB..(b + 1) * EXPANDED_SB]);
            let mut acc = [[zero; P]; R];
            for g in 0..8 {
                let mut gs = [zero; R];
                let mut ls = [zero; R];
                for r in 0..R {
                    // SAFETY: bytes 32g..32g+32 of the super-block are the group's values.
                    let v = unsafe { _mm256_loadu_si256(sb[r][32 * g..].as_ptr().cast()) };
                    gs[r] = _mm512_broadcast_i64x4(v);
                    let l = i16::from_le_bytes([sb[r][256 + 2 * g], sb[r][257 + 2 * g]]);
                    ls[r] = _mm512_set1_epi16(l);
                }
                for p in 0..P {
                    let (y0, y1) = (&ys[2 * p][b].qs, &ys[2 * p + 1][b].qs);
                    // SAFETY: a Q8_K block's codes 32g..32g+32 are readable (unaligned).
                    let y = unsafe {
                        _mm512_inserti64x4::<1>(
                            _mm512_castsi256_si512(_mm256_loadu_si256(
                                y0[32 * g..].as_ptr().cast(),
                            )),
                            _mm256_loadu_si256(y1[32 * g..].as_ptr().cast()),
                        )
                    };
                    let yu = _mm512_xor_si512(y, c80);
                    for r in 0..R {
                        let pairs = _mm512_maddubs_epi16(yu, gs[r]);
                        acc[r][p] = _mm512_dpwssd_epi32(acc[r][p], pairs, ls[r]);
                    }
                }
            }
            let f32_at = |r: usize, o: usize| {
                if r < R {
                    f32::from_le_bytes([sb[r][o], sb[r][o + 1], sb[r][o + 2], sb[r][o + 3]])
                } else {
                    0.0
                }
            };
            let i32_at = |r: usize| {
                if r < R {
                    i32::from_le_bytes([sb[r][276], sb[r][277], sb[r][278], sb[r][279]])
                } else {
                    0
                }
            };
            let dx = _mm_setr_ps(
                f32_at(0, 272),
                f32_at(1, 272),
                f32_at(2, 272),
                f32_at(3, 272),
            );
            let corr = _mm_setr_epi32(i32_at(0), i32_at(1), i32_at(2), i32_at(3));
            for p in 0..P {
                let a: [__m512i; 4] = std::array::from_fn(|r| if r < R { acc[r][p] } else { zero });
                let t = tree4(a[0], a[1], a[2], a[3]);
                // 128-bit lane 0 += lane 1 (first column), lane 2 += lane 3 (second)
                let u = _mm512_add_epi32(t, _mm512_shuffle_i32x4::<0x31>(t, t));
                let sums = [_mm512_castsi512_si128(u), _mm512_extracti32x4_epi32::<2>(u)];
                for (h, isum) in sums.into_iter().enumerate() {
                    let c = 2 * p + h;
                    let v = _mm_cvtepi32_ps(_mm_sub_epi32(isum, corr));
                    let d = _mm_mul_ps(dx, _mm_set1_ps(ys[c][b].d()));
                    s[c] = _mm_add_ps(s[c], _mm_mul_ps(d, v));
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
