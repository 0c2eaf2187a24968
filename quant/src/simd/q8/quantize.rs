//! The activation quantizers Q8_0 and Q8_K with AVX-512 (F/BW and F16C) or AVX2 (with FMA
//! and F16C), byte for byte the scalar quantizers' output (`codec::q8`), which call them where
//! the CPU has the features.

use crate::blocks::{BlockQ8K, BlockQ8_0};
use crate::simd::CpuLevel;
use bytemuck::Zeroable;
use std::arch::x86_64::*;

/// A SIMD form of an activation quantizer: f32 row → its blocks, the scalar form's bytes.
pub type QuantizeFn = fn(src: &[f32], dst: &mut [u8]);

/// The activation Q8_0 quantizer's SIMD forms this CPU runs, fastest first, by name (the
/// first is the one used; tests check them all). Their results are the scalar quantizer's
/// bytes, so the choice follows the detected CPU, not the kernel table's level.
pub fn q8_0_forms() -> Vec<(&'static str, QuantizeFn)> {
    let cpu = CpuLevel::detect();
    let mut v: Vec<(&'static str, QuantizeFn)> = Vec::new();
    if cpu >= CpuLevel::Avx512 {
        // SAFETY: the CPU has AVX-512F/BW and F16C (the `avx512` level).
        v.push(("avx512", |s, d| unsafe { quantize_q8_0_avx512(s, d) }));
    }
    if cpu >= CpuLevel::Avx2 {
        // SAFETY: the CPU has AVX2, FMA and F16C (the `avx2` level).
        v.push(("avx2", |s, d| unsafe { quantize_q8_0_avx2(s, d) }));
    }
    v
}

/// The activation Q8_K quantizer's SIMD forms this CPU runs, fastest first (as
/// [`q8_0_forms`]).
pub fn q8_k_forms() -> Vec<(&'static str, QuantizeFn)> {
    let cpu = CpuLevel::detect();
    let mut v: Vec<(&'static str, QuantizeFn)> = Vec::new();
    if cpu >= CpuLevel::Avx512 {
        // SAFETY: the CPU has AVX-512F/BW (the `avx512` level).
        v.push(("avx512", |s, d| unsafe { quantize_q8_k_avx512(s, d) }));
    }
    if cpu >= CpuLevel::Avx2 {
        // SAFETY: the CPU has AVX2 (the `avx2` level).
        v.push(("avx2", |s, d| unsafe { quantize_q8_k_avx2(s, d) }));
    }
    v
}

/// Runs the first of `forms` (chosen once per quantizer, kept in `cell`) on `src`: true if
/// one ran, false if the CPU has none.
fn run_fastest(
    cell: &'static std::sync::OnceLock<Option<QuantizeFn>>,
    forms: fn() -> Vec<(&'static str, QuantizeFn)>,
    src: &[f32],
    dst: &mut [u8],
) -> bool {
    let form = *cell.get_or_init(|| forms().first().map(|f| f.1));
    form.map(|f| f(src, dst)).is_some()
}

/// The activation Q8_0 quantizer (`codec::q8::quant_q8_0_x86`) in its fastest SIMD form
/// ([`q8_0_forms`]): true if it ran, false if the caller must use the scalar one.
pub fn quantize_q8_0_fast(src: &[f32], dst: &mut [u8]) -> bool {
    static FORM: std::sync::OnceLock<Option<QuantizeFn>> = std::sync::OnceLock::new();
    run_fastest(&FORM, q8_0_forms, src, dst)
}

/// Per 32-element block, the scalar quantizer's operations in vectors: `amax` (a `vmaxps`
/// fold that, like `f32::max`, drops NaN lanes), `d = amax/127` and `id = 127/amax` as scalar
/// divisions, `d` to f16 by F16C (round to nearest even, as the software conversion),
/// `round_ties_even(v·id)` by `vcvtps2dq` in the default rounding mode after clamping to
/// [−128, 127], NaN lanes set to 0 (Rust's `NaN as i8`): the same bytes.
#[target_feature(enable = "avx512f,avx512bw,f16c")]
unsafe fn quantize_q8_0_avx512(src: &[f32], dst: &mut [u8]) {
    let abs = _mm512_set1_epi32(0x7FFF_FFFF);
    for (x, b) in src
        .chunks_exact(32)
        .zip(crate::blocks::view_mut::<BlockQ8_0>(dst))
    {
        // SAFETY: each chunk holds 32 f32 (unaligned loads).
        let (v0, v1) = unsafe {
            (
                _mm512_loadu_ps(x.as_ptr()),
                _mm512_loadu_ps(x.as_ptr().add(16)),
            )
        };
        let a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), abs));
        let a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), abs));
        // vmaxps returns its second operand when either is NaN: NaN lanes keep the fold's value
        let m = _mm512_max_ps(a1, _mm512_max_ps(a0, _mm512_setzero_ps()));
        let m = _mm256_max_ps(
            _mm512_castps512_ps256(m),
            _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(m))),
        );
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_shuffle_ps::<1>(m, m));
        let amax = _mm_cvtss_f32(m);
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b.d = (_mm_extract_epi16::<0>(_mm_cvtps_ph::<0>(_mm_set_ss(d))) as u16).to_le_bytes();
        let idv = _mm512_set1_ps(id);
        let q = |v: __m512| {
            let p = _mm512_mul_ps(v, idv);
            let ordered = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(p, p);
            // ±∞ (an overflowing 127/amax) would convert to i32::MIN: clamp first, which
            // commutes with rounding to nearest on [−128, 127]
            let p = _mm512_min_ps(
                _mm512_max_ps(p, _mm512_set1_ps(-128.0)),
                _mm512_set1_ps(127.0),
            );
            _mm512_cvtsepi32_epi8(_mm512_maskz_cvtps_epi32(ordered, p))
        };
        let (q0, q1) = (q(v0), q(v1));
        // SAFETY: a block's 32 code bytes (unaligned stores of 16 + 16).
        unsafe {
            _mm_storeu_si128(b.qs.as_mut_ptr().cast(), q0);
            _mm_storeu_si128(b.qs.as_mut_ptr().add(16).cast(), q1);
        }
    }
}

