//! The IQ2_XXS decode (multi-row) kernel that works on pairs of super-blocks, with no
//! gathers and no repack: a child of `iq::avx512`.
//!
//! On the Intel hosts measured here a `vpermi2b` costs two shuffle-port cycles and a
//! `vpgatherdq` about fifteen, while `vgf2p8affineqb` runs on the other vector port. So
//! this kernel spends the shuffle port only where a table lookup cannot be avoided and
//! does the rest with affine maps over GF(2). Per pair of super-blocks A, B of one row:
//!
//! - one shift and one blend put the pair's 64 grid indices in one register (qword g: A's
//!   grid indices 4g..4g + 4, then B's), and four `vpermi2b` and two blends look up every
//!   index's 16-bit level code ([`LevelTables`]: 2 bits per element). A pair
//!   fills all 64 lanes; one super-block would fill half of them for the same four lookups;
//! - element P's magnitudes (P < 4 from the low code bytes, P ≥ 4 from the high) are one
//!   `vgf2p8affineqb` each: the level l ∈ {0, 1, 2} maps to 8 ⊕ 17·l₀ ⊕ 35·l₁ = 8, 25, 43,
//!   which is affine in l's bits;
//! - the sign fields: a shift and a blend put group g's `a1` words of A and B in qword g
//!   and one `vpmultishiftqb` cuts the fields into bytes, so byte L holds the field of lane
//!   L's grid. One `vgf2p8affineqb` appends the parity bit (`KSIGNS_IQ2XS[i] = i |
//!   parity(i) << 7` is linear over GF(2)), and one `vptestmb` per element P cuts its 64
//!   sign bits into mask P. (Transposing the bits with a second `vgf2p8affineqb` and
//!   reading the masks back from memory was 1.4× slower: the 8-byte loads of a 64-byte
//!   store do not forward; left to itself, LLVM cut the masks out with shuffle-port
//!   extracts, 1.1× slower.)
//! - per element P, the activations or their negations picked by mask P (one blend; both
//!   are prepared) and one `vpdpbusd`: dword 2g sums group g of A, dword 2g + 1 group g of
//!   B, |Σ| ≤ 32·43·127; one `vpmulld` by the group scales 2·(a1 >> 28) + 1 (the `a1`
//!   words shifted, in place). The sixteen sums of four rows reduce with two unpacks and
//!   adds per pair of rows, even dwords apart from odd ones.
//!
//! The activations are prepared once per call and pair ([`PairAct`]: element P of the pair's
//! 64 grids in register P). Every sum is the reference's exact integer, and the float
//! combine is the reference's ([`products4x4`]), so the results are the reference's bits.

use super::*;
use crate::blocks::BlockQ8K;

entry!(rows dot_iq2_xxs_avx512_pairs_entry => dot_iq2_xxs_avx512_pairs);

/// Super-blocks whose activation side [`dot_iq2_xxs_avx512_pairs`] prepares at once (16
/// [`PairAct`]s, 16 KiB on the stack: 8192 elements, a whole row of most matrices).
const PAIR_SEG: usize = 32;

/// `vpmultishiftqb` control on the `a1` words (qword g: group g's of A, then of B): byte b
/// takes the 7-bit sign field of A's grid 4g + b (b < 4, bits 7b of the low dword) or B's
/// grid 4g + b − 4 (the high dword); the eighth bit, the next field's, is ignored downstream.
static SIGN_FIELDS: [u8; 64] = bytes64!(|i| {
    let b = i % 8;
    (32 * (b / 4) + 7 * (b % 4)) as u8
});

/// `vgf2p8affineqb` matrix appending the parity bit: output bit k < 7 is input bit k, bit 7
/// the XOR of input bits 0..7 (input bit 7, the next field's first bit, is ignored). Row k
/// of the matrix is byte 7 − k.
const KSIGNS_AFFINE: i64 = 0x0102_0408_1020_407F;

/// `vgf2p8affineqb` matrix mapping the level code at bits 2p, 2p + 1 of each byte to its
/// magnitude minus 8: 17·l₀ ⊕ 35·l₁ (output bits 0 and 4 take bit 2p, bits 0, 1 and 5 take
/// bit 2p + 1); the constant 8 is the instruction's immediate. Row k is byte 7 − k.
const fn level_affine(p: usize) -> i64 {
    let (l0, l1) = (1u64 << (2 * p), 1u64 << (2 * p + 1));
    let mut m = 0u64;
    let mut k = 0;
    while k < 8 {
        let mut row = 0;
        if k == 0 || k == 4 {
            row |= l0;
        }
        if k == 0 || k == 1 || k == 5 {
            row |= l1;
        }
        m |= row << (8 * (7 - k));
        k += 1;
    }
    m as i64
}

