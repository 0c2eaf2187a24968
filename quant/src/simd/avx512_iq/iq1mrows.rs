//! The IQ1_M decode (multi-row) kernel against activations prepared once per call, with no
//! repack: a child of `avx512_iq`, built as the IQ1_S one (`iq1srows`) is.
//!
//! Each element's weight is formed whole, W = 8·v + σ (v the grid value, σ = ±1 its
//! sub-group's delta sign), so that T = 8·sumi + sumi1 = Σ_h s'_h·Σ_{e∈h} W_e·y_e (h the
//! sixteen 16-element halves, s' = 2s + 1 their scales), as in the other IQ1_M kernels.
//! Per super-block and row:
//!
//! - the sign joins the grid index: a sub-group's whole `qh` nibble (three index bits and
//!   the sign) is bits 8–11 of a 12-bit index into [`M_SIGNED_LEVELS`], 4096 grid rows of
//!   W + 9 bytes (32 KiB), so the gathers (`vpgatherdq`, eight rows each) give the unsigned
//!   weights with no sign step. The indices are two registers, each one `vpermb` of the
//!   zero-extended `qs` bytes, one `vpmultishiftqb` of the 128-bit broadcast `qh` and one
//!   `vpternlogd`;
//! - gathers 0 and 1 fetch the two sub-groups of half H₀(q) in qword q, gathers 2 and 3
//!   those of half H₁(q) ([`HALF_ORDER`]), so two `vpdpbusd` each add into a register whose
//!   dwords 2q, 2q + 1 each hold eight elements of one half. They start from −9·Σy of
//!   those elements (prepared, [`S1mAct`]), which removes the offset 9: each dword is then
//!   Σ W·y, |·| ≤ 8·9·128 < 2¹⁵;
//! - one `vpackssdw` puts both registers in words and one `vpdpwssd` multiplies them by
//!   the halves' scales, which one `vpmultishiftqb` of the broadcast scale qword and one
//!   `vpternlogd` form in the packed order.
//!
//! |T| < 2²⁴, so f32(T)·0.125 is exactly sumi + sumi1/8; with the reference's float combine
//! ([`products4x4`]) every row gets the reference's bits.

use super::*;
use crate::blocks::{BlockIQ1M, BlockQ8K};
use crate::codec::iquants::iq1m_d_bits;

entry!(rows dot_iq1_m_avx512_prepared_entry => dot_iq1_m_avx512_prepared);

