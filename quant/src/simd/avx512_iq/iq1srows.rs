//! The IQ1_S decode (multi-row) kernel against activations prepared once per call, with no
//! repack: a child of `avx512_iq`.
//!
//! IQ1_S's 2048-row grid does not fit in registers, so its 32 grid rows per super-block
//! are still gathered (`vpgatherdq`, eight 8-byte rows of level codes from
//! [`IQ1S_LEVELS`] per instruction). On the Intel hosts measured here the gathers cost
//! about what the load ports allow (eight loads in ~4 cycles); the older one-row-at-a-time
//! kernel spent as much again on forming the indices, the scales and the bsum terms of
//! every super-block against the raw activation block. This kernel cuts that work down to
//! what the repacked IQ1_S_X kernel does, by choosing the order the gathers fill:
//!
//! - gather j (0..4) fetches sub-group j of every group: qword q holds grid row
//!   4·G(q) + j, with the group order G = [`GROUP_ORDER`]. So the four gathers' four-element
//!   sums (`vpdpbusd`, against activations prepared in the same order, [`S1gAct`]) add into
//!   one register whose qword q is group G(q) only, and one `vpdpwssd` scales them all;
//! - the 32 11-bit indices are two registers, each one zero-masked `vpermb` of the `qs`
//!   bytes (bits 0–7), one `vpmultishiftqb` of the 128-bit broadcast `qh` words (bits 8–10)
//!   and one `vpternlogd`. G is the order in which the broadcast already holds each
//!   index's `qh` word in the index's own qword, so no permute is needed;
//! - the group nibbles (scale, delta sign) become the bsum coefficient ls·(σ − 8) and the
//!   scale 8·ls in one `vpermw` from IQ1_S_X's table ([`IQ1X_LUT`]) after one `vpermw`,
//!   shift and `or` of the `qh` words, and one `vpmaddwd` of the prepared bsums plus one
//!   `vpdpwssd` give T = 8·sumi + sumi1, the IQ1_S_X kernel's exact integer.
//!
//! The float combine is the reference's ([`products4x4`]), so every row gets the
//! reference's bits.

use super::*;
use crate::blocks::{BlockIQ1S, BlockQ8K};

entry!(rows dot_iq1_s_avx512_prepared_entry => dot_iq1_s_avx512_prepared);

/// The group whose sub-groups land in qword q of every gather register (and whose sums
/// and bsum terms sit in dwords 2q, 2q + 1 of the sums). The 128-bit broadcast of the
/// `qh` words holds words 4·(k mod 2).. in qword k; index lane t (qword t/2, gather lane
/// q = t mod 8) needs word G(q), so G(q)/4 = (q/2) mod 2.
const GROUP_ORDER: [usize; 8] = [0, 1, 4, 5, 2, 3, 6, 7];

/// Super-blocks whose activation side the kernel prepares at once ([`S1gAct`], 10 KiB on
/// the stack: 8192 elements, a whole row of most matrices).
const SEG: usize = 32;

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

/// The activation side of one super-block, prepared once per call and used by every row.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct S1gAct {
    /// Register j, qword q: activation qword 4·G(q) + j (sub-group j of group G(q)), the
    /// elements gather j's qword q holds.
    y: [__m512i; 4],
    /// Dword 2q + i: `bsums[2·G(q) + i]` in its low word, the high word 0.
    bs: __m512i,
}

/// `vpermt2q` controls for [`s1g_act`]: register j's qword q takes activation qword
/// 4·G(q) + j from the pair of quarters (0, 1) for G(q) < 4, (2, 3) otherwise (qword
/// 4·G(q) + j mod 16 of the pair).
static ACT_PICK: [[u64; 8]; 4] = {
    let mut t = [[0u64; 8]; 4];
    let mut j = 0;
    while j < 4 {
        let mut q = 0;
        while q < 8 {
            t[j][q] = ((4 * GROUP_ORDER[q] + j) % 16) as u64;
            q += 1;
        }
        j += 1;
    }
    t
};

/// The blend mask of [`s1g_act`]: the qwords whose group is 4..8 (from quarters 2, 3).
const ACT_HIGH: u8 = {
    let mut m = 0u8;
    let mut q = 0;
    while q < 8 {
        if GROUP_ORDER[q] >= 4 {
            m |= 1 << q;
        }
        q += 1;
    }
    m
};

/// `vpermw` control for [`s1g_act`]'s bsums: word 2q + i takes `bsums[2·G(q) + i]`.
static BSUM_PICK: [u16; 16] = {
    let mut t = [0u16; 16];
    let mut w = 0;
    while w < 16 {
        t[w] = (2 * GROUP_ORDER[w / 2] + w % 2) as u16;
        w += 1;
    }
    t
};