/// The four level maps, for code bits 0..2, 2..4, 4..6 and 6..8.
const LEVEL_AFFINE: [i64; 4] = [
    level_affine(0),
    level_affine(1),
    level_affine(2),
    level_affine(3),
];

/// The activation side of a pair of super-blocks for [`dot_iq2_xxs_avx512_pairs`]: register
/// P holds element P of each of the pair's 64 grid rows in the weights' lane order (lane L:
/// grid 4·(L/8) + L%4 of the first block for L%8 < 4, of the second above; zeros where the
/// pair has one block).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct PairAct {
    y: [__m512i; 8],
    /// `−y` (Q8_K codes are in −127..=127, so no negation wraps): the negated activations
    /// are then one blend per register.
    neg_y: [__m512i; 8],
}

/// The [`PairAct`] of one or two activation blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn pair_act(ys: &[BlockQ8K]) -> PairAct {
    let load = |y: Option<&BlockQ8K>| -> [__m512i; 4] {
        std::array::from_fn(|i| match y {
            // SAFETY: quarter i is bytes 64i..64i + 64 of the block's codes (unaligned).
            Some(y) => unsafe { _mm512_loadu_si512(y.qs[64 * i..].as_ptr().cast()) },
            None => _mm512_setzero_si512(),
        })
    };
    let (a, b) = (load(ys.first()), load(ys.get(1)));
    // SAFETY: the table is 64 bytes (unaligned load).
    let stride = unsafe { _mm512_loadu_si512(ACT_STRIDE.as_ptr().cast()) };
    let y: [__m512i; 8] = std::array::from_fn(|p| {
        // lane L reads byte 32·(L/8 % 4) + 8·(L % 4) + p of the 128-byte half L/8 < 4 or
        // ≥ 4 of block (L % 8)/4
        let idx = _mm512_add_epi8(_mm512_set1_epi8(p as i8), stride);
        let q = [
            _mm512_permutex2var_epi8(a[0], idx, a[1]),
            _mm512_permutex2var_epi8(a[2], idx, a[3]),
            _mm512_permutex2var_epi8(b[0], idx, b[1]),
            _mm512_permutex2var_epi8(b[2], idx, b[3]),
        ];
        let first = _mm512_mask_blend_epi8(0xFFFF_FFFF_0000_0000, q[0], q[1]);
        let second = _mm512_mask_blend_epi8(0xFFFF_FFFF_0000_0000, q[2], q[3]);
        _mm512_mask_blend_epi8(0xF0F0_F0F0_F0F0_F0F0, first, second)
    });
    PairAct {
        y,
        neg_y: y.map(|v| _mm512_sub_epi8(_mm512_setzero_si512(), v)),
    }
}

/// 32·(L/8 % 4) + 8·(L % 4) for lane L (see [`pair_act`]).
static ACT_STRIDE: [u8; 64] = bytes64!(|i| (32 * ((i / 8) % 4) + 8 * (i % 4)) as u8);

/// One row's pair of super-blocks, unpacked: per lane (grid row) the level codes of
/// elements 0..4 (`lo`) and 4..8 (`hi`), the sign byte with its parity bit (`signs`), and
/// per dword its group's scale 2·(a1 >> 28) + 1 (`ls`).
#[derive(Clone, Copy)]
struct Unpacked {
    lo: __m512i,
    hi: __m512i,
    signs: __m512i,
    ls: __m512i,
}

/// The pair kernel's tables, in registers.
struct PairDot {
    levels: LevelTables,
    fields: __m512i,
}

