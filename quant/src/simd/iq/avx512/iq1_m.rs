//! AVX-512 kernels for IQ1_M · Q8_K, one row and four rows (decode's matvecs): a child of
//! `iq::avx512`, whose IQ1_S gather scheme and `grid_one!` pass these share.
//!
//! IQ1_M differs from IQ1_S in its delta: one sign per 8 elements, not per 32, so the delta
//! term Σ σ·Σ₈y cannot come from the 16-element `bsums`. Instead each element's weight is
//! formed whole, grid value and delta together, as W = 8·v + σ ∈ {±1, ±7, ±9} (v ∈ {−1, 0,
//! 1} the grid value, σ = ±1 the sub-group's delta sign), so that the reference's two
//! integers come out as one, T = 8·sumi + sumi1 = Σ_h s'_h·Σ_{e∈h} W_e·y_e (h the sixteen
//! 16-element halves, s' = 2s + 1 their scales), as in the IQ1_S_X kernels.
//!
//! - The 32 11-bit grid indices are formed as IQ1_S's are (`vpmovzxbd` of `qs`,
//!   `vpmultishiftqb` of the broadcast `qh` for bits 8–10: sub-group i's index bits and sign
//!   are nibble i of the 16 `qh` bytes) and each quarter's eight grid rows are one
//!   `vpgatherdq` from the first 2048 rows of [`IQ1M_LEVELS`] (those of a positive delta),
//!   which store each value as 8·(v + 1) + 2.
//! - W + 9 = 8·(v + 1) + 2 − 2·\[σ < 0\]: bit 1 of every table byte is set, so one
//!   `vpmultishiftqb` that puts the sub-group's sign bit at bit 1 of its eight bytes and one
//!   `vpternlogq` (t ⊕ (sign ∧ 2)) give the unsigned weights, and `vpdpbusd` their four-element
//!   sums against the activations (each 128-bit lane: one half).
//! - Two quarters' sums are packed to words (|Σ| ≤ 4·18·128) and multiplied by their halves'
//!   scales with `vpdpwssd`; the scales come from one `vpmultishiftqb` of the broadcast scale
//!   words and a mask (2s + 1 per half), spread by one `vpermw` per quarter pair.
//! - The offset 9 comes back as −9·Σ_h s'_h·bsum_h: one `vpmullw` and one `vpdpwssd` of the
//!   `bsums` against the same scale words.
//!
//! |T| ≤ 256·9·128·15 < 2²⁴, so f32(T)·0.125 is exactly sumi + sumi1/8, as the reference's
//! `sumi + 0.125·sumi1` is: with the reference's float combine, the reference's bits.
//!
//! The repacked IQ1_M_X (`codec::repack`) keeps the level codes l = v + 1 in place of the
//! grid indices, half-major (byte i holds four codes of the 16-element half i/4), and the 32
//! delta signs as one u32, so its one-column and multi-column kernels form W + 9 = 8·l + 2 −
//! 2·\[σ < 0\] without a lookup: per quarter one `vpermd` and one `vpsrlvd` put the codes in
//! element order, one `vgf2p8affineqb` moves them to bits 3–4, clears the rest and sets bit 1
//! (8·l + 2), and the sign step above uses the signs cut from the broadcast u32. Everything
//! after the weights (scales, sums, float combine) is shared ([`Iq1mLayout`]), so IQ1_M_X
//! gets IQ1_M's bits. Its multi-row kernel (decode) uses the half-major order directly: see
//! [`dot_iq1_m_x_avx512_rows`].

use super::*;
use crate::blocks::{BlockIQ1M, BlockIQ1MX};
use crate::codec::iquants::iq1m_d_bits;
use crate::grids::IQ1M_LEVELS;

entry!(rows dot_iq1_m_x_avx512_rows_entry => dot_iq1_m_x_avx512_rows);
entry!(multi dot_iq1_m_avx512_multi_entry => dot_iq1_m_avx512_multi, dot_iq1_m_x_avx512_multi_entry => dot_iq1_m_x_avx512_multi);
entry!(dot_iq1_m_avx512_entry => dot_iq1_m_avx512, dot_iq1_m_x_avx512_entry => dot_iq1_m_x_avx512);

