//! The IQ1_S and IQ1_M decode (multi-row) kernels that gather in group order against
//! activations prepared once per call, with no repack: a child of `iq::avx512`.
//!
//! The two types share IQ1S_GRID's 2048 rows, which do not fit in registers, so their 32
//! grid rows per super-block are still gathered (`vpgatherdq`, eight 8-byte rows per
//! instruction). On the Intel hosts measured here the gathers cost about what the load
//! ports allow (eight loads in ~3 cycles). The older kernels (IQ1_S's one row at a time,
//! IQ1_M's four by four) spent as much again on forming the indices, the signs, the scales
//! and the offset terms of every super-block against the raw activation block. These kernels cut that work down by choosing the
//! order the gathers fill ([`Order`]: the sub-group each gather fetches in each qword):
//!
//! - the sums of the gathers add into registers whose dwords each belong to one scale (an
//!   IQ1_S group, an IQ1_M half), so one `vpdpwssd` applies every scale, against
//!   activations put in the same order once per call ([`ordered_act`]);
//! - the 32 indices are two registers, each one `vpermb` of the zero-extended `qs` bytes
//!   (bits 0–7), one `vpmultishiftqb` of the 128-bit broadcast `qh` (the high bits) and one
//!   `vpternlogd` ([`GatherIndex`]). The broadcast holds sub-groups 16·(k mod 2).. in qword
//!   k, and index lane t sits in qword t/2, so every order keeps gather lane q's sub-groups
//!   in 16·((q/2) mod 2)..: then no permute of `qh` is needed (checked when the tables are
//!   built).
//!
//! IQ1_S ([`dot_iq1_s_avx512_prepared`]): gather j fetches sub-group j of group G(q) in
//! qword q ([`S_GROUPS`]), so the four `vpdpbusd` add into one register whose qword q is
//! group G(q). The group nibbles (scale, delta sign) become the bsum coefficient
//! ls·(σ − 8) and the scale 8·ls through IQ1_S_X's table ([`IQ1X_LUT`], after one `vpermw`,
//! shift and `or` of the `qh` words), and one `vpmaddwd` of the prepared bsums plus one
//! `vpdpwssd` give T = 8·sumi + sumi1, the IQ1_S_X kernels' exact integer.
//!
//! IQ1_M ([`dot_iq1_m_avx512_prepared`]): each element's weight is formed whole, W = 8·v +
//! σ (v the grid value, σ = ±1 its sub-group's delta sign), so T = Σ_h s'_h·Σ_{e∈h} W_e·y_e
//! (h the sixteen 16-element halves, s' = 2s + 1), as in the other IQ1_M kernels. The sign
//! joins the index: the whole `qh` nibble is bits 8–11 of a 12-bit index into
//! [`IQ1M_LEVELS`], 4096 grid rows of W + 9 bytes (32 KiB), so the gathers give the
//! unsigned weights with no sign step. Gathers 0/1 and 2/3 fetch the two sub-groups of one
//! half per qword ([`M_HALVES`]), so two `vpdpbusd` per register give dwords of eight
//! elements of one half; they start from −9·Σy of those elements (prepared), so each
//! dword is Σ W·y, |·| ≤ 8·9·128 < 2¹⁵. One `vpackssdw` and one `vpdpwssd` against the
//! halves' scales (one `vpmultishiftqb` of the broadcast scale qword, one `vpternlogd`)
//! finish T.
//!
//! In both, |T| < 2²⁴, so f32(T)·0.125 is exactly sumi + sumi1/8; with the reference's float
//! combine ([`products4x4`]) every row gets the reference's bits.

use super::*;
use crate::blocks::{BlockIQ1M, BlockIQ1S, BlockQ8K};
use crate::codec::iquants::iq1m_d_bits;
use crate::grids::IQ1M_LEVELS;

entry!(rows
    dot_iq1_s_avx512_prepared_entry => dot_iq1_s_avx512_prepared,
    dot_iq1_m_avx512_prepared_entry => dot_iq1_m_avx512_prepared,
);

/// Super-blocks whose activation side the kernels prepare at once (10 or 12 KiB on the
/// stack: 8192 elements, a whole row of most matrices).
const SEG: usize = 32;

/// A gather order: `[j][q]` is the sub-group (eight elements, 0..32) gather j fetches in
/// qword q.
type Order = [[usize; 8]; 4];

/// The order's sub-group for index lane t of index register r (gather 2r + t/8, qword t
/// mod 8), checked against the broadcast of `qh` (see the module doc).
const fn lane_sub_group(order: &Order, r: usize, t: usize) -> usize {
    let (j, q) = (2 * r + t / 8, t % 8);
    let s = order[j][q];
    assert!(
        s / 16 == (q / 2) % 2,
        "a sub-group outside its qword of the qh broadcast"
    );
    s
}