/// The activation Q8_K quantizer (`codec::q8::quant_q8_k`) in its fastest SIMD form
/// ([`q8_k_forms`]): true if it ran, false if the caller must use the scalar one.
pub fn quantize_q8_k_fast(src: &[f32], dst: &mut [u8]) -> bool {
    static FORM: std::sync::OnceLock<Option<QuantizeFn>> = std::sync::OnceLock::new();
    run_fastest(&FORM, q8_k_forms, src, dst)
}

/// Per 256-element block, the scalar quantizer's operations in vectors:
/// - `amax` by a `vmaxps` fold that drops NaN lanes (the scalar `|v| > amax` never takes a
///   NaN), and `max` = the first element whose |v| equals it (the scalar loop keeps the
///   first of equal magnitudes);
/// - `iscale = −127/max` and `d = 1/iscale` as scalar divisions;
/// - ggml's `nearest_int` as the same f32 addition of 1.5·2²³ and bit mask, `min(127)` and
///   the truncating `as i8` (`vpmovdb`);
/// - `bsums` by `vpmaddubsw`/`vpmaddwd` against ones and a lane fold (exact integers).
///
/// The same bytes, NaN and ±∞ included.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn quantize_q8_k_avx512(src: &[f32], dst: &mut [u8]) {
    let abs = _mm512_set1_epi32(0x7FFF_FFFF);
    let magic = _mm512_set1_ps(12_582_912.0);
    let mant = _mm512_set1_epi32(0x007F_FFFF);
    let half = _mm512_set1_epi32(0x0040_0000);
    let top = _mm512_set1_epi32(127);
    let ones8 = _mm512_set1_epi8(1);
    let ones16 = _mm512_set1_epi16(1);
    for (x, b) in src
        .chunks_exact(256)
        .zip(crate::blocks::view_mut::<BlockQ8K>(dst))
    {
        // SAFETY: each chunk holds 256 f32 (unaligned loads).
        let v: [__m512; 16] =
            std::array::from_fn(|k| unsafe { _mm512_loadu_ps(x.as_ptr().add(16 * k)) });
        let a: [__m512; 16] = std::array::from_fn(|k| {
            _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v[k]), abs))
        });
        // vmaxps returns its second operand when either is NaN: NaN lanes keep the fold's value
        let mut m = _mm512_setzero_ps();
        for ak in a {
            m = _mm512_max_ps(ak, m);
        }
        let amax = _mm512_reduce_max_ps(m);
        if amax == 0.0 {
            *b = Zeroable::zeroed();
            continue;
        }
        let at = (0..16)
            .find_map(|k| {
                let hit = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a[k], _mm512_set1_ps(amax));
                (hit != 0).then(|| 16 * k + hit.trailing_zeros() as usize)
            })
            .expect("amax is one of the magnitudes");
        let iscale = -127.0f32 / x[at];
        let isv = _mm512_set1_ps(iscale);
        let q: [__m128i; 16] = std::array::from_fn(|k| {
            let val = _mm512_add_ps(_mm512_mul_ps(isv, v[k]), magic);
            let i = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(val), mant), half);
            _mm512_cvtepi32_epi8(_mm512_min_epi32(i, top))
        });
        let mut bsums = [0i16; 16];
        for (c, qc) in q.chunks_exact(4).enumerate() {
            let z = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_set_m128i(qc[1], qc[0])),
                _mm256_set_m128i(qc[3], qc[2]),
            );
            // SAFETY: 64 of the block's 256 code bytes (unaligned store).
            unsafe { _mm512_storeu_si512(b.qs[64 * c..].as_mut_ptr().cast(), z) };
            // lane 4j..4j+3: sub-block j of the four; fold each 128-bit lane to its lane 0
            let t = _mm512_madd_epi16(_mm512_maddubs_epi16(ones8, z), ones16);
            let t = _mm512_add_epi32(t, _mm512_shuffle_epi32::<0b10_11_00_01>(t));
            let t = _mm512_add_epi32(t, _mm512_shuffle_epi32::<0b01_00_11_10>(t));
            let mut lanes = [0i32; 16];
            // SAFETY: `lanes` has room for 16 i32.
            unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), t) };
            for j in 0..4 {
                bsums[4 * c + j] = lanes[4 * j] as i16;
            }
        }
        for (o, s) in b.bsums.chunks_exact_mut(2).zip(bsums) {
            o.copy_from_slice(&s.to_le_bytes());
        }
        b.d = (1.0f32 / iscale).to_le_bytes();
    }
}