/// `vpmultishiftqb` control on a qword of eight `qh` bytes (sixteen sub-groups' nibbles):
/// byte 1 of dword i takes bits 4i.., so sub-group i's three high index bits land at bits
/// 8–10 of dword i.
static M_HI_BITS: [u8; 64] = bytes64!(|b| if b % 4 == 1 { (b - 1) as u8 } else { 0 });

/// `vpmultishiftqb` controls per quarter parity s: every byte of qword j takes bits
/// 4·(8s + j) + 2.. of the `qh` qword the quarter's sub-groups live in, putting sub-group
/// 8s + j's delta sign (nibble bit 3) at bit 1.
static M_SIGN: [[u8; 64]; 2] = [
    bytes64!(|b| (4 * (b / 8) + 2) as u8),
    bytes64!(|b| (32 + 4 * (b / 8) + 2) as u8),
];

/// `vpmultishiftqb` controls per quarter p on IQ1_M_X's delta signs (the u32 broadcast to
/// both halves of every qword): every byte of qword j takes bits 8p + j − 1.. (rotating, so
/// quarter 0's first qword takes bit 63, then bit 0), putting sub-group 8p + j's sign at bit 1.
static MX_SIGN: [[u8; 64]; 4] = [
    bytes64!(|b| ((b / 8 + 63) % 64) as u8),
    bytes64!(|b| (8 + b / 8 - 1) as u8),
    bytes64!(|b| (16 + b / 8 - 1) as u8),
    bytes64!(|b| (24 + b / 8 - 1) as u8),
];

/// `vpmultishiftqb` control on the broadcast scale qword: the low byte of word w takes the
/// bits from one below half h = w mod 16's 3-bit scale (at bit 16·(h/4) + 3·(h mod 4)), so
/// the scale sits at bits 1–3 (the rotation wraps half 0's to bit 63); high bytes unused.
static M_SCALE_CTRL: [u8; 64] = bytes64!(|b| if b % 2 == 0 {
    let h = (b / 2) % 16;
    ((16 * (h / 4) + 3 * (h % 4) + 63) % 64) as u8
} else {
    0
});

/// `vpermw` controls from the scale words (word h: s'_h) to quarter pair q's packed sums:
/// 128-bit lane j holds half 8q + j's four sums then half 8q + 4 + j's.
static M_PICK: [[u16; 32]; 2] = packed_pick(8, 4, 2, 1, 0);

/// One unpacked IQ1_M super-block.
struct Iq1mBlock {
    /// The unsigned weights W + 9 of each 64-element quarter, element order.
    w9: [__m512i; 4],
    /// Word h (and h + 16): the scale s'_h of half h.
    wv: __m512i,
    /// The scales of quarter pair q's packed sums ([`M_PICK`]).
    pairs: [__m512i; 2],
}

/// The IQ1_M kernels' constants, in registers.
struct Iq1mDot {
    hi: __m512i,
    sign: [__m512i; 2],
    xsign: [__m512i; 4],
    sctrl: __m512i,
    pick: [__m512i; 2],
    /// IQ1_M_X: [`M1_HALF_CTRL`].
    half: __m512i,
}

/// The two IQ1_M layouts ([`BlockIQ1M`] and its repacked [`BlockIQ1MX`]) the kernels share:
/// they differ only in how the unsigned weights W + 9 are formed.
trait Iq1mLayout: bytemuck::Pod {
    /// `true` for IQ1_M_X.
    const REPACKED: bool;
    /// The eight scale bytes (the 3-bit scales and the f16 super-scale's nibbles).
    fn scales(&self) -> [u8; 8];
}

impl Iq1mLayout for BlockIQ1M {
    const REPACKED: bool = false;
    fn scales(&self) -> [u8; 8] {
        self.scales
    }
}

impl Iq1mLayout for BlockIQ1MX {
    const REPACKED: bool = true;
    fn scales(&self) -> [u8; 8] {
        self.scales
    }
}

