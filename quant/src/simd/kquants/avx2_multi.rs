//! AVX2 multi-column kernels for Q4_K, Q5_K and Q6_K (prompt chunks and MoE experts): each weight
//! super-block is unpacked once — its 256 codes ([`super::avx2::q4_k_codes`],
//! [`super::avx2::q5_k_codes`]), its eight 6-bit scales and mins — for up to sixteen
//! activation columns, where the one-column kernel unpacks it once per column.
//!
//! Per column the integer sums are the one-column kernel's: `vpmaddubsw` of the codes by the
//! activations and `vpmaddwd` by the sub-block scale, and Σ min·(Σ₃₂ y) as one `vpmaddwd` of
//! the Q8_K block sums by the mins (each in both i16 halves of its lane). Eight columns'
//! sums are reduced together by `vphaddd` trees, and the reference's float combine —
//! `dy·(d·Σ) − dy·(dmin·Σmin)`, separate roundings, blocks in order — runs lane by lane:
//! every column gets the reference's bits.

use super::avx2::{q4_k_codes, q5_k_codes, q6_k_codes};
use crate::blocks::{view, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K};
use crate::codec::kquants::scale_min_k4;
use crate::simd::{entry, f16c, hsum_i32x8};
use std::arch::x86_64::*;

entry!(multi
    dot_q4_k_avx2_multi_entry => dot_q4_k_avx2_multi,
    dot_q5_k_avx2_multi_entry => dot_q5_k_avx2_multi,
    dot_q6_k_avx2_multi_entry => dot_q6_k_avx2_multi,
);

/// Activation columns per pass (as for the grid types' multi-column kernels: about the
/// tokens an expert gets in a 512-token chunk).
const COLS: usize = 16;

/// One super-block as the multi-column loop takes it: the codes of its four chunks (low,
/// high sub-block each), its scales as i16, its mins in lanes 2j and 2j + 1 (for the block
/// sums), and d, dmin as f32.
struct Unpacked {
    codes: [__m256i; 8],
    scales: [i16; 8],
    mins: __m256i,
    d: f32,
    dmin: f32,
}

/// Unpacks a super-block's scales and mins (`scales`) with its `codes`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn unpack(
    codes: impl Fn(usize) -> (__m256i, __m256i),
    scales: &[u8; 12],
    d: [u8; 2],
    dmin: [u8; 2],
) -> Unpacked {
    let mut sc = [0i16; 8];
    let mut mn = [0i16; 16];
    for j in 0..8 {
        let (s, m) = scale_min_k4(j, scales);
        sc[j] = s as i16;
        mn[2 * j] = m as i16;
        mn[2 * j + 1] = m as i16;
    }
    let mut c = [_mm256_setzero_si256(); 8];
    for (k, pair) in c.chunks_exact_mut(2).enumerate() {
        (pair[0], pair[1]) = codes(k);
    }
    Unpacked {
        codes: c,
        scales: sc,
        // SAFETY: `mn` is 32 readable bytes (unaligned load).
        mins: unsafe { _mm256_loadu_si256(mn.as_ptr().cast()) },
        d: f16c!(d),
        dmin: f16c!(dmin),
    }
}

/// The multi-column loop over `nb` super-blocks, `block(b)` unpacking super-block `b`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn k4_multi(nb: usize, block: impl Fn(usize) -> Unpacked, acts: &[&[u8]], out: &mut [f32]) {
    for r in crate::simd::column_split(acts.len(), COLS) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let mut ys: [&[BlockQ8K]; COLS] = [&[]; COLS];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8K>(a);
            assert!(y.len() >= nb, "activation row shorter than the weight row");
        }
        let ys = &ys[..acts.len()];
        // column c's sum in lane c % 8 of s[c / 8]
        let mut s = [_mm256_setzero_ps(); COLS / 8];
        for b in 0..nb {
            let u = block(b);
            let (d, dmin) = (_mm256_set1_ps(u.d), _mm256_set1_ps(u.dmin));
            for (ys8, s8) in ys.chunks(8).zip(s.iter_mut()) {
                let mut isc = [_mm256_setzero_si256(); 8];
                let mut imin = [_mm256_setzero_si256(); 8];
                let mut dy = [0f32; 8];
                for (((y, isc), imin), dy) in ys8.iter().zip(&mut isc).zip(&mut imin).zip(&mut dy) {
                    let y = &y[b];
                    *dy = y.d();
                    // SAFETY: a Q8_K block's 16 block sums are 32 bytes (unaligned load).
                    let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
                    *imin = _mm256_madd_epi16(bs, u.mins);
                    let mut a = _mm256_setzero_si256();
                    for (j, (wj, &sj)) in u.codes.iter().zip(&u.scales).enumerate() {
                        // SAFETY: sub-block j's 32 activation codes are inside the block.
                        let yj = unsafe { _mm256_loadu_si256(y.qs.as_ptr().add(32 * j).cast()) };
                        let p = _mm256_maddubs_epi16(*wj, yj);
                        a = _mm256_add_epi32(a, _mm256_madd_epi16(p, _mm256_set1_epi16(sj)));
                    }
                    *isc = a;
                }
                let isc = _mm256_cvtepi32_ps(hsum_i32x8(&isc));
                let imin = _mm256_cvtepi32_ps(hsum_i32x8(&imin));
                // SAFETY: `dy` is 32 readable bytes (unaligned load).
                let dy = unsafe { _mm256_loadu_ps(dy.as_ptr()) };
                let v = _mm256_sub_ps(
                    _mm256_mul_ps(dy, _mm256_mul_ps(d, isc)),
                    _mm256_mul_ps(dy, _mm256_mul_ps(dmin, imin)),
                );
                *s8 = _mm256_add_ps(*s8, v);
            }
        }
        let mut lanes = [0f32; COLS];
        for (l, v) in lanes.chunks_exact_mut(8).zip(s) {
            // SAFETY: `l` has room for 8 f32.
            unsafe { _mm256_storeu_ps(l.as_mut_ptr(), v) };
        }
        out.copy_from_slice(&lanes[..out.len()]);
    }
}

