//! SIMD scores for DSA_INDEXER (used by `indexer.rs` when the CPU has AVX2 or AVX-512F): one
//! token's Lightning Indexer score `Σ_h w[h]·max(0, q_h·k)` against a block of 8 (AVX2) or
//! 16 (AVX-512) keys at once, one key per lane, with the bits of the scalar
//! [`crate::indexer::score`].
//!
//! The scalar score's dot ([`crate::indexer::dot_fma`]) keeps eight f32 accumulators, one per
//! element index mod 8, each a chain of fused multiply-adds in element order, reduced by a
//! fixed tree, then the tail (also fused) added. Here the keys of a block are transposed
//! (element-major, one key per lane), so each of those eight chains is one vector register
//! over the block's keys: per head and element one broadcast of `q_h[c]` and one FMA, and
//! the same tree. `max(dot, 0)` is `vmaxps(dot, 0)`, which like `f32::max` turns NaN into 0;
//! the head sum is a `mul` and an `add` per head in head order. So every lane is the scalar
//! score's float operations in the scalar score's order: the selections agree bit for bit
//! whichever path runs.
//!
//! The per-key loop this replaces walked 64 heads × 128 elements per key in 128-bit
//! vectors (the crate's baseline target): at 8192 cached tokens (2048 compressed keys) the
//! indexer was the third op of a prompt chunk, ~5 ms per token on a 2-vCPU AVX-512 host,
//! growing with the context. Until 2026-12-06 the chains were a `mul` and an `add` (the HC
//! mixes' dot, `crate::mhc::dot_f32`): two vector uops per element and head where the FMA
//! takes one.

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