impl Iq1mDot {
    /// Loads the constants.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn new() -> Self {
        Iq1mDot {
            hi: table64(&M_HI_BITS),
            sign: tables64(&M_SIGN),
            xsign: tables64(&MX_SIGN),
            sctrl: table64(&M_SCALE_CTRL),
            pick: tables64(&M_PICK),
            half: table64(&M1_HALF_CTRL),
        }
    }

    /// Unpacks one super-block of either layout (exact): its unsigned weights W + 9 per
    /// quarter and its scale words (see the module docs).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn unpack<B: Iq1mLayout>(&self, x: &B) -> Iq1mBlock {
        // `cast_ref` is to the block's own type (the branch not taken is removed at compile
        // time)
        let w9 = if B::REPACKED {
            // SAFETY: same features as this function.
            unsafe { self.weights_x(bytemuck::cast_ref(x)) }
        } else {
            // SAFETY: same features as this function.
            unsafe { self.weights(bytemuck::cast_ref(x)) }
        };
        // word h (and h + 16): s'_h = 2·s_h + 1
        let sc = _mm512_set1_epi64(i64::from_le_bytes(x.scales()));
        let wv = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_multishift_epi64_epi8(self.sctrl, sc),
            _mm512_set1_epi16(0xE),
            _mm512_set1_epi16(1),
        );
        Iq1mBlock {
            w9,
            wv,
            pairs: std::array::from_fn(|q| _mm512_permutexvar_epi16(self.pick[q], wv)),
        }
    }

    /// IQ1_M_X's unsigned weights W + 9 per quarter, element order: 8·l + 2 from the
    /// half-major codes ([`Self::quarters_x`]), and the sign step (see the module docs).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn weights_x(&self, x: &BlockIQ1MX) -> [__m512i; 4] {
        // SAFETY: same features as this function.
        let base = unsafe { self.quarters_x(x) };
        let sg = _mm512_set1_epi32(i32::from_le_bytes(x.sg));
        let two = _mm512_set1_epi8(2);
        let mut w = base;
        for (p, w) in w.iter_mut().enumerate() {
            // 8·l + 2, then ⊕ (the sub-group's sign bit at bit 1)
            let signs = _mm512_multishift_epi64_epi8(self.xsign[p], sg);
            *w = _mm512_ternarylogic_epi64::<0x78>(*w, signs, two);
        }
        w
    }

    /// IQ1_M's unsigned weights W + 9 per quarter: the gathered grid rows and the sign step
    /// (see the module docs).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn weights(&self, x: &BlockIQ1M) -> [__m512i; 4] {
        let qh = |i: usize| {
            let b: [u8; 8] = x.qh[8 * i..8 * i + 8].try_into().unwrap();
            _mm512_set1_epi64(i64::from_le_bytes(b))
        };
        let (h0, h1) = (qh(0), qh(1));
        // SAFETY: 32 `qs` bytes per block (two unaligned 16-byte loads).
        let (q0, q1) = unsafe {
            (
                _mm512_cvtepu8_epi32(_mm_loadu_si128(x.qs.as_ptr().cast())),
                _mm512_cvtepu8_epi32(_mm_loadu_si128(x.qs[16..].as_ptr().cast())),
            )
        };
        // index = qs | (hi & 0x700)
        let c700 = _mm512_set1_epi32(0x700);
        let i0 =
            _mm512_ternarylogic_epi32::<0xF8>(q0, _mm512_multishift_epi64_epi8(self.hi, h0), c700);
        let i1 =
            _mm512_ternarylogic_epi32::<0xF8>(q1, _mm512_multishift_epi64_epi8(self.hi, h1), c700);
        let base = IQ1M_LEVELS.as_ptr().cast::<u8>();
        // SAFETY: every index is < 2048, inside the table (4096 rows), and each read is 8
        // bytes at 8·index.
        let lv = unsafe {
            [
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(i0), base.cast()),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(i0), base.cast()),
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(i1), base.cast()),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(i1), base.cast()),
            ]
        };
        let two = _mm512_set1_epi8(2);
        std::array::from_fn(|p| {
            let signs = _mm512_multishift_epi64_epi8(self.sign[p % 2], if p < 2 { h0 } else { h1 });
            // W + 9 = level byte ⊕ (sign bit at bit 1)
            _mm512_ternarylogic_epi64::<0x78>(lv[p], signs, two)
        })
    }

    /// An unpacked super-block's T = 8·sumi + sumi1 against `y`, spread over the lanes of
    /// the result (see the module docs).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums(b: &Iq1mBlock, y: &BlockQ8K) -> __m512i {
        let z = _mm512_setzero_si512();
        let d: [__m512i; 4] = std::array::from_fn(|p| {
            // SAFETY: quarter p is activation bytes 64p..64p+64 (unaligned load).
            let yv = unsafe { _mm512_loadu_si512(y.qs[64 * p..].as_ptr().cast()) };
            _mm512_dpbusd_epi32(z, b.w9[p], yv)
        });
        // SAFETY: 32 `bsums` bytes (unaligned load; the upper half of the register is 0).
        let bs = unsafe { _mm512_zextsi256_si512(_mm256_loadu_si256(y.bsums.as_ptr().cast())) };
        let acc = _mm512_madd_epi16(_mm512_mullo_epi16(bs, _mm512_set1_epi16(-9)), b.wv);
        scale_pairs(acc, &d, &b.pairs)
    }

    /// The products `f32(d)·dy·(T/8)` of four super-blocks of `xs · ys`, one per lane.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn group<B: Iq1mLayout>(&self, xs: &[B; 4], ys: &[BlockQ8K; 4]) -> __m128 {
        let mut z = [_mm512_setzero_si512(); 4];
        let mut hd = [0u16; 4];
        let mut dy = [0f32; 4];
        for (k, zk) in z.iter_mut().enumerate() {
            let (x, y) = (&xs[k], &ys[k]);
            hd[k] = iq1m_d_bits(&x.scales());
            dy[k] = y.d();
            // SAFETY: same features as this function.
            *zk = unsafe { Self::sums(&self.unpack(x), y) };
        }
        let t = _mm_mul_ps(
            _mm_cvtepi32_ps(sums4(z[0], z[1], z[2], z[3])),
            _mm_set1_ps(0.125),
        );
        block_products(&hd, &dy, t)
    }
}

