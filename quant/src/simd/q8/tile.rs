//! Register-tiled Q8_0 · Q8_0 GEMM for prompt chunks (AVX-512 VNNI): up to four weight rows
//! × eight activation columns per call, every output with the scalar reference's bits.
//!
//! The activation columns are first packed into a *panel* ([`pack_q8_0_panel`]): for every
//! block, pairs of columns side by side — 64 code bytes (first column's block, then the
//! second's), 16 f32 scales (eight lanes of each) and 16 i32 offset terms (below) — so that
//! one 512-bit register holds a block of two columns and lines up with a weight block
//! broadcast to both halves. An odd last column is paired with itself.
//!
//! `vpdpbusd` multiplies unsigned by signed bytes, so the weight codes are offset by 128
//! (`x ^ 0x80` = x + 128 as u8) once per block for all columns, and the offset's share,
//! 128·Σy per 4-element lane, is subtracted by starting the accumulation from its negative,
//! −128·Σ₄y, which the panel holds (formed once when the panel is packed, not once per tile
//! call: that `vpdpbusd` and subtraction per column pair and block were two of the tile's
//! eighteen vector operations per pair; `tile_q2` takes −Σ₄y from it by a shift). So each
//! of the eight lanes holds the exact integer Σ of elements 4k..4k+3, as in the reference,
//! and each lane's FMA chain (scale product dw·dy, then the fused multiply-add) runs in the
//! reference's block order: the reference's bits. Per (row, column pair, block) that is one
//! `vpdpbusd`, one conversion, one multiply and one FMA; the weight register is reused for
//! four column pairs and the activation register for four rows, so the loads and offsets
//! are amortised across the tile, where the multi-column kernel reloads every activation
//! block for every weight row.
//!
//! For long prompt chunks the weight rows are first *expanded* ([`expand_q8_0`]): the codes
//! already offset by 128 and the f16 scales already f32, so that the tile on expanded rows
//! (the kernel table's `Tile::Panel::expanded`) loads a weight block with one broadcast and its scale with a
//! broadcast folded into the multiply. That removes the per-block offset, broadcast and
//! conversion (about a sixth of the tile's vector operations) from every (row, panel) visit;
//! the expansion is paid once per row and chunk. Same lanes, same order: the same bits.

use crate::blocks::{view, BlockQ8_0};
use crate::scalar::le_f16;

/// Bytes of one packed pair-block: 64 code bytes, 16 f32 scales and 16 i32 offset terms
/// −128·Σ₄y (lane k of each column: its elements 4k..4k+3).
pub(crate) const PAIR_BLOCK: usize = 192;

/// Most activation columns in one panel (four pairs).
pub const TILE_COLS: usize = 8;

/// Most weight rows in one tile call.
pub const TILE_ROWS: usize = 4;

/// Bytes of the panel for `cols` (1..=[`TILE_COLS`]) Q8_0 columns of `n` elements.
pub fn panel_bytes(n: usize, cols: usize) -> usize {
    (n / 32) * cols.div_ceil(2) * PAIR_BLOCK
}

/// Packs `acts` (1..=[`TILE_COLS`] Q8_0 rows of `n` elements) into `out`, which must be
/// [`panel_bytes`]`(n, acts.len())` long (see the module docs for the layout): with AVX2 and
/// F16C where the CPU has them ([`pack_q8_0_panel_ref`]'s bytes), else by the reference.
///
/// # Panics
/// If the column count or a length does not match (a caller's bug, not bad input).
pub fn pack_q8_0_panel(n: usize, acts: &[&[u8]], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::CpuLevel::detect() >= crate::simd::CpuLevel::Avx2 {
        let (ys, pairs) = panel_columns(n, acts, out);
        // SAFETY: the level guarantees AVX2 and F16C; the shapes were checked above.
        unsafe { x86::pack_avx2(&ys, acts.len(), pairs, out) };
        return;
    }
    pack_q8_0_panel_ref(n, acts, out);
}

