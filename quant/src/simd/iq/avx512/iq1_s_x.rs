//! The repacked IQ1_S_X · Q8_K with AVX-512 (see `codec::repack`): its one-row and decode
//! (multi-row) kernels, and the half-major code helpers IQ1_M_X shares. Its multi-column
//! kernel and tile expander are IQ1_S's ([`Iq1Layout`], in `iq1_s`).

use super::*;

entry!(rows dot_iq1_s_x_avx512_rows_entry => dot_iq1_s_x_avx512_rows);
entry!(dot_iq1_s_x_avx512_entry => dot_iq1_s_x_avx512);

/// IQ1_S_X · Q8_K with AVX-512, one column. A super-block's level codes are one 64-byte
/// load put in element order by three operations per quarter ([`iq1sx_codes`]), not 32
/// grid-row gathers. The reference's two integers (sumi, with the −1 of the level offset,
/// and the delta sum sumi1) are formed as one, T = 8·sumi + sumi1 = Σ_g 8·ls_g·Σ l·y +
/// Σ_k ls·(σ − 8)·bsum_k: one `vpdpwssd` of the `bsums` against per-entry coefficients and
/// two of the four-element sums (`vpdpbusd` per quarter, two quarters packed to words per
/// register) against 8·ls, both looked up in one register `W` made by a
/// `vpmultishiftqb` of the broadcast scale nibbles, a mask and one `vpermw` from
/// [`IQ1X_LUT`]. |T| < 2²⁴, so f32(T)·0.125 is exactly sumi + sumi1/8 before rounding, and
/// rounds as the reference's `sumi + 0.125·sumi1` does: the reference's bits (and the IQ1_S
/// row's it was repacked from). Four super-blocks are reduced by one unpack tree.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(super) unsafe fn dot_iq1_s_x_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { Iq1xDot::new() };
    grid_one!(k, BlockIQ1SX, w, a)
}

/// IQ1_S_X · Q8_K for several weight rows against one activation row (decode), four rows
/// by four super-blocks at a time (`prepared_rows!`). The half-major codes put one half
/// (and so one group scale) in each dword of every 2-bit cut, so the four cuts' sums, 4·l
/// against the activations in cut order ([`S1Act`], prepared once per call per [`S1_SEG`]
/// super-blocks), add into one register, which one `vpdpwssd` scales by 2·ls per dword
/// ([`Iq1xDot::sums_prepared`]): the same exact T as the one-row kernel's, whose float
/// combine follows, so each row gets the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(super) unsafe fn dot_iq1_s_x_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { Iq1xDot::new() };
    let zero = _mm512_setzero_si512();
    let none = S1Act {
        y: [zero; 4],
        bs: zero,
    };
    prepared_rows!(
        k,
        BlockIQ1SX,
        S1Act,
        S1_SEG,
        1,
        |y: &[BlockQ8K]| s1_act(&y[0]),
        none,
        rows,
        a,
        out,
        1.0
    );
}

/// Super-blocks whose activation side the IQ1_S_X multi-row kernel prepares at once
/// ([`S1Act`], 10 KiB on the stack: 8192 elements, a whole row of most matrices).
const S1_SEG: usize = 32;

/// The activation side of one super-block for [`dot_iq1_s_x_avx512_rows`], prepared once
/// per call and used by every row.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct S1Act {
    /// The codes in the order of the half-major weight cuts ([`cut_order`]).
    y: [__m512i; 4],
    /// Dword h: `bsums[h]` (sign-extended; the scale words' high halves are 0).
    bs: __m512i,
}

/// The [`S1Act`] of activation block `y`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn s1_act(y: &BlockQ8K) -> S1Act {
    // SAFETY: 32 `bsums` bytes (unaligned load).
    let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
    S1Act {
        y: cut_order(y),
        bs: _mm512_cvtepi16_epi32(bs),
    }
}

