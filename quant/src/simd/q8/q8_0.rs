//! Q8_0 · Q8_0 with AVX-512 (VNNI): the multi-column and the decode (multi-row) kernels.
//! (Its one-row kernel is the AVX2 one: `q8::avx2`.)

use crate::blocks::{view, BlockQ8_0};
use crate::simd::{entry, f16x8};
use std::arch::x86_64::*;

entry!(multi dot_q8_0_avx512_multi_entry => dot_q8_0_avx512_multi);
entry!(rows dot_q8_0_avx512_rows_entry => dot_q8_0_avx512_rows);

/// Q8_0 · Q8_0 against several activation columns, two columns per 512-bit register (lanes
/// 0..8 the first, 8..16 the second) and up to eight per pass: each weight block is loaded,
/// its |x| and sign mask formed once; `vpdpbusd` gives each column the same eight 4-element
/// lane sums as the AVX2 kernel and each lane's FMA chain runs in the reference's block
/// order, so every column gets the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_q8_0_avx512_multi(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<BlockQ8_0>(w);
    // per block k of a group of eight: lanes 0..8 take the first column's scale (index k),
    // lanes 8..16 the second's (index 8 + k)
    let sel: [__m512i; 8] = std::array::from_fn(|k| {
        let v: [i32; 16] = std::array::from_fn(|l| (k + 8 * (l / 8)) as i32);
        // SAFETY: 64 readable bytes (unaligned load).
        unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
    });
    for r in crate::simd::column_split(acts.len(), 8) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let pairs = acts.len().div_ceil(2);
        let mut ys: [&[BlockQ8_0]; 8] = [&[]; 8];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8_0>(a);
        }
        // an odd last column is paired with itself; its second half is discarded
        if acts.len() % 2 == 1 {
            ys[acts.len()] = ys[acts.len() - 1];
        }
        let mut acc = [_mm512_setzero_ps(); 4];
        for (g, xc) in xs.chunks(8).enumerate() {
            let mut hx = [0u16; 8];
            for (k, x) in xc.iter().enumerate() {
                hx[k] = u16::from_le_bytes(x.d);
            }
            // SAFETY: F16C/AVX are enabled for this function.
            let dx = unsafe { f16x8(&hx) };
            // per pair: the sixteen scale products dw·dy (first column, then second)
            let mut dp = [_mm512_setzero_ps(); 4];
            for (p, d) in dp.iter_mut().enumerate().take(pairs) {
                let half = |y: &[BlockQ8_0]| {
                    let mut hy = [0u16; 8];
                    for (k, yb) in y[8 * g..8 * g + xc.len()].iter().enumerate() {
                        hy[k] = u16::from_le_bytes(yb.d);
                    }
                    // SAFETY: F16C/AVX are enabled for this function.
                    _mm256_mul_ps(dx, unsafe { f16x8(&hy) })
                };
                *d = _mm512_insertf32x8::<1>(
                    _mm512_castps256_ps512(half(ys[2 * p])),
                    half(ys[2 * p + 1]),
                );
            }
            for (k, x) in xc.iter().enumerate() {
                // SAFETY: a block's 32 code bytes are readable (unaligned load).
                let qx = unsafe { _mm256_loadu_si256(x.qs.as_ptr().cast()) };
                let xz = _mm512_broadcast_i64x4(qx);
                let ax = _mm512_abs_epi8(xz); // |x| as unsigned (x = −128 → 128)
                let neg = _mm512_movepi8_mask(xz);
                for p in 0..pairs {
                    let b = 8 * g + k;
                    // SAFETY: as above, for the two activation blocks.
                    let yz = unsafe {
                        _mm512_inserti64x4::<1>(
                            _mm512_castsi256_si512(_mm256_loadu_si256(
                                ys[2 * p][b].qs.as_ptr().cast(),
                            )),
                            _mm256_loadu_si256(ys[2 * p + 1][b].qs.as_ptr().cast()),
                        )
                    };
                    // y·sign(x) (where x = 0 the product is 0 either way)
                    let sy = _mm512_mask_sub_epi8(yz, neg, _mm512_setzero_si512(), yz);
                    let l = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ax, sy));
                    let d = _mm512_permutexvar_ps(sel[k], dp[p]);
                    acc[p] = _mm512_fmadd_ps(d, l, acc[p]);
                }
            }
        }
        for (c, o) in out.iter_mut().enumerate() {
            let mut lanes = [0f32; 16];
            // SAFETY: `lanes` has room for 16 f32.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), acc[c / 2]) };
            let h: [f32; 8] = std::array::from_fn(|i| lanes[8 * (c % 2) + i]);
            *o = crate::dot::hsum8(&h);
        }
    }
}

/// The scales of eight consecutive Q8_0 blocks starting at `p` (272 readable bytes) as eight
/// f16 words: the scale of block k is word 17k, so two `vpermt2w` over the group's first
/// and second 128 bytes pick four each, and one blend joins them.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
unsafe fn q8_0_scales8(p: *const u8) -> __m128i {
    const LO: [i16; 32] = {
        let mut t = [0i16; 32];
        let mut k = 0;
        while k < 4 {
            t[k] = 17 * k as i16; // words 0, 17, 34, 51 of bytes 0..128
            t[k + 4] = 17 * (k as i16 + 4) - 64; // words 68, 85, 102, 119, of bytes 128..256
            k += 1;
        }
        t
    };
    // SAFETY: the caller guarantees 272 readable bytes at `p` (unaligned loads); the index
    // table is 64 readable bytes.
    unsafe {
        let idx = _mm512_loadu_si512(LO.as_ptr().cast());
        let a = _mm512_permutex2var_epi16(
            _mm512_loadu_si512(p.cast()),
            idx,
            _mm512_loadu_si512(p.add(64).cast()),
        );
        let b = _mm512_permutex2var_epi16(
            _mm512_loadu_si512(p.add(128).cast()),
            idx,
            _mm512_loadu_si512(p.add(192).cast()),
        );
        _mm_blend_epi16::<0xF0>(_mm512_castsi512_si128(a), _mm512_castsi512_si128(b))
    }
}