/// `vpermb` controls on the `qs` bytes (zero-extended to 64) for index register r: byte 0
/// of index lane t takes its sub-group's `qs` byte, bytes 1–3 a zero byte (32).
const fn qs_pick(order: &Order, r: usize) -> [u8; 64] {
    bytes64!(|b| if b % 4 == 0 {
        lane_sub_group(order, r, b / 4) as u8
    } else {
        32
    })
}

/// `vpmultishiftqb` controls on the broadcast `qh` for index register r: byte 1 of index
/// lane t takes the bits from `hi_bit[S]` of its qword, where sub-group S's high index bits
/// start; the index keeps the ones it needs.
const fn hi_pick(order: &Order, hi_bit: &[u8; 32], r: usize) -> [u8; 64] {
    bytes64!(|b| if b % 4 == 1 {
        hi_bit[lane_sub_group(order, r, b / 4)]
    } else {
        0
    })
}

/// `vpermt2q` controls for [`ordered_act`]: register j's qword q takes activation qword
/// `order[j][q]` from the pair of quarters (0, 1) or (2, 3) it lies in.
const fn act_pick(order: &Order) -> [[u64; 8]; 4] {
    let mut t = [[0u64; 8]; 4];
    let mut j = 0;
    while j < 4 {
        let mut q = 0;
        while q < 8 {
            t[j][q] = (order[j][q] % 16) as u64;
            q += 1;
        }
        j += 1;
    }
    t
}

/// The blend mask of [`ordered_act`]: the qwords whose sub-groups are 16..32 (quarters 2,
/// 3; the same for every gather, see [`lane_sub_group`]).
const fn act_high(order: &Order) -> u8 {
    let mut m = 0u8;
    let mut q = 0;
    while q < 8 {
        if order[0][q] >= 16 {
            m |= 1 << q;
        }
        q += 1;
    }
    m
}

/// The activations of block `y` in a gather order: register j's qword q holds sub-group
/// `order[j][q]`'s eight activations, the elements gather j's qword q holds. Two `vpermt2q`
/// and a blend per register ([`act_pick`], [`act_high`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
fn ordered_act(y: &BlockQ8K, picks: &[[u64; 8]; 4], high: u8) -> [__m512i; 4] {
    let mut qv = [_mm512_setzero_si512(); 4];
    for (p, qv) in qv.iter_mut().enumerate() {
        // SAFETY: quarter p is activation bytes 64p..64p+64 (unaligned load).
        *qv = unsafe { _mm512_loadu_si512(y.qs[64 * p..].as_ptr().cast()) };
    }
    let mut out = [_mm512_setzero_si512(); 4];
    for (o, pick) in out.iter_mut().zip(picks) {
        // SAFETY: each control is 64 bytes (unaligned load).
        let idx = unsafe { _mm512_loadu_si512(pick.as_ptr().cast()) };
        *o = _mm512_mask_blend_epi64(
            high,
            _mm512_permutex2var_epi64(qv[0], idx, qv[1]),
            _mm512_permutex2var_epi64(qv[2], idx, qv[3]),
        );
    }
    out
}

/// The index step of a gather order, in registers: [`qs_pick`], [`hi_pick`], the mask of
/// the index bits above the `qs` byte, and the table the indices read.
struct GatherIndex {
    qs_pick: [__m512i; 2],
    hi_pick: [__m512i; 2],
    high_bits: __m512i,
    table: &'static [u64],
}

impl GatherIndex {
    /// Loads the controls; `high_bits` is 0x700 (three index bits) or 0xF00 (IQ1_M's three
    /// and the delta sign). Panics unless every index that mask allows is inside `table`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn new(
        qs_pick: &[[u8; 64]; 2],
        hi_pick: &[[u8; 64]; 2],
        high_bits: u32,
        table: &'static [u64],
    ) -> Self {
        assert!(
            ((high_bits | 0xFF) as usize) < table.len(),
            "gather table too short"
        );
        GatherIndex {
            qs_pick: tables64(qs_pick),
            hi_pick: tables64(hi_pick),
            high_bits: _mm512_set1_epi32(high_bits as i32),
            table,
        }
    }

    /// The four gathers of one super-block (`qs`, the 128-bit broadcast `qh`), in the
    /// order's sequence.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi")]
    #[inline]
    fn gather(&self, qs: &[u8; 32], qh: __m512i) -> [__m512i; 4] {
        // SAFETY: 32 `qs` bytes (unaligned load).
        let qs = unsafe { _mm512_zextsi256_si512(_mm256_loadu_si256(qs.as_ptr().cast())) };
        let idx: [__m512i; 2] = std::array::from_fn(|r| {
            _mm512_ternarylogic_epi32::<0xF8>(
                _mm512_permutexvar_epi8(self.qs_pick[r], qs),
                _mm512_multishift_epi64_epi8(self.hi_pick[r], qh),
                self.high_bits,
            )
        });
        let base = self.table.as_ptr().cast::<i64>();
        // SAFETY: every index is a `qs` byte or'd with bits of `high_bits`, so at most
        // `high_bits | 0xFF`, inside the table (checked in `new`); each read is 8 bytes at
        // 8·index.
        unsafe {
            [
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(idx[0]), base),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(idx[0]), base),
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(idx[1]), base),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(idx[1]), base),
            ]
        }
    }
}