/// IQ1_M · Q8_K with AVX-512, one column: four super-blocks per [`Iq1mDot::group`], their
/// products added in block order (the reference's bits; see the module docs).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq1_m_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { Iq1mDot::new() };
    grid_one!(k, BlockIQ1M, w, a)
}

/// IQ1_M_X · Q8_K with AVX-512, one column: [`dot_iq1_m_avx512`] with the weights cut out
/// of the stored codes instead of gathered (IQ1_M's bits).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq1_m_x_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { Iq1mDot::new() };
    grid_one!(k, BlockIQ1MX, w, a)
}

/// Super-blocks whose activation side the IQ1_M_X multi-row kernel prepares at once
/// ([`M1Act`], 12 KiB on the stack: 8192 elements, a whole row of most matrices).
const M1_SEG: usize = 32;

/// The activation side of one super-block for [`dot_iq1_m_x_avx512_rows`], prepared once
/// per call and used by every row: the codes in the order of IQ1_M_X's half-major cuts and
/// the sums the grid offset and the delta term need.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct M1Act {
    /// Per cut p: dword h holds activation dword 4h + p (elements 16h + 4p .. + 4), the
    /// elements cut p of the weight codes holds in dword h.
    y: [__m512i; 4],
    /// Dword h: −4·bsum_h (half h's sum times the grid offset, halved as the codes are:
    /// see [`Iq1mDot::sums_prepared`]), |·| < 2¹⁵.
    nbs: __m512i,
    /// Word w: Σ y over sub-group w (elements 8w..8w + 8).
    sum8: __m512i,
}

/// The [`M1Act`] of activation block `y`: the cut-ordered codes ([`cut_order`]), the
/// 8-element sums by `vpsadbw` on the codes biased to unsigned (each
/// qword Σ(y + 128) over its eight bytes), narrowed to words.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
#[inline]
fn m1_act(y: &BlockQ8K) -> M1Act {
    let bias = _mm512_set1_epi8(-128);
    let zero = _mm512_setzero_si512();
    let mut q = [_mm_setzero_si128(); 4];
    for (p, q) in q.iter_mut().enumerate() {
        // SAFETY: quarter p is activation bytes 64p..64p+64 (unaligned load).
        let qv = unsafe { _mm512_loadu_si512(y.qs[64 * p..].as_ptr().cast()) };
        *q = _mm512_cvtepi64_epi16(_mm512_sad_epu8(_mm512_xor_si512(qv, bias), zero));
    }
    let lo = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(q[0]), q[1]);
    let hi = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(q[2]), q[3]);
    let sums = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
    // SAFETY: 32 `bsums` bytes (unaligned load).
    let bs = _mm512_cvtepi16_epi32(unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) });
    M1Act {
        y: cut_order(y),
        nbs: _mm512_sub_epi32(zero, _mm512_slli_epi32::<2>(bs)),
        sum8: _mm512_sub_epi16(sums, _mm512_set1_epi16(8 * 128)),
    }
}