/// [`quantize_q8_0_avx512`]'s steps in 256-bit registers: the `vmaxps` fold that drops NaN
/// lanes, the scalar divisions and F16C conversion, `vcvtps2dq` after the clamp, NaN lanes
/// zeroed by the ordered compare, and two saturating packs (the values are already in
/// −128..=127) with one `vpermd` restoring the element order. The same bytes.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_q8_0_avx2(src: &[f32], dst: &mut [u8]) {
    let abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (x, b) in src
        .chunks_exact(32)
        .zip(crate::blocks::view_mut::<BlockQ8_0>(dst))
    {
        // SAFETY: each chunk holds 32 f32 (unaligned loads).
        let v: [__m256; 4] =
            std::array::from_fn(|k| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * k)) });
        // vmaxps returns its second operand when either is NaN: NaN lanes keep the fold's value
        let mut m = _mm256_setzero_ps();
        for vk in v {
            m = _mm256_max_ps(_mm256_and_ps(vk, abs), m);
        }
        let amax = hmax8(m);
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b.d = (_mm_extract_epi16::<0>(_mm_cvtps_ph::<0>(_mm_set_ss(d))) as u16).to_le_bytes();
        let idv = _mm256_set1_ps(id);
        let q: [__m256i; 4] = std::array::from_fn(|k| {
            let p = _mm256_mul_ps(v[k], idv);
            let ordered = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_ORD_Q>(p, p));
            // ±∞ would convert to i32::MIN: clamp first (max/min return the bound for NaN,
            // which the ordered mask then zeroes)
            let p = _mm256_min_ps(
                _mm256_max_ps(p, _mm256_set1_ps(-128.0)),
                _mm256_set1_ps(127.0),
            );
            _mm256_and_si256(_mm256_cvtps_epi32(p), ordered)
        });
        let w = _mm256_packs_epi16(
            _mm256_packs_epi32(q[0], q[1]),
            _mm256_packs_epi32(q[2], q[3]),
        );
        // SAFETY: a block's 32 code bytes (unaligned store).
        unsafe {
            _mm256_storeu_si256(
                b.qs.as_mut_ptr().cast(),
                _mm256_permutevar8x32_epi32(w, order),
            )
        };
    }
}