/// The 128-bit broadcast of a block's 16 `qh` bytes.
#[target_feature(enable = "avx512f")]
#[inline]
fn qh_broadcast(qh: &[u8; 16]) -> __m512i {
    // SAFETY: 16 bytes (unaligned load).
    _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(qh.as_ptr().cast()) })
}

// ---- IQ1_S --------------------------------------------------------------------------------

/// IQ1_S: the group whose sub-groups land in qword q of every gather (and whose sums and
/// bsum terms sit in dwords 2q, 2q + 1): G(q)/4 = (q/2) mod 2, as the `qh` broadcast needs.
const S_GROUPS: [usize; 8] = [0, 1, 4, 5, 2, 3, 6, 7];

/// IQ1_S's gather order: gather j fetches sub-group j of group G(q) in qword q.
const S_ORDER: Order = {
    let mut t = [[0usize; 8]; 4];
    let mut j = 0;
    while j < 4 {
        let mut q = 0;
        while q < 8 {
            t[j][q] = 4 * S_GROUPS[q] + j;
            q += 1;
        }
        j += 1;
    }
    t
};

/// Where IQ1_S sub-group S = 4g + j's three high index bits start in its `qh` qword: bit
/// 3j of group g's word, word g mod 4.
const S_HI_BIT: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut s = 0;
    while s < 32 {
        t[s] = (16 * ((s / 4) % 4) + 3 * (s % 4)) as u8;
        s += 1;
    }
    t
};

static S_QS_PICK: [[u8; 64]; 2] = [qs_pick(&S_ORDER, 0), qs_pick(&S_ORDER, 1)];
static S_HI_PICK: [[u8; 64]; 2] = [
    hi_pick(&S_ORDER, &S_HI_BIT, 0),
    hi_pick(&S_ORDER, &S_HI_BIT, 1),
];
static S_ACT_PICK: [[u64; 8]; 4] = act_pick(&S_ORDER);

/// `vpermw` control for IQ1_S's prepared bsums: word 2q + i takes `bsums[2·G(q) + i]`.
static S_BSUM_PICK: [u16; 16] = {
    let mut t = [0u16; 16];
    let mut w = 0;
    while w < 16 {
        t[w] = (2 * S_GROUPS[w / 2] + w % 2) as u16;
        w += 1;
    }
    t
};

/// `vpermw` control on the `qh` words: word w (dword w/2 of the sums, qword w/4) takes the
/// word of group G(w/4).
static S_NIBBLE_PICK: [u16; 32] = {
    let mut t = [0u16; 32];
    let mut w = 0;
    while w < 32 {
        t[w] = S_GROUPS[w / 4] as u16;
        w += 1;
    }
    t
};

/// IQ1_S · Q8_K for several weight rows against one activation row (decode), four rows by
/// four super-blocks at a time (`prepared_rows!`): per super-block the steps of the module
/// doc, the exact T = 8·sumi + sumi1 of the IQ1_S_X kernels, then the reference's float
/// combine, so each row gets the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq1_s_avx512_prepared(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { Iq1sGather::new() };
    let zero = _mm512_setzero_si512();
    let none = S1gAct {
        y: [zero; 4],
        bs: zero,
    };
    prepared_rows!(
        k,
        BlockIQ1S,
        S1gAct,
        SEG,
        1,
        |y: &[BlockQ8K]| s1g_act(&y[0]),
        none,
        rows,
        a,
        out,
        1.0
    );
}

/// IQ1_S's activation side of one super-block, prepared once per call.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct S1gAct {
    /// [`S_ORDER`]'s activations ([`ordered_act`]).
    y: [__m512i; 4],
    /// Dword 2q + i: `bsums[2·G(q) + i]` in its low word, the high word 0.
    bs: __m512i,
}