/// The columns of a panel as blocks (the unused entries empty) and its pair count, after
/// checking the shapes.
fn panel_columns<'a>(
    n: usize,
    acts: &[&'a [u8]],
    out: &[u8],
) -> ([&'a [BlockQ8_0]; TILE_COLS], usize) {
    let cols = acts.len();
    assert!((1..=TILE_COLS).contains(&cols), "panel of {cols} columns");
    assert_eq!(out.len(), panel_bytes(n, cols), "panel length");
    let mut ys: [&[BlockQ8_0]; TILE_COLS] = [&[]; TILE_COLS];
    for (y, a) in ys.iter_mut().zip(acts) {
        *y = view::<BlockQ8_0>(a);
        assert_eq!(y.len(), n / 32, "activation length");
    }
    (ys, cols.div_ceil(2))
}

/// The reference packer of [`pack_q8_0_panel`], block by block and pair by pair.
///
/// # Panics
/// As [`pack_q8_0_panel`].
pub fn pack_q8_0_panel_ref(n: usize, acts: &[&[u8]], out: &mut [u8]) {
    let (ys, pairs) = panel_columns(n, acts, out);
    let cols = acts.len();
    for (b, blk) in out.chunks_exact_mut(pairs * PAIR_BLOCK).enumerate() {
        for (p, pb) in blk.chunks_exact_mut(PAIR_BLOCK).enumerate() {
            let (c0, c1) = (2 * p, (2 * p + 1).min(cols - 1));
            let (y0, y1) = (&ys[c0][b], &ys[c1][b]);
            for (dst, src) in pb[..32].iter_mut().zip(&y0.qs) {
                *dst = *src as u8;
            }
            for (dst, src) in pb[32..64].iter_mut().zip(&y1.qs) {
                *dst = *src as u8;
            }
            let (d0, d1) = (le_f16(y0.d).to_le_bytes(), le_f16(y1.d).to_le_bytes());
            for (l, dst) in pb[64..128].chunks_exact_mut(4).enumerate() {
                dst.copy_from_slice(if l < 8 { &d0 } else { &d1 });
            }
            for (l, dst) in pb[128..].chunks_exact_mut(4).enumerate() {
                let (y, k) = (if l < 8 { y0 } else { y1 }, l % 8);
                let sum: i32 = y.qs[4 * k..4 * k + 4].iter().map(|&q| i32::from(q)).sum();
                dst.copy_from_slice(&(-128 * sum).to_le_bytes());
            }
        }
    }
}

/// Bytes of one expanded Q8_0 block: 32 offset codes and an f32 scale.
const EXPANDED_BLOCK: usize = 36;

/// Bytes of an expanded Q8_0 row of `n` elements (see [`expand_q8_0`]), rounded up to whole
/// 64-byte lines so that expanded rows placed back to back from an aligned start stay aligned.
pub fn expanded_bytes(n: usize) -> usize {
    ((n / 32) * EXPANDED_BLOCK).next_multiple_of(64)
}

/// The reference expander: a Q8_0 row of `n = 32·nb` elements → `out`
/// ([`expanded_bytes`]`(n)` bytes): every block's 32 codes + 128 (`x ^ 0x80` as bytes) at
/// `32·b`, then every block's scale as a little-endian f32 at `32·nb + 4·b`, then zeros.
///
/// # Panics
/// If `row` is not whole blocks or `out` has the wrong length (a caller's bug).
pub fn expand_q8_0(row: &[u8], out: &mut [u8]) {
    let xs = view::<BlockQ8_0>(row);
    let nb = xs.len();
    assert_eq!(out.len(), expanded_bytes(32 * nb), "expanded row length");
    let (codes, rest) = out.split_at_mut(32 * nb);
    let (scales, pad) = rest.split_at_mut(4 * nb);
    for ((x, c), d) in xs
        .iter()
        .zip(codes.chunks_exact_mut(32))
        .zip(scales.chunks_exact_mut(4))
    {
        for (o, q) in c.iter_mut().zip(&x.qs) {
            *o = (*q as u8) ^ 0x80;
        }
        d.copy_from_slice(&le_f16(x.d).to_le_bytes());
    }
    pad.fill(0);
}

/// An expander: one weight row → its expanded form (the layout of [`expand_q8_0`]).
pub type ExpandFn = fn(row: &[u8], out: &mut [u8]);

/// A tile kernel: `out[r * cols + c] = dot_q8_0(n, rows[r], column c of the panel)` for up
/// to [`TILE_ROWS`] rows and the panel's `cols` columns.
pub type TileFn = fn(n: usize, rows: &[&[u8]], panel: &[u8], cols: usize, out: &mut [f32]);

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{BlockQ8_0, EXPANDED_BLOCK, PAIR_BLOCK, TILE_COLS, TILE_ROWS};
    use crate::blocks::view;
    use std::arch::x86_64::*;

    /// [`super::pack_q8_0_panel_ref`]'s bytes with AVX2 and F16C: per pair-block the two
    /// code runs copied, the two scales converted by `vcvtph2ps` (exact) and each spread over
    /// eight lanes, and the lane terms −128·Σ₄y by `vpmaddubsw` / `vpmaddwd` against ones
    /// (exact: |Σ₄y| ≤ 512) and a shift.
    ///
    /// # Safety
    /// The CPU must have AVX2 and F16C; `ys` holds `cols` columns of whole blocks and `out`
    /// is their panel (checked by the caller).
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn pack_avx2(
        ys: &[&[BlockQ8_0]; TILE_COLS],
        cols: usize,
        pairs: usize,
        out: &mut [u8],
    ) {
        let ones8 = _mm256_set1_epi8(1);
        let ones16 = _mm256_set1_epi16(1);
        let zero = _mm256_setzero_si256();
        for (b, blk) in out.chunks_exact_mut(pairs * PAIR_BLOCK).enumerate() {
            for (p, pb) in blk.chunks_exact_mut(PAIR_BLOCK).enumerate() {
                let (c0, c1) = (2 * p, (2 * p + 1).min(cols - 1));
                let pb: &mut [u8; PAIR_BLOCK] = pb.try_into().expect("pair-block length");
                for (half, y) in [&ys[c0][b], &ys[c1][b]].into_iter().enumerate() {
                    // SAFETY: a block's 32 codes are readable (unaligned load).
                    let q = unsafe { _mm256_loadu_si256(y.qs.as_ptr().cast()) };
                    let d = _mm256_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes(y.d)));
                    let pairs16 = _mm256_maddubs_epi16(ones8, q);
                    let sums = _mm256_madd_epi16(pairs16, ones16);
                    let terms = _mm256_sub_epi32(zero, _mm256_slli_epi32::<7>(sums));
                    let base = pb.as_mut_ptr().wrapping_add(32 * half);
                    let at = |o: usize| base.wrapping_add(o);
                    // SAFETY: each store writes 32 bytes inside the 192-byte pair-block
                    // (offsets 0/32, 64/96 and 128/160; unaligned stores).
                    unsafe {
                        _mm256_storeu_si256(at(0).cast(), q);
                        _mm256_storeu_ps(at(64).cast(), d);
                        _mm256_storeu_si256(at(128).cast(), terms);
                    }
                }
            }
        }
    }

    /// The shapes every tile on a packed panel checks before its kernel runs (Q8_0 and
    /// Q2_0, AVX-512 and AVX2): row and column counts, panel and output lengths, and each
    /// weight row `row_bytes` long.
    ///
    /// # Panics
    /// On any mismatch.
    pub(crate) fn check_panel_call(
        n: usize,
        rows: &[&[u8]],
        panel: &[u8],
        cols: usize,
        out: &[f32],
        row_bytes: usize,
    ) {
        assert!((1..=TILE_ROWS).contains(&rows.len()), "tile rows");
        assert!((1..=TILE_COLS).contains(&cols), "tile columns");
        assert_eq!(panel.len(), super::panel_bytes(n, cols), "panel length");
        assert_eq!(out.len(), rows.len() * cols, "tile output length");
        assert!(
            rows.iter().all(|r| r.len() == row_bytes),
            "weight row length"
        );
    }

    /// [`check_panel_call`] for raw Q8_0 rows (this tile and the AVX2 one). Returns the
    /// block count.
    pub(crate) fn check_raw(
        n: usize,
        rows: &[&[u8]],
        panel: &[u8],
        cols: usize,
        out: &[f32],
    ) -> usize {
        let nb = n / 32;
        check_panel_call(n, rows, panel, cols, out, nb * 34);
        nb
    }

    /// Safe entry: checks the shapes, then runs the kernel for the tile's row and pair count.
    pub(crate) fn tile_entry(n: usize, rows: &[&[u8]], panel: &[u8], cols: usize, out: &mut [f32]) {
        let nb = check_raw(n, rows, panel, cols, out);
        macro_rules! go {
            ($r:literal, $p:literal) => {{
                let xs: [&[BlockQ8_0]; $r] = std::array::from_fn(|i| view::<BlockQ8_0>(rows[i]));
                // SAFETY: `table::kernels` hands this entry out only after checking the
                // features the kernel is compiled for; the shapes are checked above (every
                // block and pair-block index is in bounds).
                unsafe { tile::<$r, $p>(nb, &xs, panel, cols, out) };
            }};
        }
        crate::simd::tile_shapes!(rows.len(), cols.div_ceil(2), go)
    }

    /// Safe entry of the tile on expanded rows: checks the shapes, then runs the kernel for
    /// the tile's row and pair count.
    pub(crate) fn expanded_entry(
        n: usize,
        rows: &[&[u8]],
        panel: &[u8],
        cols: usize,
        out: &mut [f32],
    ) {
        let nb = n / 32;
        assert!((1..=TILE_ROWS).contains(&rows.len()), "tile rows");
        assert!((1..=TILE_COLS).contains(&cols), "tile columns");
        assert_eq!(panel.len(), super::panel_bytes(n, cols), "panel length");
        assert_eq!(out.len(), rows.len() * cols, "tile output length");
        assert!(
            rows.iter().all(|r| r.len() == super::expanded_bytes(n)),
            "expanded row length"
        );
        macro_rules! go {
            ($r:literal, $p:literal) => {{
                let xs: &[&[u8]; $r] = rows.try_into().expect("row count checked above");
                // SAFETY: `table::kernels` hands this entry out only after checking the
                // features the kernel is compiled for; the shapes are checked above (every
                // code, scale and pair-block index is in bounds).
                unsafe { tile_expanded::<$r, $p>(nb, xs, panel, cols, out) };
            }};
        }
        crate::simd::tile_shapes!(rows.len(), cols.div_ceil(2), go)
    }

    /// Safe entry of the fast expander: checks the lengths, then expands.
    pub(crate) fn expand_entry(row: &[u8], out: &mut [u8]) {
        let nb = view::<BlockQ8_0>(row).len();
        assert_eq!(
            out.len(),
            super::expanded_bytes(32 * nb),
            "expanded row length"
        );
        // SAFETY: `table::kernels` hands this entry out only after checking the features; the
        // lengths are checked above.
        unsafe { expand(nb, row, out) };
        out[nb * EXPANDED_BLOCK..].fill(0);
    }

    /// [`super::expand_q8_0`] with one 256-bit XOR per block's codes and one F16C
    /// conversion per eight scales.
    ///
    /// # Safety
    /// The CPU must have the enabled features; `row` holds `nb` blocks and `out` at least
    /// `36·nb` bytes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
    unsafe fn expand(nb: usize, row: &[u8], out: &mut [u8]) {
        let xs = view::<BlockQ8_0>(row);
        let c80 = _mm256_set1_epi8(0x80u8 as i8);
        let (codes, rest) = out.split_at_mut(32 * nb);
        for (x, c) in xs.iter().zip(codes.chunks_exact_mut(32)) {
            // SAFETY: 32 readable code bytes and 32 writable bytes (unaligned).
            unsafe {
                let q = _mm256_loadu_si256(x.qs.as_ptr().cast());
                _mm256_storeu_si256(c.as_mut_ptr().cast(), _mm256_xor_si256(q, c80));
            }
        }
        for (x8, d) in xs.chunks(8).zip(rest[..4 * nb].chunks_mut(32)) {
            let mut h = [0u16; 8];
            for (h, x) in h.iter_mut().zip(x8) {
                *h = u16::from_le_bytes(x.d);
            }
            let mut f = [0f32; 8];
            // SAFETY: `h` is 16 readable bytes and `f` 32 writable ones (unaligned).
            unsafe {
                let v = _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr().cast()));
                _mm256_storeu_ps(f.as_mut_ptr(), v);
            }
            for (o, v) in d.chunks_exact_mut(4).zip(f) {
                o.copy_from_slice(&v.to_le_bytes());
            }
        }
    }

    /// [`tile`] on expanded rows: each row's block codes (already offset) are one broadcast
    /// load and its f32 scale a broadcast into the scale product, so per (row, column pair,
    /// block) only the `vpdpbusd`, conversion, multiply and FMA remain.
    ///
    /// # Safety
    /// The CPU must have the enabled features; every row is an expanded row of `nb` blocks
    /// and `panel` holds `nb · P` pair-blocks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma")]
    unsafe fn tile_expanded<const R: usize, const P: usize>(
        nb: usize,
        xs: &[&[u8]; R],
        panel: &[u8],
        cols: usize,
        out: &mut [f32],
    ) {
        let zero = _mm512_setzero_si512();
        let codes: [&[u8]; R] = std::array::from_fn(|r| &xs[r][..32 * nb]);
        let scales: [&[u8]; R] = std::array::from_fn(|r| &xs[r][32 * nb..36 * nb]);
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        for b in 0..nb {
            let mut wu = [zero; R];
            let mut dw = [_mm512_setzero_ps(); R];
            for r in 0..R {
                let c = &codes[r][32 * b..32 * b + 32];
                // SAFETY: a block's 32 offset codes are readable (unaligned load).
                wu[r] = _mm512_broadcast_i64x4(unsafe { _mm256_loadu_si256(c.as_ptr().cast()) });
                let d = &scales[r][4 * b..4 * b + 4];
                dw[r] = _mm512_set1_ps(f32::from_le_bytes([d[0], d[1], d[2], d[3]]));
            }
            let base = &panel[b * P * PAIR_BLOCK..(b + 1) * P * PAIR_BLOCK];
            block_pairs(&mut acc, &wu, &dw, base);
        }
        column_sums(&acc, cols, out);
    }

    /// One block of the tile: for each column pair of `base` (the block's `P` pair-blocks),
    /// every row's `vpdpbusd` (from the panel's −128·Σy), conversion, scale product and FMA
    /// into `acc`. `wu` are the rows' offset codes broadcast to both halves, `dw` their scales.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma")]
    #[inline]
    fn block_pairs<const R: usize, const P: usize>(
        acc: &mut [[__m512; P]; R],
        wu: &[__m512i; R],
        dw: &[__m512; R],
        base: &[u8],
    ) {
        for p in 0..P {
            let pb = &base[p * PAIR_BLOCK..(p + 1) * PAIR_BLOCK];
            // SAFETY: `pb` is 192 readable bytes: codes at 0..64, scales at 64..128, the
            // offset terms −128·Σ₄y (each row's lane sums start there) at 128..192.
            let (y, dy, neg) = unsafe {
                (
                    _mm512_loadu_si512(pb.as_ptr().cast()),
                    _mm512_loadu_ps(pb[64..].as_ptr().cast()),
                    _mm512_loadu_si512(pb[128..].as_ptr().cast()),
                )
            };
            for r in 0..R {
                let l = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(neg, wu[r], y));
                let d = _mm512_mul_ps(dw[r], dy);
                acc[r][p] = _mm512_fmadd_ps(d, l, acc[r][p]);
            }
        }
    }

    /// `out[r * cols + c]`: the reference's horizontal sum ([`crate::dot::hsum8`]) of
    /// column `c`'s eight lanes of row `r`, in registers. Per accumulator (two columns, eight
    /// lanes each) three swaps and three adds form the same sums in the same order: lanes i
    /// and i + 4, then the pairs (0, 2) and (1, 3), then those two; lane 0 holds the first
    /// column's total, lane 8 the second's.
    /// A whole tile (four rows, eight columns) goes through [`sums_4x8`] instead.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn column_sums<const R: usize, const P: usize>(
        acc: &[[__m512; P]; R],
        cols: usize,
        out: &mut [f32],
    ) {
        if R == 4 && P == 4 && cols == 8 {
            let mut f = [_mm512_setzero_ps(); 16];
            for (r, row) in acc.iter().enumerate() {
                for (p, &a) in row.iter().enumerate() {
                    f[4 * r + p] = a;
                }
            }
            let out: &mut [f32; 32] = out.try_into().expect("a 4 × 8 tile's output");
            sums_4x8(&f, out);
            return;
        }
        for (r, row) in acc.iter().enumerate() {
            for (p, &a) in row.iter().enumerate() {
                let t = _mm512_add_ps(a, _mm512_shuffle_f32x4::<0b1011_0001>(a, a));
                let u = _mm512_add_ps(t, _mm512_permute_ps::<0b0100_1110>(t));
                let v = _mm512_add_ps(u, _mm512_permute_ps::<0b1011_0001>(u));
                let c = 2 * p;
                if c < cols {
                    out[r * cols + c] = _mm512_cvtss_f32(v);
                }
                if c + 1 < cols {
                    let hi = _mm512_extractf32x4_ps::<2>(v);
                    out[r * cols + c + 1] = _mm_cvtss_f32(hi);
                }
            }
        }
    }

    /// [`column_sums`] of a whole tile, `f[4r + p]` the accumulator of row r and column pair
    /// p, by one transposing tree instead of sixteen: the lane pairs (i, i + 4) of two
    /// accumulators at once (128-bit quarters), then (0, 2) and (1, 3) of two such by 64-bit
    /// unpacks, then those two, so register v of rows (2h, 2h + 1) holds every column's
    /// total in the reference's association (lane 4k + j: row 2h + k/2, column 2j + k%2),
    /// put in row-major order by one permute. 30 shuffles and 14 adds for the 32 outputs,
    /// against 96 shuffles and adds and 32 extracts one accumulator at a time.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn sums_4x8(f: &[__m512; 16], out: &mut [f32; 32]) {
        // 128-bit quarters 0..4 of the result: x's first column, x's second, y's first,
        // y's second, each lane i = l_i + l_(i+4)
        #[target_feature(enable = "avx512f")]
        #[inline]
        fn quarters(x: __m512, y: __m512) -> __m512 {
            _mm512_add_ps(
                _mm512_shuffle_f32x4::<0b10_00_10_00>(x, y),
                _mm512_shuffle_f32x4::<0b11_01_11_01>(x, y),
            )
        }
        // per quarter: a's (t0 + t2, t1 + t3), then b's
        #[target_feature(enable = "avx512f")]
        #[inline]
        fn halves(a: __m512, b: __m512) -> __m512 {
            let (a, b) = (_mm512_castps_pd(a), _mm512_castps_pd(b));
            _mm512_add_ps(
                _mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)),
            )
        }
        let idx = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
        for h in 0..2 {
            let t: [__m512; 4] = [0, 1, 2, 3].map(|p| quarters(f[8 * h + p], f[8 * h + 4 + p]));
            let (u1, u2) = (halves(t[0], t[1]), halves(t[2], t[3]));
            let v = _mm512_add_ps(
                _mm512_shuffle_ps::<0b10_00_10_00>(u1, u2),
                _mm512_shuffle_ps::<0b11_01_11_01>(u1, u2),
            );
            let v = _mm512_permutexvar_ps(idx, v);
            // SAFETY: `out[16h..16h + 16]` is 64 writable bytes (unaligned store).
            unsafe { _mm512_storeu_ps(out[16 * h..].as_mut_ptr(), v) };
        }
    }

    /// Horizontal sums of stored lane accumulators in the reference's order: the AVX2 tile's
    /// (the AVX-512 tiles sum in registers, [`column_sums`]).
    pub(crate) fn finish<const R: usize, const P: usize>(
        acc: &[[[f32; 16]; P]; R],
        cols: usize,
        out: &mut [f32],
    ) {
        for (r, row) in acc.iter().enumerate() {
            for c in 0..cols {
                let lanes = &row[c / 2];
                let h: [f32; 8] = std::array::from_fn(|i| lanes[8 * (c % 2) + i]);
                out[r * cols + c] = crate::dot::hsum8(&h);
            }
        }
    }

    /// The tile's lane accumulators: `R` weight rows × `P` column pairs (see the module docs).
    ///
    /// # Safety
    /// The CPU must have the enabled features; every row holds `nb` blocks and `panel`
    /// `nb · P` pair-blocks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
    unsafe fn tile<const R: usize, const P: usize>(
        nb: usize,
        xs: &[&[BlockQ8_0]; R],
        panel: &[u8],
        cols: usize,
        out: &mut [f32],
    ) {
        let zero = _mm512_setzero_si512();
        let c80 = _mm512_set1_epi8(0x80u8 as i8);
        let mut acc = [[_mm512_setzero_ps(); P]; R];
        for b in 0..nb {
            let mut wu = [zero; R];
            let mut dw = [_mm512_setzero_ps(); R];
            for r in 0..R {
                let x = &xs[r][b];
                // SAFETY: a block's 32 code bytes are readable (unaligned load).
                let q = unsafe { _mm256_loadu_si256(x.qs.as_ptr().cast()) };
                wu[r] = _mm512_xor_si512(_mm512_broadcast_i64x4(q), c80);
                dw[r] = _mm512_cvtph_ps(_mm256_set1_epi16(u16::from_le_bytes(x.d) as i16));
            }
            let base = &panel[b * P * PAIR_BLOCK..(b + 1) * P * PAIR_BLOCK];
            block_pairs(&mut acc, &wu, &dw, base);
        }
        column_sums(&acc, cols, out);
    }
}