/// The largest of eight non-NaN lanes.
#[target_feature(enable = "avx2")]
#[inline]
fn hmax8(m: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps::<1>(m, m)))
}

/// [`quantize_q8_k_avx512`]'s steps in 256-bit registers. `nearest_int`'s results are cut to
/// their low byte as the scalar `as i8` does (a mask and two unsigned-saturating packs that
/// cannot saturate, then one `vpermd`); `bsums` by `vpmaddubsw`/`vpmaddwd` against ones and
/// two `vphaddd`. The same bytes, NaN and ±∞ included.
#[target_feature(enable = "avx2")]
unsafe fn quantize_q8_k_avx2(src: &[f32], dst: &mut [u8]) {
    let abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
    let magic = _mm256_set1_ps(12_582_912.0);
    let mant = _mm256_set1_epi32(0x007F_FFFF);
    let half = _mm256_set1_epi32(0x0040_0000);
    let top = _mm256_set1_epi32(127);
    let low = _mm256_set1_epi32(0xFF);
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let ones8 = _mm256_set1_epi8(1);
    let ones16 = _mm256_set1_epi16(1);
    for (x, b) in src
        .chunks_exact(256)
        .zip(crate::blocks::view_mut::<BlockQ8K>(dst))
    {
        // SAFETY: each chunk holds 256 f32 (unaligned loads).
        let v: [__m256; 32] =
            std::array::from_fn(|k| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * k)) });
        // vmaxps returns its second operand when either is NaN: NaN lanes keep the fold's value
        let mut m = _mm256_setzero_ps();
        for vk in v {
            m = _mm256_max_ps(_mm256_and_ps(vk, abs), m);
        }
        let amax = hmax8(m);
        if amax == 0.0 {
            *b = Zeroable::zeroed();
            continue;
        }
        let target = _mm256_set1_ps(amax);
        let at = (0..32)
            .find_map(|k| {
                let a = _mm256_and_ps(v[k], abs);
                let hit = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(a, target));
                (hit != 0).then(|| 8 * k + hit.trailing_zeros() as usize)
            })
            .expect("amax is one of the magnitudes");
        let iscale = -127.0f32 / x[at];
        let isv = _mm256_set1_ps(iscale);
        let mut sums = [_mm256_setzero_si256(); 8];
        for (c, sc) in sums.iter_mut().enumerate() {
            let i: [__m256i; 4] = std::array::from_fn(|j| {
                let val = _mm256_add_ps(_mm256_mul_ps(isv, v[4 * c + j]), magic);
                let i = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(val), mant), half);
                _mm256_and_si256(_mm256_min_epi32(i, top), low)
            });
            let z = _mm256_permutevar8x32_epi32(
                _mm256_packus_epi16(
                    _mm256_packus_epi32(i[0], i[1]),
                    _mm256_packus_epi32(i[2], i[3]),
                ),
                order,
            );
            // SAFETY: 32 of the block's 256 code bytes (unaligned store).
            unsafe { _mm256_storeu_si256(b.qs[32 * c..].as_mut_ptr().cast(), z) };
            // dword 4h + j: four codes of sub-block 2c + h (exact integers)
            *sc = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, z), ones16);
        }
        let mut bsums = [0i16; 16];
        for q in 0..2 {
            // per 128-bit half h, dword k: sub-block 2(4q + k) + h
            let t = _mm256_hadd_epi32(
                _mm256_hadd_epi32(sums[4 * q], sums[4 * q + 1]),
                _mm256_hadd_epi32(sums[4 * q + 2], sums[4 * q + 3]),
            );
            let mut lanes = [0i32; 8];
            // SAFETY: `lanes` has room for 8 i32 (unaligned store).
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), t) };
            for k in 0..4 {
                bsums[2 * (4 * q + k)] = lanes[k] as i16;
                bsums[2 * (4 * q + k) + 1] = lanes[4 + k] as i16;
            }
        }
        for (o, s) in b.bsums.chunks_exact_mut(2).zip(bsums) {
            o.copy_from_slice(&s.to_le_bytes());
        }
        b.d = (1.0f32 / iscale).to_le_bytes();
    }
}