/// The [`S1gAct`] of activation block `y`: two `vpermt2q` and a blend per register, and
/// the bsums permuted and sign-extended.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
fn s1g_act(y: &BlockQ8K) -> S1gAct {
    let mut qv = [_mm512_setzero_si512(); 4];
    for (p, qv) in qv.iter_mut().enumerate() {
        // SAFETY: quarter p is activation bytes 64p..64p+64 (unaligned load).
        *qv = unsafe { _mm512_loadu_si512(y.qs[64 * p..].as_ptr().cast()) };
    }
    let mut out = [_mm512_setzero_si512(); 4];
    for (o, pick) in out.iter_mut().zip(&ACT_PICK) {
        // SAFETY: each control is 64 bytes (unaligned load).
        let idx = unsafe { _mm512_loadu_si512(pick.as_ptr().cast()) };
        *o = _mm512_mask_blend_epi64(
            ACT_HIGH,
            _mm512_permutex2var_epi64(qv[0], idx, qv[1]),
            _mm512_permutex2var_epi64(qv[2], idx, qv[3]),
        );
    }
    // SAFETY: 32 `bsums` bytes and the 32-byte control (unaligned loads).
    let (bs, pick) = unsafe {
        (
            _mm256_loadu_si256(y.bsums.as_ptr().cast()),
            _mm256_loadu_si256(BSUM_PICK.as_ptr().cast()),
        )
    };
    S1gAct {
        y: out,
        bs: _mm512_cvtepu16_epi32(_mm256_permutexvar_epi16(pick, bs)),
    }
}

/// Index lane t of index register r (gather 2r + t/8, qword q = t mod 8): the grid index
/// number 4·G(q) + j, j = 2r + t/8.
const fn index_number(r: usize, t: usize) -> usize {
    4 * GROUP_ORDER[t % 8] + 2 * r + t / 8
}

/// `vpermb` controls on the `qs` bytes (zero-extended to 64): byte 0 of index lane t takes
/// its `qs` byte, bytes 1–3 a zero byte (32).
static QS_PICK: [[u8; 64]; 2] = [
    bytes64!(|b| if b % 4 == 0 {
        index_number(0, b / 4) as u8
    } else {
        32
    }),
    bytes64!(|b| if b % 4 == 0 {
        index_number(1, b / 4) as u8
    } else {
        32
    }),
];

/// `vpmultishiftqb` controls on the broadcast `qh` words: byte 1 of index lane t takes
/// the bits from 16·(G mod 4) + 3·(j) of its qword (word G mod 4 of qword G/4, the three
/// high index bits of sub-group j), which the index masks to bits 8–10.
static HI_PICK: [[u8; 64]; 2] = [bytes64!(|b| hi_shift(0, b)), bytes64!(|b| hi_shift(1, b))];

/// [`HI_PICK`]'s byte b of register r.
const fn hi_shift(r: usize, b: usize) -> u8 {
    let t = b / 4;
    let (g, j) = (GROUP_ORDER[t % 8], 2 * r + t / 8);
    if b % 4 == 1 {
        (16 * (g % 4) + 3 * j) as u8
    } else {
        0
    }
}

/// `vpermw` control on the `qh` words: word w (dword w/2 of the sums, qword w/4) takes the
/// word of group G(w/4).
static NIBBLE_PICK: [u16; 32] = {
    let mut t = [0u16; 32];
    let mut w = 0;
    while w < 32 {
        t[w] = GROUP_ORDER[w / 4] as u16;
        w += 1;
    }
    t
};

/// The kernel's constants, in registers.
struct Iq1sGather {
    qs_pick: [__m512i; 2],
    hi_pick: [__m512i; 2],
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
        let ld = |p: *const u8| {
            // SAFETY: every pointer passed is into a table of 64 bytes (unaligned load).
            unsafe { _mm512_loadu_si512(p.cast()) }
        };
        Iq1sGather {
            qs_pick: QS_PICK.each_ref().map(|t| ld(t.as_ptr())),
            hi_pick: HI_PICK.each_ref().map(|t| ld(t.as_ptr())),
            nibble_pick: ld(NIBBLE_PICK.as_ptr().cast()),
            off: ld(IQ1X_HALF_OFF.as_ptr().cast()),
            lut: ld(IQ1X_LUT.as_ptr().cast()),
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
        // SAFETY: 32 `qs` bytes and 16 `qh` bytes (unaligned loads).
        let (qs, qh) = unsafe {
            (
                _mm512_zextsi256_si512(_mm256_loadu_si256(x.qs.as_ptr().cast())),
                _mm512_broadcast_i32x4(_mm_loadu_si128(x.qh.as_ptr().cast())),
            )
        };
        let c700 = _mm512_set1_epi32(0x700);
        let idx: [__m512i; 2] = std::array::from_fn(|r| {
            _mm512_ternarylogic_epi32::<0xF8>(
                _mm512_permutexvar_epi8(self.qs_pick[r], qs),
                _mm512_multishift_epi64_epi8(self.hi_pick[r], qh),
                c700,
            )
        });
        let base = IQ1S_LEVELS.as_ptr().cast::<i64>();
        // SAFETY: every index is < 2048, the table's length, and each read is 8 bytes at
        // 8·index.
        let lv = unsafe {
            [
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(idx[0]), base),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(idx[0]), base),
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(idx[1]), base),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(idx[1]), base),
            ]
        };
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
        super::super::dpwssd(_mm512_madd_epi16(act.bs, wv), d, scale)
    }
}

rows4x4_impl!(prepared Iq1sGather, BlockIQ1S, S1gAct, 0.125, sums_prepared, |x| u16::from_le_bytes(x.d));