/// Per 16-bit lane w of the IQ1_S_X multi-row kernel's scale register: the
/// `vpmultishiftqb` control that puts the nibble of group w/4 (the group of dword w/2's
/// half) at the lane's low bits.
static IQ1X_HALF_CTRL: [u8; 64] = bytes64!(|b| if b % 2 == 0 { (4 * (b / 8)) as u8 } else { 0 });

/// 16 in the odd lanes (table entries 16..32: the scale), 0 in the even ones (the bsum
/// coefficient).
pub(super) static IQ1X_HALF_OFF: [u16; 32] = iq1x_scale_lanes(true);

/// [`iq1x_lut`] with the scale of the 4·l sums, 2·ls.
static IQ1X_HALF_LUT: [i16; 32] = iq1x_lut(2);

/// `vpermd` controls from half-major code bytes (IQ1_S_X, IQ1_M_X: byte i holds four codes
/// of half i/4) to quarter q in element order: dword m = 4d + p takes code dword 4q + d,
/// whose cut p (bits 2p..2p+2 of each byte, [`HALF_MAJOR_SHIFTS`]) holds elements
/// 64q + 16d + 4p ...
static HALF_MAJOR_QUARTER: [[u32; 16]; 4] = {
    let mut t = [[0u32; 16]; 4];
    let mut q = 0;
    while q < 4 {
        let mut m = 0;
        while m < 16 {
            t[q][m] = (4 * q + m / 4) as u32;
            m += 1;
        }
        q += 1;
    }
    t
};

/// Per dword m of a [`HALF_MAJOR_QUARTER`] pick: the shift 2·(m mod 4) that moves its cut
/// to bits 0–1 of each byte.
static HALF_MAJOR_SHIFTS: [u32; 16] = [0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6];

/// The four quarters of half-major code bytes `c`, element order, each byte's code at
/// bits 0–1 (the bits above it are not cleared): per quarter one `vpermd` and one
/// `vpsrlvd`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(in crate::simd) fn half_major_quarters(c: __m512i) -> [__m512i; 4] {
    // SAFETY: the tables are 64 bytes each (unaligned loads).
    let (picks, shifts) = unsafe {
        (
            HALF_MAJOR_QUARTER.map(|t| _mm512_loadu_si512(t.as_ptr().cast())),
            _mm512_loadu_si512(HALF_MAJOR_SHIFTS.as_ptr().cast()),
        )
    };
    let mut out = [c; 4];
    for (o, pick) in out.iter_mut().zip(picks) {
        *o = _mm512_srlv_epi32(_mm512_permutexvar_epi32(pick, c), shifts);
    }
    out
}

/// The level codes of an IQ1_S_X block's four quarters, element order: one 64-byte load,
/// then per quarter [`half_major_quarters`]' two operations and a mask.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
#[inline]
pub(super) unsafe fn iq1sx_codes(x: &BlockIQ1SX) -> [__m512i; 4] {
    // SAFETY: 64 code bytes (unaligned load).
    let q = unsafe { _mm512_loadu_si512(x.qs.as_ptr().cast()) };
    half_major_quarters(q).map(|v| _mm512_and_si512(v, _mm512_set1_epi8(3)))
}

/// The activation codes of block `y` in the order of half-major weight cuts: per cut p,
/// dword h holds activation dword 4h + p (elements 16h + 4p .. + 4), the elements cut p
/// of the weight codes holds in dword h. Two `vpermt2d` and a blend per cut.
#[target_feature(enable = "avx512f")]
#[inline]
pub(in crate::simd) fn cut_order(y: &BlockQ8K) -> [__m512i; 4] {
    let mut qv = [_mm512_setzero_si512(); 4];
    for (p, qv) in qv.iter_mut().enumerate() {
        // SAFETY: quarter p is activation bytes 64p..64p+64 (unaligned load).
        *qv = unsafe { _mm512_loadu_si512(y.qs[64 * p..].as_ptr().cast()) };
    }
    let mut cut = qv;
    for (p, c) in cut.iter_mut().enumerate() {
        // dword h from activation dword 4h + p: quarters 0, 1 for h < 8, 2, 3 after
        let idx = _mm512_add_epi32(
            _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28),
            _mm512_set1_epi32(p as i32),
        );
        *c = _mm512_mask_blend_epi32(
            0xFF00,
            _mm512_permutex2var_epi32(qv[0], idx, qv[1]),
            _mm512_permutex2var_epi32(qv[2], idx, qv[3]),
        );
    }
    cut
}