impl PairDot {
    /// Loads the tables.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    fn new() -> Self {
        PairDot {
            levels: LevelTables::new(),
            // SAFETY: the table is 64 bytes (unaligned load).
            fields: unsafe { _mm512_loadu_si512(SIGN_FIELDS.as_ptr().cast()) },
        }
    }

    /// Unpacks super-blocks `xa` and `xb` of one row (lane order: qword g holds `xa`'s grid
    /// rows 4g..4g + 4, then `xb`'s).
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
    #[inline]
    fn unpack(&self, xa: &BlockIQ2XXS, xb: &BlockIQ2XXS) -> Unpacked {
        // SAFETY: a block's 64 code bytes are readable (unaligned loads).
        let (qa, qb) = unsafe {
            (
                _mm512_loadu_si512(xa.qs.as_ptr().cast()),
                _mm512_loadu_si512(xb.qs.as_ptr().cast()),
            )
        };
        // qword g: A's grid indices 4g..4g + 4, then B's (the code bytes' sign words are
        // replaced by the other block's indices)
        let idx = _mm512_mask_blend_epi8(0xF0F0_F0F0_F0F0_F0F0, qa, _mm512_slli_epi64::<32>(qb));
        let (lo, hi) = self.levels.lookup(idx);
        // dword 2g: group g's `a1` of A, 2g + 1: of B
        let a1 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64::<32>(qa), qb);
        let fields = _mm512_multishift_epi64_epi8(self.fields, a1);
        let signs = _mm512_gf2p8affine_epi64_epi8::<0>(fields, _mm512_set1_epi64(KSIGNS_AFFINE));
        // dword d of `a1`, shifted right by 27 and with bit 0 set: 2·(a1 >> 28) + 1
        let ls = _mm512_or_si512(_mm512_srli_epi32::<27>(a1), _mm512_set1_epi32(1));
        Unpacked { lo, hi, signs, ls }
    }

    /// Four rows by four super-blocks (two pairs) of block products (see
    /// [`products4x4`], `prepared_rows!`). Per pair the four rows are unpacked first and
    /// their eight `vpdpbusd` steps run element by element across the rows: four chains
    /// side by side instead of one row's chain of eight after another (+20–25% in cache;
    /// the kernel was waiting on latency, not ports). Dword 2g of a row's sum is ls·Σ of
    /// group g of the first block, dword 2g + 1 of the second (exact).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,gfni,f16c")]
    unsafe fn rows4x4_prepared(
        &self,
        xs: &[&[BlockIQ2XXS; 4]; 4],
        ys: &[BlockQ8K; 4],
        acts: &[PairAct; 2],
    ) -> [__m128; 4] {
        let mut t = [_mm512_setzero_si512(); 4];
        for (pair, act) in acts.iter().enumerate() {
            let z0 = _mm512_setzero_si512();
            let mut u = [Unpacked {
                lo: z0,
                hi: z0,
                signs: z0,
                ls: z0,
            }; 4];
            for (ur, x) in u.iter_mut().zip(xs) {
                *ur = self.unpack(&x[2 * pair], &x[2 * pair + 1]);
            }
            let mut z = [z0; 4];
            for p in 0..8 {
                let (y, ny) = (act.y[p], act.neg_y[p]);
                let m = _mm512_set1_epi64(LEVEL_AFFINE[p % 4]);
                for (zr, ur) in z.iter_mut().zip(&u) {
                    let codes = if p < 4 { ur.lo } else { ur.hi };
                    let w = _mm512_gf2p8affine_epi64_epi8::<8>(codes, m);
                    let neg = _mm512_test_epi8_mask(ur.signs, _mm512_set1_epi8(1 << p));
                    *zr = _mm512_dpbusd_epi32(*zr, w, _mm512_mask_blend_epi8(neg, y, ny));
                }
            }
            for (zr, ur) in z.iter_mut().zip(&u) {
                *zr = _mm512_mullo_epi32(*zr, ur.ls);
            }
            // even dwords hold the first block's groups, odd ones the second's: per 128-bit
            // lane, [A r0, A r1, B r0, B r1] and the same for rows 2, 3, then one unpack
            // each gives the blocks' row partials in the layout `products4x4` takes
            let ab = _mm512_add_epi32(
                _mm512_unpacklo_epi32(z[0], z[1]),
                _mm512_unpackhi_epi32(z[0], z[1]),
            );
            let cd = _mm512_add_epi32(
                _mm512_unpacklo_epi32(z[2], z[3]),
                _mm512_unpackhi_epi32(z[2], z[3]),
            );
            t[2 * pair] = _mm512_unpacklo_epi64(ab, cd);
            t[2 * pair + 1] = _mm512_unpackhi_epi64(ab, cd);
        }
        let hd: [u16; 16] = std::array::from_fn(|i| u16::from_le_bytes(xs[i % 4][i / 4].d));
        let dy = [ys[0].d(), ys[1].d(), ys[2].d(), ys[3].d()];
        products4x4(&t, &hd, &dy, 1.0)
    }
}

/// IQ2_XXS · Q8_K for several weight rows against one activation row (decode), four rows
/// by two pairs of super-blocks at a time (`prepared_rows!`), per pair the steps of the
/// module docs: each row gets the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(super) unsafe fn dot_iq2_xxs_avx512_pairs(
    _n: usize,
    rows: &[&[u8]],
    a: &[u8],
    out: &mut [f32],
) {
    let k = PairDot::new();
    let none = PairAct {
        y: [_mm512_setzero_si512(); 8],
        neg_y: [_mm512_setzero_si512(); 8],
    };
    prepared_rows!(
        k,
        BlockIQ2XXS,
        PairAct,
        PAIR_SEG,
        2,
        pair_act,
        none,
        rows,
        a,
        out,
        0.125
    );
}
