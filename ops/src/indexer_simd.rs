//! SIMD scores for DSA_INDEXER (used by `indexer.rs` when the CPU has AVX2 or AVX-512F): one
//! token's Lightning Indexer score `Σ_h w[h]·max(0, q_h·k)` against up to [`BLOCKS`] blocks
//! of 8 (AVX2) or 16 (AVX-512) keys at once, one key per lane, with the bits of the scalar
//! [`crate::indexer::score`].
//!
//! The scalar score's dot ([`crate::indexer::dot_fma`]) is one chain of fused multiply-adds
//! in element order. Here each block's keys are transposed (element-major, one key per
//! lane), so a head's dot over a block is one register: per element one broadcast of
//! `q_h[c]` and one FMA. `max(dot, 0)` is `vmaxps(dot, 0)`, which like `f32::max` turns NaN
//! into 0; the head sum is a `mul` and an `add` per head in head order. So every lane is the
//! scalar score's float operations in the scalar score's order: the selections agree bit for
//! bit whichever path runs.
//!
//! A pass keeps `H` heads × `B` blocks of dots in registers (AVX-512: 4 × 4 of its 32; AVX2:
//! 2 × 4 of its 16): per element `B` key loads and `H` broadcasts feed `H·B` FMAs, so the
//! FMAs, not the loads, bound it. Until 2026-12-07 the dot kept eight chains (element index
//! mod 8, reduced by a tree): sixteen registers for one block and two heads, a key load and
//! two broadcasts per two FMAs, so the loads capped it at two thirds of the FMA rate
//! (docs/kernels.md, "The Lightning Indexer's scores with the FMAs as the bound").

/// Key blocks a pass scores at once (the caller transposes up to this many).
pub(crate) const BLOCKS: usize = 4;

/// Keys per block at CPU level `cpu`: 16 with AVX-512F, 8 with AVX2, `None` without either
/// (the caller keeps the scalar score). Never above the level this CPU has.
pub(crate) fn lanes(cpu: quant::simd::CpuLevel) -> Option<usize> {
    use quant::simd::CpuLevel;
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    match cpu.min(CpuLevel::detect()) {
        l if l >= CpuLevel::Avx512 => Some(16),
        l if l >= CpuLevel::Avx2 => Some(8),
        _ => None,
    }
}

/// The raw scores (before the scalar score's canonicalisation) of one token against `nblk`
/// (1..=[`BLOCKS`]) blocks of `L = lanes(cpu)` keys: `q` is the token's `heads` query rows
/// back to back (`d` floats each), `w` its `heads` head weights, `blocks` the keys transposed,
/// element-major over all [`BLOCKS`] blocks (`blocks[c·BLOCKS·L + i]` = element `c` of key
/// `i`; keys past `nblk·L` are not read), `out` gets `nblk·L` scores.
///
/// # Panics
/// If a length does not match, `nblk` is out of range, or [`lanes`] is `None` (a caller's
/// bug).
pub(crate) fn scores(
    cpu: quant::simd::CpuLevel,
    (q, w): (&[f32], &[f32]),
    heads: usize,
    d: usize,
    (blocks, nblk): (&[f32], usize),
    out: &mut [f32],
) {
    let l = lanes(cpu).expect("indexer_simd::scores without AVX2 or AVX-512F");
    assert!((1..=BLOCKS).contains(&nblk), "{nblk} key blocks");
    assert!(q.len() >= heads * d && w.len() >= heads);
    assert!(blocks.len() >= d * BLOCKS * l && out.len() >= nblk * l);
    #[cfg(target_arch = "x86_64")]
    {
        if l == 16 {
            // SAFETY: AVX-512F was detected (`lanes`); the lengths are asserted above.
            unsafe { x86::scores_avx512(q, w, heads, d, (blocks, nblk), out) }
        } else {
            // SAFETY: AVX2 was detected (`lanes`); the lengths are asserted above.
            unsafe { x86::scores_avx2(q, w, heads, d, (blocks, nblk), out) }
        }
    }
}

