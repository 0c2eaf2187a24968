//! The IQ2_XXS decode (multi-row) kernel that works on pairs of super-blocks, with no
//! gathers and no repack: a child of `iq::avx512`.
//!
//! On the Intel hosts measured here the vector work runs on two ports, 0 and 5: a
//! `vpermi2b`/`vpermt2b` is three uops (two on port 5), `vpermb`, `vpmultishiftqb` and
//! `vptestmb` one on port 5, `vgf2p8affineqb`, shifts and `vpmovb2m` one on port 0, and
//! `vpdpbusd`, `vpternlogd` and blends one on either; a `vpgatherdq` costs about fifteen
//! cycles. So the kernel is built to spend as few uops as it can. Per pair of super-blocks
//! A, B of one row:
//!
//! - one shift and one blend put the pair's 64 grid indices in one register (qword g: A's
//!   grid indices 4g..4g + 4, then B's), and four `vpermt2b` and two blends look up every
//!   index's 16-bit level code ([`LevelTables`]: 2 bits per element). A pair fills all 64
//!   lanes; one super-block would fill half of them for the same four lookups;
//! - the sign fields: a shift and a blend put group g's `a1` words of A and B in qword g
//!   and one `vpmultishiftqb` cuts the 7-bit fields into bytes, so byte L holds the field of
//!   lane L's grid;
//! - four index registers, q = 0..4: bits 0..4 hold the level codes of elements 2q and
//!   2q + 1 (the code bytes, or them shifted right by 4), bits 4 and 5 their signs (the
//!   fields themselves for q = 2, else one `vgf2p8affineqb` of them: the sign of element 7
//!   is the parity of the seven field bits, `KSIGNS_IQ2XS[i] = i | parity(i) << 7`, linear
//!   over GF(2)), one `vpternlogd` bit select each;
//! - per element P one `vpermb` of a 64-byte table ([`SIGNED_LEVELS`]) turns its index
//!   register into the weight c + s·w (c = [`OFFSET`]: unsigned, as `vpdpbusd` needs), and
//!   one `vpdpbusd` adds it times the activations: dword 2g sums group g of A, dword 2g + 1
//!   group g of B. The chain starts from −c·Σy of the groups (prepared), so the sum is the
//!   exact Σ s·w·y, |Σ| ≤ 32·43·127; one `vpmulld` by the group scales 2·(a1 >> 28) + 1 (the
//!   `a1` words shifted, in place). The sixteen sums of four rows reduce with two unpacks
//!   and adds per pair of rows, even dwords apart from odd ones.
//!
//! The kernel before this one picked the weights' magnitudes by `vgf2p8affineqb` from the
//! level codes and signed the activations with one `vptestmb` and one blend per element
//! (four uops an element against two and a half now; 1.09× in cache, see `docs/kernels.md`).
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

/// The offset added to every signed weight so that `vpdpbusd` can take it as its unsigned
/// operand: c + s·w ∈ 0..=86 for w ∈ {8, 25, 43}. Its share, c·Σy per group, is taken
/// off once per call ([`PairAct::corr`]).
const OFFSET: i32 = 43;

/// `vgf2p8affineqb` matrix putting the signs of elements 2q and 2q + 1 at bits 4 and 5 of
/// each sign-field byte (the sign of element 7 is the parity of the field's seven bits:
/// `KSIGNS_IQ2XS[i] = i | parity(i) << 7`, which is linear over GF(2)); the other bits are
/// zero. Row k of the matrix is byte 7 − k.
const fn sign_pair_affine(q: usize) -> i64 {
    let even = 1u64 << (2 * q);
    let odd = if q == 3 { 0x7F } else { 1u64 << (2 * q + 1) };
    ((even << (8 * (7 - 4))) | (odd << (8 * (7 - 5)))) as i64
}

/// The sign maps of element pairs (0, 1), (2, 3), (4, 5) and (6, 7). The third keeps bits 4
/// and 5 where they are, so `PairDot::unpack` uses the fields as they are instead (one
/// `vgf2p8affineqb` fewer a pair and row, +1.6% in cache); it stays for the indexing.
const SIGN_PAIRS: [i64; 4] = [
    sign_pair_affine(0),
    sign_pair_affine(1),
    sign_pair_affine(2),
    sign_pair_affine(3),
];