/// `vpmultishiftqb` control on the broadcast scale qword: the low byte of word w takes the
/// bits from one below half h = w/2's 3-bit scale (at bit 16·(h/4) + 3·(h mod 4)), so the
/// scale sits at bits 1–3 (the rotation wraps half 0's to bit 63); high bytes unused.
static M1_HALF_CTRL: [u8; 64] = bytes64!(|b| if b % 2 == 0 {
    let h = b / 4;
    ((16 * (h / 4) + 3 * (h % 4) + 63) % 64) as u8
} else {
    0
});

impl Iq1mDot {
    /// IQ1_M_X's codes per quarter in element order, 8·l + 2 in every byte (what
    /// `vgf2p8affineqb` forms from IQ1_S_X-ordered codes): per quarter one `vpermd` that
    /// puts dword m = 4d + p's half (code dword 4q + d) in place, one `vpsrlvd` that moves
    /// its cut p (bits 2p..2p+2 of each byte) down, and one `vgf2p8affineqb` that moves
    /// bits 0–1 to 3–4, clears the rest and sets bit 1.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn quarters_x(&self, x: &BlockIQ1MX) -> [__m512i; 4] {
        // SAFETY: 64 code bytes (unaligned load).
        let c = unsafe { _mm512_loadu_si512(x.qs.as_ptr().cast()) };
        let m = _mm512_set1_epi64(crate::simd::gf_move2(0, 3));
        half_major_quarters(c).map(|t| _mm512_gf2p8affine_epi64_epi8::<2>(t, m))
    }

    /// T = 8·sumi + sumi1 of IQ1_M_X block `x` against a prepared activation block `act`,
    /// spread over the lanes. The four 2-bit cuts of the half-major codes, each moved to
    /// 4·l by one `vgf2p8affineqb`, add into one register with one `vpdpbusd` each against
    /// the cut-ordered codes: dword h is Σ_{e∈h} 4·l·y (|·| ≤ 16·12·127 < 2¹⁵ for every
    /// code 0..=3), which one `vpdpwssd` multiplies by 2·s'_h (each dword's low word
    /// against a scale word whose high word is 0). The grid offset −8·s'_h·bsum_h comes
    /// from one `vpmaddwd` of −4·bsum_h with the same scales, the delta term
    /// Σ_w ±s'_{w/2}·Σ₈y_w from one `vpdpwssd`, the signs put on the scale words by one
    /// masked subtract (see [`dot_iq1_m_x_avx512_rows`]).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums_prepared(&self, x: &BlockIQ1MX, act: &M1Act) -> __m512i {
        // SAFETY: 64 code bytes (unaligned load).
        let c = unsafe { _mm512_loadu_si512(x.qs.as_ptr().cast()) };
        let z = _mm512_setzero_si512();
        let mut d = z;
        for (p, y) in act.y.iter().enumerate() {
            // cut p (bits 2p..2p+2 of every byte) moved to bits 2–3: 4·l
            let m = _mm512_set1_epi64(crate::simd::gf_move2(2 * p as u32, 2));
            d = _mm512_dpbusd_epi32(d, _mm512_gf2p8affine_epi64_epi8::<0>(c, m), *y);
        }
        // words 2h and 2h + 1: s'_h = 2·s_h + 1
        let sc = _mm512_set1_epi64(i64::from_le_bytes(x.scales));
        let sw = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_multishift_epi64_epi8(self.half, sc),
            _mm512_set1_epi16(0xE),
            _mm512_set1_epi16(1),
        );
        // dword h: 2·s'_h in its low word, 0 in its high word
        let sd = _mm512_and_si512(_mm512_slli_epi32::<1>(sw), _mm512_set1_epi32(0xFFFF));
        let acc = crate::simd::dpwssd(_mm512_madd_epi16(act.nbs, sd), d, sd);
        // word w: ±s'_{w/2}, negative where sub-group w's delta is
        let neg: __mmask32 = u32::from_le_bytes(x.sg);
        let sw = _mm512_mask_sub_epi16(sw, neg, z, sw);
        crate::simd::dpwssd(acc, act.sum8, sw)
    }

    /// The block products `f32(d)·dy·(T/8)` of four rows by four super-blocks
    /// ([`products4x4`]: element k holds super-block k's, one row per lane).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn rows4x4_prepared(
        &self,
        xs: &[&[BlockIQ1MX; 4]; 4],
        ys: &[BlockQ8K; 4],
        acts: &[M1Act; 4],
    ) -> [__m128; 4] {
        // per super-block k: 128-bit lane l holds the four rows' partial sums of lane l
        // (plain loops: a closure here is not inlined and passes its vectors in memory)
        let mut t = [_mm512_setzero_si512(); 4];
        for (k, tk) in t.iter_mut().enumerate() {
            let mut z = [_mm512_setzero_si512(); 4];
            for (zr, x) in z.iter_mut().zip(xs) {
                // SAFETY: same features as this function.
                *zr = unsafe { self.sums_prepared(&x[k], &acts[k]) };
            }
            *tk = tree4(z[0], z[1], z[2], z[3]);
        }
        let hd: [u16; 16] = std::array::from_fn(|i| iq1m_d_bits(&xs[i % 4][i / 4].scales));
        let dy = [ys[0].d(), ys[1].d(), ys[2].d(), ys[3].d()];
        products4x4(&t, &hd, &dy, 0.125)
    }
}