/// The keys `rows` (at most [`BLOCKS`]·L of them, each at least `d` floats) transposed for
/// [`scores`]: `out[c·BLOCKS·L + i] = rows[i][c]` for `c < d`, keys past `rows.len()` in the
/// last block of 16 (AVX-512) or 8 (AVX2) set to 0, later blocks not written. Whole
/// L × L tiles go through registers (AVX-512: 64 shuffles a 16 × 16 tile), the elements past
/// the last whole tile one at a time.
///
/// # Panics
/// If a length does not match, or [`lanes`] is `None` (a caller's bug).
pub(crate) fn transpose(cpu: quant::simd::CpuLevel, rows: &[&[f32]], d: usize, out: &mut [f32]) {
    let l = lanes(cpu).expect("indexer_simd::transpose without AVX2 or AVX-512F");
    let span = BLOCKS * l;
    assert!(rows.len() <= span && rows.iter().all(|r| r.len() >= d));
    assert!(out.len() >= d * span);
    let full = d / l * l;
    for (b, blk) in rows.chunks(l).enumerate() {
        let mut ptrs = [std::ptr::null::<f32>(); 16];
        for (p, r) in ptrs.iter_mut().zip(blk) {
            *p = r.as_ptr();
        }
        #[cfg(target_arch = "x86_64")]
        for c0 in (0..full).step_by(l) {
            // SAFETY: the CPU has the level (`lanes`); rows hold ≥ d ≥ c0 + l floats, null
            // pointers stand for missing rows (zeros); out holds (c0 + l)·span ≥ the
            // tile's last store (asserted above).
            unsafe {
                let at = out.as_mut_ptr().add(c0 * span + b * l);
                if l == 16 {
                    x86::tile16(&ptrs, c0, at, span);
                } else {
                    x86::tile8(&ptrs, c0, at, span);
                }
            }
        }
        for c in full..d {
            let o = &mut out[c * span + b * l..c * span + (b + 1) * l];
            for (j, x) in o.iter_mut().enumerate() {
                *x = blk.get(j).map_or(0.0, |r| r[c]);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::BLOCKS;
    use std::arch::x86_64::*;

    /// The vector operations the score needs, on 8 or 16 f32 lanes.
    trait Lanes: Copy {
        /// Floats per register.
        const L: usize;
        fn zero() -> Self;
        fn splat(x: f32) -> Self;
        /// `L` floats at `p` (unaligned).
        ///
        /// # Safety
        /// `p..p + L` must be readable.
        unsafe fn load(p: *const f32) -> Self;
        /// # Safety
        /// `p..p + L` must be writable.
        unsafe fn store(self, p: *mut f32);
        fn add(self, o: Self) -> Self;
        fn mul(self, o: Self) -> Self;
        /// `self · b + c`, rounded once.
        fn fma(self, b: Self, c: Self) -> Self;
        /// `max(self, 0)` lane-wise, NaN → 0.
        fn relu(self) -> Self;
        /// `vunpck{l,h}ps` (`hi` picks): per 128-bit lane, dwords 0, 1 (or 2, 3) of `self`
        /// and `o` interleaved.
        fn unpack32(self, o: Self, hi: bool) -> Self;
        /// `vunpck{l,h}pd` on the same registers: per 128-bit lane, qword 0 (or 1) of `self`
        /// then of `o`.
        fn unpack64(self, o: Self, hi: bool) -> Self;
    }

    /// The [`Lanes`] of one register width from that width's intrinsics.
    macro_rules! lanes {
        ($t:ty, $l:literal, $zero:ident, $set1:ident, $load:ident, $store:ident, $add:ident,
         $mul:ident, $fma:ident, $max:ident,
         ($lo32:ident, $hi32:ident, $lo64:ident, $hi64:ident, $topd:ident, $tops:ident)) => {
            impl Lanes for $t {
                const L: usize = $l;
                #[inline(always)]
                fn zero() -> Self {
                    // SAFETY: only inlined into the kernel compiled with this width's
                    // feature (`scores_avx512`, `scores_avx2`).
                    unsafe { $zero() }
                }
                #[inline(always)]
                fn splat(x: f32) -> Self {
                    // SAFETY: as `zero`.
                    unsafe { $set1(x) }
                }
                #[inline(always)]
                unsafe fn load(p: *const f32) -> Self {
                    // SAFETY: the caller's contract; the feature as `zero`.
                    unsafe { $load(p) }
                }
                #[inline(always)]
                unsafe fn store(self, p: *mut f32) {
                    // SAFETY: the caller's contract; the feature as `zero`.
                    unsafe { $store(p, self) }
                }
                #[inline(always)]
                fn add(self, o: Self) -> Self {
                    // SAFETY: as `zero`.
                    unsafe { $add(self, o) }
                }
                #[inline(always)]
                fn mul(self, o: Self) -> Self {
                    // SAFETY: as `zero`.
                    unsafe { $mul(self, o) }
                }
                #[inline(always)]
                fn fma(self, b: Self, c: Self) -> Self {
                    // SAFETY: as `zero` (both kernels enable FMA).
                    unsafe { $fma(self, b, c) }
                }
                #[inline(always)]
                fn relu(self) -> Self {
                    // SAFETY: as `zero`. `vmaxps` returns its second operand when either is
                    // NaN.
                    unsafe { $max(self, $zero()) }
                }
                #[inline(always)]
                fn unpack32(self, o: Self, hi: bool) -> Self {
                    // SAFETY: as `zero`.
                    unsafe {
                        if hi {
                            $hi32(self, o)
                        } else {
                            $lo32(self, o)
                        }
                    }
                }
                #[inline(always)]
                fn unpack64(self, o: Self, hi: bool) -> Self {
                    // SAFETY: as `zero`.
                    unsafe {
                        let (x, y) = ($topd(self), $topd(o));
                        $tops(if hi { $hi64(x, y) } else { $lo64(x, y) })
                    }
                }
            }
        };
    }

    lanes!(
        __m512,
        16,
        _mm512_setzero_ps,
        _mm512_set1_ps,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_add_ps,
        _mm512_mul_ps,
        _mm512_fmadd_ps,
        _mm512_max_ps,
        (
            _mm512_unpacklo_ps,
            _mm512_unpackhi_ps,
            _mm512_unpacklo_pd,
            _mm512_unpackhi_pd,
            _mm512_castps_pd,
            _mm512_castpd_ps
        )
    );
    lanes!(
        __m256,
        8,
        _mm256_setzero_ps,
        _mm256_set1_ps,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_add_ps,
        _mm256_mul_ps,
        _mm256_fmadd_ps,
        _mm256_max_ps,
        (
            _mm256_unpacklo_ps,
            _mm256_unpackhi_ps,
            _mm256_unpacklo_pd,
            _mm256_unpackhi_pd,
            _mm256_castps_pd,
            _mm256_castpd_ps
        )
    );

    /// The dots of heads `h0..h0 + H` against `B` blocks, each one FMA chain in element
    /// order (the scalar dot's), added into the blocks' scores `s` head by head in order.
    ///
    /// # Safety
    /// `q` holds `(h0 + H)·d` floats, `w` `h0 + H`, `blocks` `d·BLOCKS·L`.
    #[inline(always)]
    unsafe fn pass<V: Lanes, const H: usize, const B: usize>(
        (q, w): (&[f32], &[f32]),
        h0: usize,
        d: usize,
        blocks: &[f32],
        s: &mut [V; BLOCKS],
    ) {
        let (qp, bp) = (q.as_ptr(), blocks.as_ptr());
        let mut acc = [[V::zero(); B]; H];
        for c in 0..d {
            // SAFETY: c < d and b < B ≤ BLOCKS: (c·BLOCKS + b + 1)·L ≤ d·BLOCKS·L floats.
            let kv: [V; B] =
                std::array::from_fn(|b| unsafe { V::load(bp.add((c * BLOCKS + b) * V::L)) });
            for (h, ah) in acc.iter_mut().enumerate() {
                // SAFETY: (h0 + h)·d + c < (h0 + H)·d floats of `q`.
                let qb = V::splat(unsafe { *qp.add((h0 + h) * d + c) });
                for (a, &k) in ah.iter_mut().zip(&kv) {
                    *a = qb.fma(k, *a);
                }
            }
        }
        for (h, ah) in acc.iter().enumerate() {
            let wh = V::splat(w[h0 + h]);
            for (sb, a) in s.iter_mut().zip(ah) {
                *sb = sb.add(wh.mul(a.relu()));
            }
        }
    }

    /// The scores of `B` blocks (see [`super::scores`]): heads four (AVX-512) or two (AVX2)
    /// at a time, then one at a time.
    #[inline(always)]
    fn blocks_scores<V: Lanes, const HP: usize, const B: usize>(
        q: &[f32],
        w: &[f32],
        heads: usize,
        d: usize,
        blocks: &[f32],
        out: &mut [f32],
    ) {
        let heads = heads.min(w.len());
        let mut s = [V::zero(); BLOCKS];
        let mut h = 0;
        while h + HP <= heads {
            // SAFETY: h + HP ≤ heads; q, w and blocks were checked by `super::scores`.
            unsafe { pass::<V, HP, B>((q, w), h, d, blocks, &mut s) };
            h += HP;
        }
        while h < heads {
            // SAFETY: as above, one head.
            unsafe { pass::<V, 1, B>((q, w), h, d, blocks, &mut s) };
            h += 1;
        }
        for (b, sb) in s.iter().take(B).enumerate() {
            // SAFETY: out holds ≥ B·L floats (asserted by `super::scores`).
            unsafe { sb.store(out.as_mut_ptr().add(b * V::L)) }
        }
    }

    /// [`blocks_scores`] for `nblk` blocks.
    #[inline(always)]
    fn dispatch<V: Lanes, const HP: usize>(
        q: &[f32],
        w: &[f32],
        heads: usize,
        d: usize,
        (blocks, nblk): (&[f32], usize),
        out: &mut [f32],
    ) {
        match nblk {
            1 => blocks_scores::<V, HP, 1>(q, w, heads, d, blocks, out),
            2 => blocks_scores::<V, HP, 2>(q, w, heads, d, blocks, out),
            3 => blocks_scores::<V, HP, 3>(q, w, heads, d, blocks, out),
            _ => blocks_scores::<V, HP, BLOCKS>(q, w, heads, d, blocks, out),
        }
    }

    /// [`blocks_scores`] on 16 lanes, four heads a pass (16 dots in registers).
    #[target_feature(enable = "avx512f,fma")]
    pub(super) fn scores_avx512(
        q: &[f32],
        w: &[f32],
        heads: usize,
        d: usize,
        blocks: (&[f32], usize),
        out: &mut [f32],
    ) {
        dispatch::<__m512, 4>(q, w, heads, d, blocks, out)
    }

    /// [`blocks_scores`] on 8 lanes, two heads a pass (8 dots in registers of 16).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn scores_avx2(
        q: &[f32],
        w: &[f32],
        heads: usize,
        d: usize,
        blocks: (&[f32], usize),
        out: &mut [f32],
    ) {
        dispatch::<__m256, 2>(q, w, heads, d, blocks, out)
    }

    /// Row `j`'s floats `c0..c0 + L` (zeros for a null pointer).
    ///
    /// # Safety
    /// A non-null `p[j]` points at ≥ c0 + L readable floats.
    #[inline(always)]
    unsafe fn row<V: Lanes>(p: &[*const f32; 16], j: usize, c0: usize) -> V {
        if p[j].is_null() {
            V::zero()
        } else {
            // SAFETY: the caller's contract.
            unsafe { V::load(p[j].add(c0)) }
        }
    }

    /// The first two steps of a register transpose of `N` rows (N = the lane count, 8 or
    /// 16): the result's `b[4i + e]` holds in 128-bit lane L element 4L + e of rows
    /// 4i..4i + 4 (rows 2i and 2i + 1 interleaved by dwords, then pairs of those by qwords).
    /// The tiles then gather each element's lanes across the registers.
    #[inline(always)]
    fn quads<V: Lanes, const N: usize>(r: [V; N]) -> [V; N] {
        let a: [V; N] = std::array::from_fn(|k| r[k & !1].unpack32(r[k | 1], k % 2 == 1));
        std::array::from_fn(|k| {
            let (i, e) = (k / 4, k % 4);
            a[4 * i + e / 2].unpack64(a[4 * i + 2 + e / 2], e % 2 == 1)
        })
    }

    /// One 16 × 16 tile of [`super::transpose`]: rows `p` (null: zeros), elements
    /// `c0..c0 + 16`, element `e` of every row stored at `at + e·span`.
    ///
    /// # Safety
    /// AVX-512F; the rows as [`row`]; `at + e·span + 16` writable for e < 16.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn tile16(p: &[*const f32; 16], c0: usize, at: *mut f32, span: usize) {
        // SAFETY: the caller's contract.
        let b = quads::<__m512, 16>(std::array::from_fn(|j| unsafe { row(p, j, c0) }));
        for e in 0..4 {
            let c0v = _mm512_shuffle_f32x4::<0x88>(b[e], b[4 + e]);
            let c1v = _mm512_shuffle_f32x4::<0xdd>(b[e], b[4 + e]);
            let c2v = _mm512_shuffle_f32x4::<0x88>(b[8 + e], b[12 + e]);
            let c3v = _mm512_shuffle_f32x4::<0xdd>(b[8 + e], b[12 + e]);
            let out = [
                _mm512_shuffle_f32x4::<0x88>(c0v, c2v),
                _mm512_shuffle_f32x4::<0x88>(c1v, c3v),
                _mm512_shuffle_f32x4::<0xdd>(c0v, c2v),
                _mm512_shuffle_f32x4::<0xdd>(c1v, c3v),
            ];
            for (lane, v) in out.into_iter().enumerate() {
                // SAFETY: element 4·lane + e < 16: inside the caller's range.
                unsafe { _mm512_storeu_ps(at.add((4 * lane + e) * span), v) };
            }
        }
    }

    /// One 8 × 8 tile of [`super::transpose`] (rows `p[..8]`), as [`tile16`].
    ///
    /// # Safety
    /// AVX2; as [`tile16`] with 8 rows and elements.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn tile8(p: &[*const f32; 16], c0: usize, at: *mut f32, span: usize) {
        // SAFETY: the caller's contract.
        let b = quads::<__m256, 8>(std::array::from_fn(|j| unsafe { row(p, j, c0) }));
        for e in 0..4 {
            let lo = _mm256_permute2f128_ps::<0x20>(b[e], b[4 + e]);
            let hi = _mm256_permute2f128_ps::<0x31>(b[e], b[4 + e]);
            // SAFETY: elements e and 4 + e < 8: inside the caller's range.
            unsafe {
                _mm256_storeu_ps(at.add(e * span), lo);
                _mm256_storeu_ps(at.add((4 + e) * span), hi);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::indexer::dot_fma;
    use quant::simd::CpuLevel;

    /// The scalar score before canonicalisation (`indexer::score`'s arithmetic).
    fn scalar(q: &[f32], w: &[f32], heads: usize, d: usize, k: &[f32]) -> f32 {
        let mut s = 0f32;
        for (h, &wh) in w.iter().enumerate().take(heads) {
            s += wh * dot_fma(&q[h * d..h * d + d], k).max(0.0);
        }
        s
    }

    /// Every lane of every level this CPU has gives the scalar score's bits: element counts
    /// with and without a tail, one to 64 heads (whole and partial head passes), one to four
    /// blocks, special values (NaN, ±∞, ±0) among the inputs, partly filled blocks.
    #[test]
    fn block_scores_are_the_scalar_scores_bit_for_bit() {
        let mut seed = 0x1d5e_u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        let mut ran = 0;
        for level in [CpuLevel::Avx2, CpuLevel::Avx512] {
            let Some(l) = lanes(level) else { continue };
            if level == CpuLevel::Avx512 && l != 16 {
                continue; // this CPU caps the level at AVX2: already run
            }
            for (d, heads, nblk) in [
                (8, 1, 1),
                (8, 3, 2),
                (13, 2, 3),
                (32, 4, 4),
                (32, 5, 1),
                (127, 5, 4),
                (128, 7, 3),
                (128, 64, 4),
            ] {
                let mut q: Vec<f32> = (0..heads * d).map(|_| rnd()).collect();
                let w: Vec<f32> = (0..heads).map(|_| rnd()).collect();
                let mut keys: Vec<Vec<f32>> = (0..nblk * l)
                    .map(|_| (0..d).map(|_| rnd()).collect())
                    .collect();
                if d == 13 {
                    keys[1][3] = f32::NAN;
                    keys[2][0] = f32::INFINITY;
                    keys[3].iter_mut().for_each(|x| *x = -0.0);
                    keys[l + 5][7] = f32::NEG_INFINITY;
                    q[d + 2] = f32::NEG_INFINITY;
                }
                let mut blocks = vec![f32::NAN; d * BLOCKS * l];
                for (i, k) in keys.iter().enumerate() {
                    for (c, &x) in k.iter().enumerate() {
                        blocks[c * BLOCKS * l + i] = x;
                    }
                }
                let mut out = vec![0f32; nblk * l];
                scores(level, (&q, &w), heads, d, (&blocks, nblk), &mut out);
                for (i, k) in keys.iter().enumerate() {
                    let want = scalar(&q, &w, heads, d, k);
                    let got = out[i];
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "{level} d={d} heads={heads} blocks={nblk} key {i}: {got} vs {want}"
                    );
                }
                ran += 1;
            }
        }
        // a CPU without AVX2 has nothing to compare; every x86-64 host here has it
        if lanes(CpuLevel::detect()).is_some() {
            assert!(ran >= 8);
        }
    }

    /// The register transpose writes the scalar transposition: every key count (partial
    /// blocks, fewer keys than a block), element counts with and without a tail.
    #[test]
    fn transpose_matches_the_scalar_transposition() {
        for level in [CpuLevel::Avx2, CpuLevel::Avx512] {
            let Some(l) = lanes(level) else { continue };
            let span = BLOCKS * l;
            for d in [5, 16, 29, 128] {
                let keys: Vec<Vec<f32>> = (0..span)
                    .map(|i| (0..d + 3).map(|c| (i * 1000 + c) as f32).collect())
                    .collect();
                for nk in 1..=span {
                    let rows: Vec<&[f32]> = keys[..nk].iter().map(|k| k.as_slice()).collect();
                    let mut out = vec![-1f32; d * span];
                    transpose(level, &rows, d, &mut out);
                    for c in 0..d {
                        for i in 0..nk.div_ceil(l) * l {
                            let want = if i < nk { keys[i][c] } else { 0.0 };
                            assert_eq!(
                                out[c * span + i],
                                want,
                                "{level} d={d} nk={nk} c={c} i={i}"
                            );
                        }
                    }
                }
            }
        }
    }
}