/// The [`S1gAct`] of activation block `y`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
fn s1g_act(y: &BlockQ8K) -> S1gAct {
    // SAFETY: 32 `bsums` bytes and the 32-byte control (unaligned loads).
    let (bs, pick) = unsafe {
        (
            _mm256_loadu_si256(y.bsums.as_ptr().cast()),
            _mm256_loadu_si256(S_BSUM_PICK.as_ptr().cast()),
        )
    };
    S1gAct {
        y: ordered_act(y, &S_ACT_PICK, act_high(&S_ORDER)),
        bs: _mm512_cvtepu16_epi32(_mm256_permutexvar_epi16(pick, bs)),
    }
}

/// The IQ1_S kernel's constants, in registers.
struct Iq1sGather {
    index: GatherIndex,
    nibble_pick: __m512i,
    /// [`IQ1X_HALF_OFF`]: 16 in the odd words (the scale entries of the table).
    off: __m512i,
    /// [`IQ1X_LUT`]: the bsum coefficient ls·(σ − 8) and the scale 8·ls per nibble.
    lut: __m512i,
}

impl Iq1sGather {
    /// Loads the constants.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn new() -> Self {
        Iq1sGather {
            index: GatherIndex::new(&S_QS_PICK, &S_HI_PICK, 0x700, &IQ1S_LEVELS),
            nibble_pick: table64(&S_NIBBLE_PICK),
            off: table64(&IQ1X_HALF_OFF),
            lut: table64(&IQ1X_LUT),
        }
    }

    /// One IQ1_S super-block's T = 8·sumi + sumi1 against a prepared activation block,
    /// spread over the lanes (see the module doc). Dword 2q + i of the gathered sums is
    /// Σ l·y over sixteen elements of group G(q) (|·| ≤ 16·2·128 < 2¹⁵, so `vpdpwssd`'s
    /// low word is the whole sum).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums_prepared(&self, x: &BlockIQ1S, act: &S1gAct) -> __m512i {
        let qh = qh_broadcast(&x.qh);
        let lv = self.index.gather(&x.qs, qh);
        let mut d = _mm512_setzero_si512();
        for (l, y) in lv.iter().zip(&act.y) {
            d = _mm512_dpbusd_epi32(d, *l, *y);
        }
        // word 2h: the coefficient of bsum h, word 2h + 1: the scale of dword h
        let nib = _mm512_or_si512(
            _mm512_srli_epi16::<12>(_mm512_permutexvar_epi16(self.nibble_pick, qh)),
            self.off,
        );
        let wv = _mm512_permutexvar_epi16(nib, self.lut);
        // the bsums' high words are 0, so `vpmaddwd` reads only the coefficients
        let scale = _mm512_srli_epi32::<16>(wv);
        crate::simd::dpwssd(_mm512_madd_epi16(act.bs, wv), d, scale)
    }
}

rows4x4_impl!(prepared Iq1sGather, BlockIQ1S, S1gAct, 0.125, sums_prepared, |x| u16::from_le_bytes(x.d));

// ---- IQ1_M --------------------------------------------------------------------------------

/// IQ1_M: the halves whose sub-groups gathers (0, 1) and (2, 3) fetch in qword q,
/// `[H₀(q), H₁(q)]`: q ∈ {0, 1, 4, 5} takes halves 0..8, the rest 8..16, as the `qh`
/// broadcast needs.
const M_HALVES: [[usize; 2]; 8] = {
    let mut t = [[0usize; 2]; 8];
    let mut q = 0;
    while q < 8 {
        let base = 8 * ((q / 2) % 2);
        let slot = q % 2 + 2 * (q / 4);
        t[q] = [base + 2 * slot, base + 2 * slot + 1];
        q += 1;
    }
    t
};

/// IQ1_M's gather order: gather j fetches sub-group j mod 2 of half H_{j/2}(q) in qword q.
const M_ORDER: Order = {
    let mut t = [[0usize; 8]; 4];
    let mut j = 0;
    while j < 4 {
        let mut q = 0;
        while q < 8 {
            t[j][q] = 2 * M_HALVES[q][j / 2] + j % 2;
            q += 1;
        }
        j += 1;
    }
    t
};

/// Where IQ1_M sub-group S's nibble starts in its `qh` qword: bit 4·(S mod 16).
const M_HI_BIT: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut s = 0;
    while s < 32 {
        t[s] = (4 * (s % 16)) as u8;
        s += 1;
    }
    t
};