/// IQ1_M_X · Q8_K for several weight rows against one activation row (decode).
///
/// The one-row kernel forms each weight whole, W + 9 = 8·l + 2 − 2·\[σ < 0\], which costs a
/// sign cut and a merge per quarter, and scales two quarters' sums per register pair. Here
/// the sign stays out of the weights and the half-major codes put one half in each dword of
/// every cut: T = Σ_h 2·s'_h·(Σ_{e∈h} 4·l_e·y_e − 4·bsum_h) + Σ_w σ_w·s'_{w/2}·Σ₈y_w, the
/// four cuts' sums added in one register and scaled by one `vpdpwssd`. The activation parts
/// (the codes in cut order, −4·bsum, the 8-element sums Σ₈y) are prepared once per
/// [`M1_SEG`] super-blocks ([`M1Act`]) for every row of the call
/// ([`Iq1mDot::sums_prepared`]). The same exact T,
/// so with the one-row kernel's float combine (four super-blocks' sums reduced by one
/// unpack tree, their products added in block order) each row gets the reference's bits.
/// Four rows per pass; a short pass repeats its first row in the other lanes and does not
/// store them.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq1_m_x_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { Iq1mDot::new() };
    let zero = _mm512_setzero_si512();
    let none = M1Act {
        y: [zero; 4],
        nbs: zero,
        sum8: zero,
    };
    prepared_rows!(
        k,
        BlockIQ1MX,
        M1Act,
        M1_SEG,
        1,
        |y: &[BlockQ8K]| m1_act(&y[0]),
        none,
        rows,
        a,
        out,
        1.0
    );
}

/// IQ1_M · Q8_K against up to eight activation columns per pass (prompt chunks, MoE experts
/// with several tokens): each super-block is unpacked once ([`Iq1mDot::unpack`]: the
/// gathers, signs and scales) and its sums formed per column; each column's float combine
/// is the reference's, so it gets the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq1_m_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { iq1m_multi::<BlockIQ1M>(n, w, acts, out) }
}

/// IQ1_M_X · Q8_K against up to eight activation columns per pass: [`dot_iq1_m_avx512_multi`]
/// on the repacked layout (IQ1_M's bits).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq1_m_x_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { iq1m_multi::<BlockIQ1MX>(n, w, acts, out) }
}

/// The multi-column kernel's body for either IQ1_M layout.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn iq1m_multi<B: Iq1mLayout>(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { Iq1mDot::new() };
    let xs = view::<B>(w);
    for r in crate::simd::column_split(acts.len(), COLS) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let mut ys: [&[BlockQ8K]; COLS] = [&[]; COLS];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8K>(a);
        }
        let ys = &ys[..acts.len()];
        let mut s = [0f32; COLS];
        for (bi, x) in xs.iter().enumerate() {
            // SAFETY: same features as this function.
            let b = unsafe { k.unpack(x) };
            let dx = f16c!(iq1m_d_bits(&x.scales()).to_le_bytes());
            for (c, y) in ys.iter().enumerate() {
                let y = &y[bi];
                // SAFETY: same features as this function.
                let t = _mm512_reduce_add_epi32(unsafe { Iq1mDot::sums(&b, y) });
                s[c] += dx * y.d() * (t as f32 * 0.125);
            }
        }
        out.copy_from_slice(&s[..out.len()]);
    }
}