/// The `vpermb` tables from an index byte (bits 0–3: the level codes of elements 2q and
/// 2q + 1; bits 4 and 5: their signs; bits 6 and 7 ignored) to element 2q's (`[0]`) or
/// 2q + 1's (`[1]`) weight c + s·w.
static SIGNED_LEVELS: [[u8; 64]; 2] = {
    const W: [i32; 4] = [8, 25, 43, 0];
    let mut t = [[0u8; 64]; 2];
    let mut i = 0;
    while i < 64 {
        let (a, b) = (i & 3, (i >> 2) & 3);
        let (sa, sb) = ((i >> 4) & 1, (i >> 5) & 1);
        t[0][i] = (OFFSET + if sa == 1 { -W[a] } else { W[a] }) as u8;
        t[1][i] = (OFFSET + if sb == 1 { -W[b] } else { W[b] }) as u8;
        i += 1;
    }
    t
};

/// The activation side of a pair of super-blocks for [`dot_iq2_xxs_avx512_pairs`]: register
/// P holds element P of each of the pair's 64 grid rows in the weights' lane order (lane L:
/// grid 4·(L/8) + L%4 of the first block for L%8 < 4, of the second above; zeros where the
/// pair has one block).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct PairAct {
    y: [__m512i; 8],
    /// −c·Σy of each group (dword 2g: group g of the first block, 2g + 1: of the second),
    /// where every row's `vpdpbusd` chain starts: it takes off the weights' offset.
    corr: __m512i,
}

/// The [`PairAct`] of one or two activation blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vnni")]
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
    // c·Σ of each dword's four lanes over the eight elements: one group (|Σ| ≤ 43·32·127)
    let c = _mm512_set1_epi8(OFFSET as i8);
    let sum = y
        .iter()
        .fold(_mm512_setzero_si512(), |z, &v| _mm512_dpbusd_epi32(z, c, v));
    PairAct {
        y,
        corr: _mm512_sub_epi32(_mm512_setzero_si512(), sum),
    }
}

/// 32·(L/8 % 4) + 8·(L % 4) for lane L (see [`pair_act`]).
static ACT_STRIDE: [u8; 64] = bytes64!(|i| (32 * ((i / 8) % 4) + 8 * (i % 4)) as u8);

/// One row's pair of super-blocks, unpacked: per lane (grid row) four `vpermb` indices,
/// index q holding the level codes and signs of elements 2q and 2q + 1 ([`SIGNED_LEVELS`]),
/// and per dword its group's scale 2·(a1 >> 28) + 1 (`ls`).
#[derive(Clone, Copy)]
struct Unpacked {
    idx: [__m512i; 4],
    ls: __m512i,
}

/// The pair kernel's tables, in registers.
struct PairDot {
    levels: LevelTables,
    fields: __m512i,
    signed: [__m512i; 2],
}

impl PairDot {
    /// Loads the tables.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    fn new() -> Self {
        PairDot {
            levels: LevelTables::new(),
            // SAFETY: the table is 64 bytes (unaligned load).
            fields: unsafe { _mm512_loadu_si512(SIGN_FIELDS.as_ptr().cast()) },
            // SAFETY: each table is 64 bytes (unaligned loads).
            signed: SIGNED_LEVELS.map(|t| unsafe { _mm512_loadu_si512(t.as_ptr().cast()) }),
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
        // the level codes of elements 2q, 2q + 1 in bits 0..4 (the shifts by 4 bring the
        // next byte's bits into bits 4..8, which the select below drops)
        let codes = [
            lo,
            _mm512_srli_epi16::<4>(lo),
            hi,
            _mm512_srli_epi16::<4>(hi),
        ];
        let low_nibbles = _mm512_set1_epi8(0x0F);
        let idx = std::array::from_fn(|q| {
            // the signs of elements 4 and 5 are bits 4 and 5 of the fields already
            let signs = if q == 2 {
                fields
            } else {
                _mm512_gf2p8affine_epi64_epi8::<0>(fields, _mm512_set1_epi64(SIGN_PAIRS[q]))
            };
            // bits 0..4 from the codes, the rest from the signs
            _mm512_ternarylogic_epi32::<0xCA>(low_nibbles, codes[q], signs)
        });
        // dword d of `a1`, shifted right by 27 and with bit 0 set: 2·(a1 >> 28) + 1
        let ls = _mm512_or_si512(_mm512_srli_epi32::<27>(a1), _mm512_set1_epi32(1));
        Unpacked { idx, ls }
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
                idx: [z0; 4],
                ls: z0,
            }; 4];
            for (ur, x) in u.iter_mut().zip(xs) {
                *ur = self.unpack(&x[2 * pair], &x[2 * pair + 1]);
            }
            let mut z = [act.corr; 4];
            for p in 0..8 {
                let y = act.y[p];
                for (zr, ur) in z.iter_mut().zip(&u) {
                    let w = _mm512_permutexvar_epi8(ur.idx[p / 2], self.signed[p % 2]);
                    *zr = _mm512_dpbusd_epi32(*zr, w, y);
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
        corr: _mm512_setzero_si512(),
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