/// Q4_K · Q8_K for several activation columns with AVX2 (see the module docs).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q4_k_avx2_multi(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<BlockQ4K>(w);
    let block = |b: usize| {
        let x = &xs[b];
        unpack(|c| q4_k_codes(x, c), &x.scales, x.d, x.dmin)
    };
    k4_multi(xs.len(), block, acts, out);
}

/// Q5_K · Q8_K for several activation columns with AVX2 (see the module docs).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q5_k_avx2_multi(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<BlockQ5K>(w);
    let block = |b: usize| {
        let x = &xs[b];
        unpack(|c| q5_k_codes(x, c), &x.scales, x.d, x.dmin)
    };
    k4_multi(xs.len(), block, acts, out);
}

/// Q6_K · Q8_K for several activation columns with AVX2: per super-block the 256 codes
/// (unsigned 0..63, [`q6_k_codes`]), the sixteen sub-block scales as `vpmaddwd` operands and
/// as i16 for the −32 offset, unpacked once; per column Σ scale·Σ u·y − 32·Σ scale·bsum in
/// one lane vector (exact), eight columns reduced together, and the reference's
/// `dy·d·Σ` lane by lane: every column gets [`super::avx2`]'s one-column bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q6_k_avx2_multi(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<BlockQ6K>(w);
    for r in crate::simd::column_split(acts.len(), COLS) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let mut ys: [&[BlockQ8K]; COLS] = [&[]; COLS];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8K>(a);
            assert!(
                y.len() >= xs.len(),
                "activation row shorter than the weight row"
            );
        }
        let ys = &ys[..acts.len()];
        let mut s = [_mm256_setzero_ps(); COLS / 8];
        for (b, x) in xs.iter().enumerate() {
            let (c0, c1) = (q6_k_codes(x, 0), q6_k_codes(x, 1));
            let codes = [c0[0], c0[1], c0[2], c0[3], c1[0], c1[1], c1[2], c1[3]];
            // chunk j (32 elements) covers sub-blocks 2j and 2j + 1
            let sc: [__m256i; 8] = std::array::from_fn(|j| {
                _mm256_set_m128i(
                    _mm_set1_epi16(x.scales[2 * j + 1] as i16),
                    _mm_set1_epi16(x.scales[2 * j] as i16),
                )
            });
            // SAFETY: the 16 scale bytes are readable (unaligned load).
            let sc16 = unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(x.scales.as_ptr().cast())) };
            let d = _mm256_set1_ps(f16c!(x.d));
            for (ys8, s8) in ys.chunks(8).zip(s.iter_mut()) {
                let mut isc = [_mm256_setzero_si256(); 8];
                let mut dy = [0f32; 8];
                for ((y, isc), dy) in ys8.iter().zip(&mut isc).zip(&mut dy) {
                    let y = &y[b];
                    *dy = y.d();
                    // SAFETY: a Q8_K block's 16 block sums are 32 bytes (unaligned load).
                    let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
                    // −32·Σ scale·bsum, then + Σ scale·Σ u·y per chunk
                    let mut a = _mm256_sub_epi32(
                        _mm256_setzero_si256(),
                        _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs), 5),
                    );
                    for (j, (cj, scj)) in codes.iter().zip(&sc).enumerate() {
                        // SAFETY: chunk j's 32 activation codes are inside the block.
                        let yj = unsafe { _mm256_loadu_si256(y.qs.as_ptr().add(32 * j).cast()) };
                        let p = _mm256_maddubs_epi16(*cj, yj);
                        a = _mm256_add_epi32(a, _mm256_madd_epi16(p, *scj));
                    }
                    *isc = a;
                }
                let isc = _mm256_cvtepi32_ps(hsum_i32x8(&isc));
                // SAFETY: `dy` is 32 readable bytes (unaligned load).
                let dy = unsafe { _mm256_loadu_ps(dy.as_ptr()) };
                *s8 = _mm256_add_ps(*s8, _mm256_mul_ps(_mm256_mul_ps(dy, d), isc));
            }
        }
        let mut lanes = [0f32; COLS];
        for (l, v) in lanes.chunks_exact_mut(8).zip(s) {
            // SAFETY: `l` has room for 8 f32.
            unsafe { _mm256_storeu_ps(l.as_mut_ptr(), v) };
        }
        out.copy_from_slice(&lanes[..out.len()]);
    }
}