/// The raw scores (before the scalar score's canonicalisation) of one token against one
/// block of `lanes(cpu)` keys: `q` is the token's `heads` query rows back to back (`d`
/// floats each), `w` its `heads` head weights, `block` the keys transposed (`block[c·L + j]`
/// = element `c` of the block's key `j`, `L` = [`lanes`]), `out` gets `L` scores.
///
/// # Panics
/// If a length does not match, or [`lanes`] is `None` (a caller's bug).
pub(crate) fn scores(
    cpu: quant::simd::CpuLevel,
    (q, w): (&[f32], &[f32]),
    heads: usize,
    d: usize,
    block: &[f32],
    out: &mut [f32],
) {
    let l = lanes(cpu).expect("indexer_simd::scores without AVX2 or AVX-512F");
    assert!(q.len() >= heads * d && w.len() >= heads);
    assert!(block.len() >= d * l && out.len() >= l);
    #[cfg(target_arch = "x86_64")]
    {
        if l == 16 {
            // SAFETY: AVX-512F was detected (`lanes`); the lengths are asserted above.
            unsafe { x86::scores_avx512(q, w, heads, d, block, out) }
        } else {
            // SAFETY: AVX2 was detected (`lanes`); the lengths are asserted above.
            unsafe { x86::scores_avx2(q, w, heads, d, block, out) }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// The vector operations the score needs, on 8 or 16 f32 lanes.
    trait Lanes: Copy {
        /// Floats per register.
        const L: usize;
        /// Whether the blocks score two heads per pass (sixteen chains in registers: with
        /// AVX-512's 32 registers, not AVX2's 16).
        const PAIRS: bool;
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
    }

    /// The [`Lanes`] of one register width from that width's intrinsics.
    macro_rules! lanes {
        ($t:ty, $l:literal, $pairs:literal, $zero:ident, $set1:ident, $load:ident, $store:ident, $add:ident,
         $mul:ident, $fma:ident, $max:ident) => {
            impl Lanes for $t {
                const L: usize = $l;
                const PAIRS: bool = $pairs;
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
            }
        };
    }

    lanes!(
        __m512,
        16,
        true,
        _mm512_setzero_ps,
        _mm512_set1_ps,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_add_ps,
        _mm512_mul_ps,
        _mm512_fmadd_ps,
        _mm512_max_ps
    );
    lanes!(
        __m256,
        8,
        false,
        _mm256_setzero_ps,
        _mm256_set1_ps,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_add_ps,
        _mm256_mul_ps,
        _mm256_fmadd_ps,
        _mm256_max_ps
    );

    /// The block's scores (see [`super::scores`]): per head the scalar dot's eight FMA chains
    /// and tail, its reduction tree, `max(·, 0)`, then the head's term added in order.
    #[inline(always)]
    fn block_scores<V: Lanes>(
        q: &[f32],
        w: &[f32],
        heads: usize,
        d: usize,
        block: &[f32],
        out: &mut [f32],
    ) {
        let full = d / 8 * 8;
        let row = |c: usize| {
            // SAFETY: c < d and block holds d·L floats (asserted by the caller).
            unsafe { V::load(block.as_ptr().add(c * V::L)) }
        };
        // one head's dot from its eight chains and tail, by the scalar dot's tree
        let reduce = |acc: &[V; 8], tail: V| {
            ((acc[0].add(acc[4])).add(acc[1].add(acc[5])))
                .add((acc[2].add(acc[6])).add(acc[3].add(acc[7])))
                .add(tail)
        };
        let mut s = V::zero();
        let mut h = 0;
        // two heads per pass: each key vector loaded once for both (the blocks are bound by
        // loads, a key vector and a query broadcast per FMA, not by the FMAs)
        while V::PAIRS && h + 1 < heads.min(w.len()) {
            let (q0, q1) = (&q[h * d..h * d + d], &q[(h + 1) * d..(h + 2) * d]);
            let (mut a0, mut a1) = ([V::zero(); 8], [V::zero(); 8]);
            // chunks of eight: the query reads need no bounds checks (with `qh[i + k]` they
            // were three scalar uops per element, beside the vector ones)
            for (g, (c0, c1)) in q0[..full]
                .chunks_exact(8)
                .zip(q1[..full].chunks_exact(8))
                .enumerate()
            {
                for k in 0..8 {
                    let kv = row(8 * g + k);
                    a0[k] = V::splat(c0[k]).fma(kv, a0[k]);
                    a1[k] = V::splat(c1[k]).fma(kv, a1[k]);
                }
            }
            let (mut t0, mut t1) = (V::zero(), V::zero());
            for c in full..d {
                let kv = row(c);
                t0 = V::splat(q0[c]).fma(kv, t0);
                t1 = V::splat(q1[c]).fma(kv, t1);
            }
            s = s.add(V::splat(w[h]).mul(reduce(&a0, t0).relu()));
            s = s.add(V::splat(w[h + 1]).mul(reduce(&a1, t1).relu()));
            h += 2;
        }
        // one head per pass (AVX2, or an odd last head)
        while h < heads.min(w.len()) {
            let qh = &q[h * d..h * d + d];
            let mut acc = [V::zero(); 8];
            for (g, qc) in qh[..full].chunks_exact(8).enumerate() {
                for (k, (a, &x)) in acc.iter_mut().zip(qc).enumerate() {
                    *a = V::splat(x).fma(row(8 * g + k), *a);
                }
            }
            let mut tail = V::zero();
            for (c, &x) in qh.iter().enumerate().skip(full) {
                tail = V::splat(x).fma(row(c), tail);
            }
            s = s.add(V::splat(w[h]).mul(reduce(&acc, tail).relu()));
            h += 1;
        }
        // SAFETY: out holds ≥ L floats (asserted by the caller).
        unsafe { s.store(out.as_mut_ptr()) }
    }

    /// [`block_scores`] on 16 lanes.
    #[target_feature(enable = "avx512f,fma")]
    pub(super) fn scores_avx512(
        q: &[f32],
        w: &[f32],
        heads: usize,
        d: usize,
        block: &[f32],
        out: &mut [f32],
    ) {
        block_scores::<__m512>(q, w, heads, d, block, out)
    }

    /// [`block_scores`] on 8 lanes.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn scores_avx2(
        q: &[f32],
        w: &[f32],
        heads: usize,
        d: usize,
        block: &[f32],
        out: &mut [f32],
    ) {
        block_scores::<__m256>(q, w, heads, d, block, out)
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
    /// with and without a tail, one to 64 heads, special values (NaN, ±∞, ±0) among the
    /// inputs, partly filled blocks.
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
            for (d, heads) in [(8, 1), (8, 3), (13, 2), (32, 4), (127, 5), (128, 64)] {
                let mut q: Vec<f32> = (0..heads * d).map(|_| rnd()).collect();
                let w: Vec<f32> = (0..heads).map(|_| rnd()).collect();
                let mut keys: Vec<Vec<f32>> =
                    (0..l).map(|_| (0..d).map(|_| rnd()).collect()).collect();
                if d == 13 {
                    keys[1][3] = f32::NAN;
                    keys[2][0] = f32::INFINITY;
                    keys[3].iter_mut().for_each(|x| *x = -0.0);
                    q[d + 2] = f32::NEG_INFINITY;
                }
                let mut block = vec![0f32; d * l];
                for (j, k) in keys.iter().enumerate() {
                    for (c, &x) in k.iter().enumerate() {
                        block[c * l + j] = x;
                    }
                }
                let mut out = vec![0f32; l];
                scores(level, (&q, &w), heads, d, &block, &mut out);
                for (j, k) in keys.iter().enumerate() {
                    let want = scalar(&q, &w, heads, d, k);
                    let got = out[j];
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "{level} d={d} heads={heads} key {j}: {got} vs {want}"
                    );
                }
                ran += 1;
            }
        }
        // a CPU without AVX2 has nothing to compare; every x86-64 host here has it
        if lanes(CpuLevel::detect()).is_some() {
            assert!(ran >= 6);
        }
    }
}