/// Per 16-bit lane w of the one-column IQ1_S_X kernels' weight-word register `W`: the
/// `vpmultishiftqb` control that puts the nibble of the lane's group at its low bits (lanes
/// 0–15: the correction coefficient of `bsums` entry w, group w/2; lanes 16–23: the scale
/// of group w − 16; 24–31 repeat 16–23), and the table half it indexes (`IQ1X_OFF`).
static IQ1X_CTRL: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut w = 0;
    while w < 32 {
        let g = if w < 16 { w / 2 } else { (w - 16) % 8 };
        t[2 * w] = (4 * g) as u8;
        w += 1;
    }
    t
};

/// 16 in the lanes of `W` that take a scale (table entries 16..32), 0 in the others.
static IQ1X_OFF: [u16; 32] = iq1x_scale_lanes(false);

/// 16 in the lanes that take a scale (table entries 16..32), 0 in the others: lanes
/// 16..32, or with `odd` the odd lanes.
const fn iq1x_scale_lanes(odd: bool) -> [u16; 32] {
    let mut t = [0u16; 32];
    let mut w = 0;
    while w < 32 {
        if (odd && w % 2 == 1) || (!odd && w >= 16) {
            t[w] = 16;
        }
        w += 1;
    }
    t
}

/// [`iq1x_lut`] with the scale 8·ls (see [`dot_iq1_s_x_avx512`]).
pub(super) static IQ1X_LUT: [i16; 32] = iq1x_lut(8);

/// The `vpermw` table from a group nibble n (scale index s = n & 7, ls = 2s + 1, delta
/// sign σ = −1 if n & 8 else +1): entries 0..16 the bsum coefficient ls·(σ − 8), entries
/// 16..32 the scale `mult`·ls.
const fn iq1x_lut(mult: i16) -> [i16; 32] {
    let mut t = [0i16; 32];
    let mut n = 0;
    while n < 16 {
        let ls = 2 * (n & 7) as i16 + 1;
        let sg = if n & 8 != 0 { -1 } else { 1 };
        t[n] = ls * (sg - 8);
        t[16 + n] = mult * ls;
        n += 1;
    }
    t
}

/// [`pair_pick`] from `W` (group g's 8·ls in word 16 + g).
static IQ1X_PICK: [[u16; 32]; 2] = pair_pick(1, 16);

/// The one-column IQ1_S_X kernels' constants, in registers.
struct Iq1xDot {
    ctrl: __m512i,
    off: __m512i,
    lut: __m512i,
    pick: [__m512i; 2],
    /// The multi-row kernel's [`IQ1X_HALF_CTRL`], [`IQ1X_HALF_OFF`], [`IQ1X_HALF_LUT`].
    half: [__m512i; 3],
}