/// Q8_0 · Q8_0 for several weight rows against one activation row (decode's matvec), four
/// rows per pass, two per 512-bit register (lanes 0..8 the first row, 8..16 the second):
/// - the weight codes are offset to unsigned (`x ⊕ 0x80 = x + 128`) and `vpdpbusd` against
///   the activation block (in both halves) starts from −128·Σ₄y, shared by all rows, so each
///   lane is the exact 4-element sum Σ x·y of the reference;
/// - eight blocks' scales per row are picked by two `vpermt2w` and converted together;
///   `dw·dy` per block is one `vpermps` away;
/// - per row the FMA chain runs in the reference's block order, then the reference's
///   horizontal sum: each result has the reference's bits. An odd last row is paired with
///   itself and its copy discarded.
///
/// About two vector operations per block and row, against five for the AVX2 kernel: the
/// weights stream at read bandwidth rather than at the kernel's speed.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_q8_0_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let ys = view::<BlockQ8_0>(a);
    let nb = ys.len();
    let k80 = _mm512_set1_epi8(0x80u8 as i8);
    let zero = _mm512_setzero_si512();
    // per block k of a group: lanes 0..8 take the first row's dw·dy (index k), lanes 8..16
    // the second's (index 8 + k)
    let sel: [__m512i; 8] = std::array::from_fn(|k| {
        let v: [i32; 16] = std::array::from_fn(|l| (k + 8 * (l / 8)) as i32);
        // SAFETY: 64 readable bytes (unaligned load).
        unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
    });
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let pairs = rows.len().div_ceil(2);
        let mut xs: [&[BlockQ8_0]; 4] = [&[]; 4];
        for (x, w) in xs.iter_mut().zip(rows) {
            *x = &view::<BlockQ8_0>(w)[..nb];
        }
        // an odd last row is paired with itself; its second half is discarded
        if rows.len() % 2 == 1 {
            xs[rows.len()] = xs[rows.len() - 1];
        }
        let mut acc = [_mm512_setzero_ps(); 2];
        let pd = crate::simd::PREFETCH_DISTANCE;
        for g in (0..nb).step_by(8) {
            let m = (nb - g).min(8);
            for x in &xs[..rows.len()] {
                crate::simd::prefetch_ahead(x[g..].as_ptr().cast(), 8 * size_of::<BlockQ8_0>(), pd);
            }
            // the group's eight scales of the activation and of each row, as f16 words
            let scales = |b: &[BlockQ8_0]| -> __m128i {
                if m == 8 {
                    // SAFETY: a whole group of eight blocks (272 bytes) follows.
                    unsafe { q8_0_scales8(b[g..g + 8].as_ptr().cast()) }
                } else {
                    let mut h = [0u16; 8];
                    for (k, blk) in b[g..g + m].iter().enumerate() {
                        h[k] = u16::from_le_bytes(blk.d);
                    }
                    // SAFETY: 16 readable bytes (unaligned load).
                    unsafe { _mm_loadu_si128(h.as_ptr().cast()) }
                }
            };
            let hy = scales(ys);
            let dy = _mm512_cvtph_ps(_mm256_inserti128_si256::<1>(_mm256_castsi128_si256(hy), hy));
            let mut dd = [_mm512_setzero_ps(); 2];
            for (p, d) in dd.iter_mut().enumerate().take(pairs) {
                let hx = _mm256_inserti128_si256::<1>(
                    _mm256_castsi128_si256(scales(xs[2 * p])),
                    scales(xs[2 * p + 1]),
                );
                *d = _mm512_mul_ps(_mm512_cvtph_ps(hx), dy);
            }
            for k in 0..m {
                let b = g + k;
                // SAFETY: a block's 32 code bytes are readable (unaligned load).
                let yv =
                    _mm512_broadcast_i64x4(unsafe { _mm256_loadu_si256(ys[b].qs.as_ptr().cast()) });
                // −128·Σ₄y: the offset's contribution, removed by starting from it
                let negc = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k80, yv));
                for p in 0..pairs {
                    // SAFETY: as above, for the two rows' weight blocks.
                    let xv = unsafe {
                        _mm512_inserti64x4::<1>(
                            _mm512_castsi256_si512(_mm256_loadu_si256(
                                xs[2 * p][b].qs.as_ptr().cast(),
                            )),
                            _mm256_loadu_si256(xs[2 * p + 1][b].qs.as_ptr().cast()),
                        )
                    };
                    let l = _mm512_dpbusd_epi32(negc, _mm512_xor_si512(xv, k80), yv);
                    let d = _mm512_permutexvar_ps(sel[k], dd[p]);
                    acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(l), acc[p]);
                }
            }
        }
        for (r, o) in out.iter_mut().enumerate() {
            let mut lanes = [0f32; 16];
            // SAFETY: `lanes` has room for 16 f32.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), acc[r / 2]) };
            let h: [f32; 8] = std::array::from_fn(|i| lanes[8 * (r % 2) + i]);
            *o = crate::dot::hsum8(&h);
        }
    }
}