/// `IQ1S_GRID[i & 0x7FF]` as eight bytes W + 9 = 8·v + 9 + σ, σ = −1 where bit 11 of `i`
/// (the sub-group's delta sign, bit 3 of its `qh` nibble) is set: element j in byte j.
static M_SIGNED_LEVELS: [u64; 4096] = {
    let mut t = [0u64; 4096];
    let mut i = 0;
    while i < 4096 {
        let g = IQ1S_GRID[i & 0x7FF];
        let neg = i & 0x800 != 0;
        let mut c = 0u64;
        let mut j = 0;
        while j < 8 {
            let w9: u64 = match (g >> (8 * j)) as u8 {
                0xFF => 1,
                0 => 9,
                1 => 17,
                _ => panic!("IQ1S_GRID value outside -1, 0, 1"),
            };
            c |= (if neg { w9 - 1 } else { w9 + 1 }) << (8 * j);
            j += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// The halves whose sub-groups gathers (0, 1) and (2, 3) fetch in qword q: `[H₀(q), H₁(q)]`.
/// The 128-bit broadcast of `qh` holds sub-groups 16·(k mod 2).. in qword k; index lane t
/// (qword t/2, gather lane q = t mod 8) needs its sub-group's nibble there, so every half of
/// qword q lies in 8·((q/2) mod 2)..: q ∈ {0, 1, 4, 5} takes halves 0..8, the rest 8..16.
const HALF_ORDER: [[usize; 2]; 8] = {
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

/// The sub-group gather j fetches in qword q: sub-group j mod 2 of half H_{j/2}(q).
const fn sub_group(j: usize, q: usize) -> usize {
    2 * HALF_ORDER[q][j / 2] + j % 2
}

/// Super-blocks whose activation side the kernel prepares at once ([`S1mAct`], 12 KiB on
/// the stack: 8192 elements, a whole row of most matrices).
const SEG: usize = 32;

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

/// The activation side of one super-block, prepared once per call and used by every row.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct S1mAct {
    /// Register j, qword q: the activations of sub-group `sub_group(j, q)` (its qword of
    /// the block), the elements gather j's qword q holds.
    y: [__m512i; 4],
    /// The starting sums of gathers (0, 1) and (2, 3): per dword, −9·Σy over the eight
    /// elements the two gathers' dword holds.
    init: [__m512i; 2],
}

/// `vpermt2q` controls for [`s1m_act`]: register j's qword q takes activation qword
/// `sub_group(j, q)` from the pair of quarters (0, 1) or (2, 3) it lies in.
static ACT_PICK: [[u64; 8]; 4] = {
    let mut t = [[0u64; 8]; 4];
    let mut j = 0;
    while j < 4 {
        let mut q = 0;
        while q < 8 {
            t[j][q] = (sub_group(j, q) % 16) as u64;
            q += 1;
        }
        j += 1;
    }
    t
};

/// The blend mask of [`s1m_act`]: the qwords whose halves are 8..16 (quarters 2, 3).
const ACT_HIGH: u8 = {
    let mut m = 0u8;
    let mut q = 0;
    while q < 8 {
        if HALF_ORDER[q][0] >= 8 {
            m |= 1 << q;
        }
        q += 1;
    }
    m
};

/// The [`S1mAct`] of activation block `y`: two `vpermt2q` and a blend per register, and the
/// starting sums by `vpdpbusd` against 9.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn s1m_act(y: &BlockQ8K) -> S1mAct {
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
    let (zero, nine) = (_mm512_setzero_si512(), _mm512_set1_epi8(9));
    let init = [0, 1].map(|i| {
        let s = _mm512_dpbusd_epi32(zero, nine, out[2 * i]);
        _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(s, nine, out[2 * i + 1]))
    });
    S1mAct { y: out, init }
}

/// Index lane t of index register r: gather 2r + t/8, qword t mod 8.
const fn lane_sub_group(r: usize, t: usize) -> usize {
    sub_group(2 * r + t / 8, t % 8)
}

/// `vpermb` controls on the `qs` bytes (zero-extended to 64): byte 0 of index lane t takes
/// its sub-group's `qs` byte, bytes 1–3 a zero byte (32).
static QS_PICK: [[u8; 64]; 2] = [
    bytes64!(|b| if b % 4 == 0 {
        lane_sub_group(0, b / 4) as u8
    } else {
        32
    }),
    bytes64!(|b| if b % 4 == 0 {
        lane_sub_group(1, b / 4) as u8
    } else {
        32
    }),
];

/// `vpmultishiftqb` controls on the broadcast `qh`: byte 1 of index lane t takes the bits
/// from its sub-group's nibble (bit 4·(S mod 16) of the qword), which the index masks to
/// bits 8–11.
static NIBBLE_PICK: [[u8; 64]; 2] = [
    bytes64!(|b| if b % 4 == 1 {
        (4 * (lane_sub_group(0, b / 4) % 16)) as u8
    } else {
        0
    }),
    bytes64!(|b| if b % 4 == 1 {
        (4 * (lane_sub_group(1, b / 4) % 16)) as u8
    } else {
        0
    }),
];

/// `vpmultishiftqb` control on the broadcast scale qword, in the order `vpackssdw` leaves
/// the sums: word w of 128-bit lane L holds dword 4L + w mod 4 of the first register
/// (w < 4) or the second, so half H_{w/4}(2L + (w mod 4)/2). Its low byte takes the bits from
/// one below that half's 3-bit scale (bit 16·(h/4) + 3·(h mod 4)), putting the scale at
/// bits 1–3 (half 0's wraps to bit 63); high bytes unused.
static SCALE_PICK: [u8; 64] = bytes64!(|b| if b % 2 == 0 {
    let (lane, w) = (b / 16, (b % 16) / 2);
    let h = HALF_ORDER[2 * lane + (w % 4) / 2][w / 4];
    ((16 * (h / 4) + 3 * (h % 4) + 63) % 64) as u8
} else {
    0
});

/// The kernel's constants, in registers.
struct Iq1mGather {
    qs_pick: [__m512i; 2],
    nibble_pick: [__m512i; 2],
    scale_pick: __m512i,
}

impl Iq1mGather {
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
        Iq1mGather {
            qs_pick: QS_PICK.each_ref().map(|t| ld(t.as_ptr())),
            nibble_pick: NIBBLE_PICK.each_ref().map(|t| ld(t.as_ptr())),
            scale_pick: ld(SCALE_PICK.as_ptr()),
        }
    }

    /// One IQ1_M super-block's T = 8·sumi + sumi1 against a prepared activation block,
    /// spread over the lanes (see the module doc).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums_prepared(&self, x: &BlockIQ1M, act: &S1mAct) -> __m512i {
        // SAFETY: 32 `qs` bytes and 16 `qh` bytes (unaligned loads).
        let (qs, qh) = unsafe {
            (
                _mm512_zextsi256_si512(_mm256_loadu_si256(x.qs.as_ptr().cast())),
                _mm512_broadcast_i32x4(_mm_loadu_si128(x.qh.as_ptr().cast())),
            )
        };
        let cf00 = _mm512_set1_epi32(0xF00);
        let idx: [__m512i; 2] = std::array::from_fn(|r| {
            _mm512_ternarylogic_epi32::<0xF8>(
                _mm512_permutexvar_epi8(self.qs_pick[r], qs),
                _mm512_multishift_epi64_epi8(self.nibble_pick[r], qh),
                cf00,
            )
        });
        let base = M_SIGNED_LEVELS.as_ptr().cast::<i64>();
        // SAFETY: every index is < 4096, the table's length, and each read is 8 bytes at
        // 8·index.
        let w9 = unsafe {
            [
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(idx[0]), base),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(idx[0]), base),
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(idx[1]), base),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(idx[1]), base),
            ]
        };
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
        super::super::dpwssd(_mm512_setzero_si512(), _mm512_packs_epi32(d[0], d[1]), sw)
    }
}

rows4x4_impl!(prepared Iq1mGather, BlockIQ1M, S1mAct, 0.125, sums_prepared, |x| iq1m_d_bits(&x.scales));