impl Iq1xDot {
    /// Loads the constants.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn new() -> Self {
        Iq1xDot {
            ctrl: table64(&IQ1X_CTRL),
            off: table64(&IQ1X_OFF),
            lut: table64(&IQ1X_LUT),
            pick: tables64(&IQ1X_PICK),
            half: [
                table64(&IQ1X_HALF_CTRL),
                table64(&IQ1X_HALF_OFF),
                table64(&IQ1X_HALF_LUT),
            ],
        }
    }

    /// One IQ1_S_X super-block's T = 8·sumi + sumi1 against `y`, spread over the lanes (see
    /// [`dot_iq1_s_x_avx512`]).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums(&self, x: &BlockIQ1SX, y: &BlockQ8K) -> __m512i {
        // SAFETY: same features as this function.
        let lvs = unsafe { iq1sx_codes(x) };
        let sc = _mm512_set1_epi32(i32::from_le_bytes(x.sc));
        let idx = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_multishift_epi64_epi8(self.ctrl, sc),
            _mm512_set1_epi16(0xF),
            self.off,
        );
        let wv = _mm512_permutexvar_epi16(idx, self.lut);
        // SAFETY: 32 `bsums` bytes (unaligned load; the upper half of the register is 0).
        let bs = unsafe { _mm512_zextsi256_si512(_mm256_loadu_si256(y.bsums.as_ptr().cast())) };
        let zero = _mm512_setzero_si512();
        let d: [__m512i; 4] = std::array::from_fn(|p| {
            // SAFETY: quarter p is activation bytes 64p..64p+64 (unaligned load).
            let yv = unsafe { _mm512_loadu_si512(y.qs[64 * p..].as_ptr().cast()) };
            _mm512_dpbusd_epi32(zero, lvs[p], yv)
        });
        // four-element sums |Σ| ≤ 4·2·128
        let sc = self.pick.map(|t| _mm512_permutexvar_epi16(t, wv));
        scale_pairs(_mm512_madd_epi16(bs, wv), &d, &sc)
    }
}

impl Iq1xDot {
    /// One IQ1_S_X super-block's T = 8·sumi + sumi1 against a prepared activation block,
    /// spread over the lanes. The four 2-bit cuts of the half-major codes, each moved to 4·l
    /// by one `vgf2p8affineqb`, add into one register with one `vpdpbusd` each against the
    /// cut-ordered codes: dword h is Σ_{e∈h} 4·l·y (|·| ≤ 16·12·127 < 2¹⁵ for every code
    /// 0..=3). One `vpermw` of the group nibbles gives word 2h the bsum coefficient
    /// ls·(σ − 8) and word 2h + 1 the scale 2·ls of dword h's group; split into low words
    /// (high words 0), one `vpmaddwd` against the sign-extended bsums and one `vpdpwssd`
    /// against the sums add Σ_h ls·(σ − 8)·bsum_h + Σ_g 8·ls_g·Σ l·y.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums_prepared(&self, x: &BlockIQ1SX, act: &S1Act) -> __m512i {
        // SAFETY: 64 code bytes (unaligned load).
        let c = unsafe { _mm512_loadu_si512(x.qs.as_ptr().cast()) };
        let mut d = _mm512_setzero_si512();
        for (p, y) in act.y.iter().enumerate() {
            // cut p (bits 2p..2p+2 of every byte) moved to bits 2–3: 4·l
            let m = _mm512_set1_epi64(crate::simd::gf_move2(2 * p as u32, 2));
            d = _mm512_dpbusd_epi32(d, _mm512_gf2p8affine_epi64_epi8::<0>(c, m), *y);
        }
        let [ctrl, off, lut] = self.half;
        let sc = _mm512_set1_epi32(i32::from_le_bytes(x.sc));
        let idx = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_multishift_epi64_epi8(ctrl, sc),
            _mm512_set1_epi16(0xF),
            off,
        );
        let wv = _mm512_permutexvar_epi16(idx, lut);
        let coef = _mm512_and_si512(wv, _mm512_set1_epi32(0xFFFF));
        let scale = _mm512_srli_epi32::<16>(wv);
        crate::simd::dpwssd(_mm512_madd_epi16(act.bs, coef), d, scale)
    }
}

rows4x4_impl!(group Iq1xDot, BlockIQ1SX, 0.125);
rows4x4_impl!(prepared Iq1xDot, BlockIQ1SX, S1Act, 0.125, sums_prepared, |x| u16::from_le_bytes(x.d));