static M_QS_PICK: [[u8; 64]; 2] = [qs_pick(&M_ORDER, 0), qs_pick(&M_ORDER, 1)];
static M_HI_PICK: [[u8; 64]; 2] = [
    hi_pick(&M_ORDER, &M_HI_BIT, 0),
    hi_pick(&M_ORDER, &M_HI_BIT, 1),
];
static M_ACT_PICK: [[u64; 8]; 4] = act_pick(&M_ORDER);

/// `vpmultishiftqb` control on the broadcast scale qword, in the order `vpackssdw` leaves
/// the sums: word w of 128-bit lane L holds dword 4L + w mod 4 of the first register
/// (w < 4) or the second, so half H_{w/4}(2L + (w mod 4)/2). Its low byte takes the bits
/// from one below that half's 3-bit scale (bit 16·(h/4) + 3·(h mod 4)), putting the scale
/// at bits 1–3 (half 0's wraps to bit 63); high bytes unused.
static M_SCALE_PICK: [u8; 64] = bytes64!(|b| if b % 2 == 0 {
    let (lane, w) = (b / 16, (b % 16) / 2);
    let h = M_HALVES[2 * lane + (w % 4) / 2][w / 4];
    ((16 * (h / 4) + 3 * (h % 4) + 63) % 64) as u8
} else {
    0
});

/// IQ1_M · Q8_K for several weight rows against one activation row (decode), four rows by
/// four super-blocks at a time (`prepared_rows!`): per super-block the steps of the module
/// doc, then the reference's float combine, so each row gets the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq1_m_avx512_prepared(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { Iq1mGather::new() };
    let zero = _mm512_setzero_si512();
    let none = S1mAct {
        y: [zero; 4],
        init: [zero; 2],
    };
    prepared_rows!(
        k,
        BlockIQ1M,
        S1mAct,
        SEG,
        1,
        |y: &[BlockQ8K]| s1m_act(&y[0]),
        none,
        rows,
        a,
        out,
        1.0
    );
}

/// IQ1_M's activation side of one super-block, prepared once per call.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct S1mAct {
    /// [`M_ORDER`]'s activations ([`ordered_act`]).
    y: [__m512i; 4],
    /// The starting sums of gathers (0, 1) and (2, 3): per dword, −9·Σy over the eight
    /// elements the two gathers' dword holds.
    init: [__m512i; 2],
}

/// The [`S1mAct`] of activation block `y`: the ordered activations and the starting sums by
/// `vpdpbusd` against 9.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn s1m_act(y: &BlockQ8K) -> S1mAct {
    let yv = ordered_act(y, &M_ACT_PICK, act_high(&M_ORDER));
    let (zero, nine) = (_mm512_setzero_si512(), _mm512_set1_epi8(9));
    let init = [0, 1].map(|i| {
        let s = _mm512_dpbusd_epi32(zero, nine, yv[2 * i]);
        _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(s, nine, yv[2 * i + 1]))
    });
    S1mAct { y: yv, init }
}

/// The IQ1_M kernel's constants, in registers.
struct Iq1mGather {
    index: GatherIndex,
    scale_pick: __m512i,
}

impl Iq1mGather {
    /// Loads the constants.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn new() -> Self {
        Iq1mGather {
            index: GatherIndex::new(&M_QS_PICK, &M_HI_PICK, 0xF00, &IQ1M_LEVELS),
            scale_pick: table64(&M_SCALE_PICK),
        }
    }

    /// One IQ1_M super-block's T = 8·sumi + sumi1 against a prepared activation block,
    /// spread over the lanes (see the module doc).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums_prepared(&self, x: &BlockIQ1M, act: &S1mAct) -> __m512i {
        let w9 = self.index.gather(&x.qs, qh_broadcast(&x.qh));
        let d: [__m512i; 2] = std::array::from_fn(|i| {
            let s = _mm512_dpbusd_epi32(act.init[i], w9[2 * i], act.y[2 * i]);
            _mm512_dpbusd_epi32(s, w9[2 * i + 1], act.y[2 * i + 1])
        });
        // SAFETY: the eight scale bytes (unaligned load).
        let sc = unsafe { _mm512_set1_epi64(std::ptr::read_unaligned(x.scales.as_ptr().cast())) };
        // word w: s' = 2·s + 1 of the half its packed sum belongs to
        let sw = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_multishift_epi64_epi8(self.scale_pick, sc),
            _mm512_set1_epi16(0xE),
            _mm512_set1_epi16(1),
        );
        crate::simd::dpwssd(_mm512_setzero_si512(), _mm512_packs_epi32(d[0], d[1]), sw)
    }
}

rows4x4_impl!(prepared Iq1mGather, BlockIQ1M, S1mAct, 0.125, sums_prepared, |x| iq1m_d_bits(&x.scales));
