//! AVX-512 kernels for IQ2_XXS, IQ1_S and the repacked IQ1_S_X · Q8_K (need AVX-512
//! F/BW/VL, VBMI, BITALG and VNNI). IQ1_S_X stores IQ1_S's level codes themselves (see
//! `codec::repack`), so its kernels shift and mask instead of looking anything up; they share
//! IQ1_S's multi-column kernel and tile expander bodies ([`Iq1Layout`]).
//! IQ1_S's 2048-entry grid is too large for registers; its kernels gather each grid
//! row's eight level bytes from a 16 KiB table (`vpgatherdq`, eight rows per instruction, so
//! a quarter arrives in element order; gathering 2-bit codes from a 4 KiB table and placing
//! them with byte permutes was 1.6–2× slower for decode, and 32 scalar table reads slower
//! still).
//!
//! The AVX2 kernel spends most of its instructions gathering 8-byte grid rows and 8-byte
//! sign masks with scalar loads. Here a super-block's 32 grid rows are looked up at once:
//! each grid row's eight values are one of {8, 25, 43}, so a row packs into a 16-bit code of
//! eight 2-bit levels, and the 256-entry code table sits in eight registers, searched by four
//! `vpermt2w` and two blends. `vpmultishiftqb` unpacks the levels to bytes and `vpshufb` maps
//! them to grid values. The 7-bit sign indices are cut out by `vpmultishiftqb` too, their
//! parity bit (the table `KSIGNS_IQ2XS` holds `i | parity(i) << 7`) comes from `vpopcntb`, and
//! `vptestmb` turns them into a byte mask that negates activations. `vpdpbusd` forms the
//! integer sums. All of it is exact integer arithmetic, and the float combine is the
//! reference's, so the result is the reference's bits. The one-column IQ2_XXS kernel
//! (decode) gathers the 8-byte grid rows instead (`vpgatherdq`, 2 KiB table): fewer
//! shuffle-port operations per super-block, 1.3–1.5× faster measured; the multi-column
//! kernels amortise the in-register lookup over their columns.
//!
//! The repacked IQ2_XXS_X's kernels are in the child module `iq2x`, IQ1_M's and the repacked
//! IQ1_M_X's in `iq1m`, the repacked IQ1_S_X's one-row and multi-row kernels (and the
//! half-major code helpers IQ1_M_X shares) in `iq1sx`, the four-rows-by-four-super-blocks
//! passes of the decode kernels in `rows`, and IQ2_XXS's first-choice decode kernel, which
//! looks up a pair of super-blocks' codes at once ([`LevelTables`]) instead of gathering, in
//! `iq2pairs`. The first-choice decode kernels of raw IQ1_S and IQ1_M, which still gather but
//! fill the gathers in group order against activations prepared once per call, are in
//! `iq1gather`.

use super::{entry, f16c, fold_pairs, sums4, tree4};
use crate::blocks::{view, BlockIQ1S, BlockIQ1SX, BlockIQ2XXS, BlockIQ2XXSX, BlockQ8K};
use crate::grids::{IQ1S_GRID, IQ2XXS_GRID};
use std::arch::x86_64::*;

#[macro_use]
mod rows;
pub(super) use iq1sx::{cut_order, half_major_quarters};
use iq1sx::{dot_iq1_s_x_avx512, dot_iq1_s_x_avx512_rows, iq1sx_codes};
use rows::{products4, products4x4};

entry!(multi dot_iq2_xxs_avx512_multi_entry => dot_iq2_xxs_avx512_multi, dot_iq1_s_avx512_multi_entry => dot_iq1_s_avx512_multi, dot_iq1_s_x_avx512_multi_entry => dot_iq1_s_x_avx512_multi);
entry!(rows dot_iq1_s_x_avx512_rows_entry => dot_iq1_s_x_avx512_rows);

entry!(
    dot_iq2_xxs_avx512_entry => dot_iq2_xxs_avx512,
    dot_iq1_s_avx512_entry => dot_iq1_s_avx512,
    dot_iq1_s_x_avx512_entry => dot_iq1_s_x_avx512,
);

/// Activation columns per unpacked weight block in the multi-column kernels (the most
/// [`super::MultiDotFn`]'s callers pass).
const COLS: usize = 8;

/// `IQ2XXS_GRID[i]` as eight 2-bit levels (0: 8, 1: 25, 2: 43), element `j` at bits 2j.
static LEVELS: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let g = IQ2XXS_GRID[i];
        let mut c = 0u16;
        let mut j = 0;
        while j < 8 {
            let lv = match (g >> (8 * j)) as u8 {
                8 => 0,
                25 => 1,
                43 => 2,
                _ => panic!("IQ2XXS_GRID value outside 8, 25, 43"),
            };
            c |= lv << (2 * j);
            j += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// Low bytes of [`LEVELS`] (levels of elements 0..3) and high bytes (elements 4..7): two
/// 256-byte tables for `vpermt2b`.
static LEVELS_LO: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = LEVELS[i] as u8;
        i += 1;
    }
    t
};
static LEVELS_HI: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = (LEVELS[i] >> 8) as u8;
        i += 1;
    }
    t
};

/// Control bytes, built at compile time: `f(i)` for i in 0..64.
macro_rules! bytes64 {
    (|$i:ident| $e:expr) => {{
        let mut t = [0u8; 64];
        let mut $i = 0;
        while $i < 64 {
            t[$i] = $e;
            $i += 1;
        }
        t
    }};
}

/// `vpmultishiftqb` control: byte j of each qword takes bits 2j.. (the level of element j).
static UNPACK: [u8; 64] = bytes64!(|i| (2 * (i % 8)) as u8);
/// `vpmultishiftqb` control: bytes 0..3 of qword g take the 7-bit sign fields at bits
/// 32 + 7k of qword g (the block's `a1` word of group g).
static FIELDS: [u8; 64] = bytes64!(|i| if i % 8 < 4 {
    (32 + 7 * (i % 8)) as u8
} else {
    0
});
/// `vpermb` control: byte i (0..32) takes grid index i of the block (byte 8·(i/4) + i%4 of
/// the code bytes: group i/4, sub-group i%4).
static IDX: [u8; 64] = bytes64!(|i| (8 * ((i % 32) / 4) + i % 4) as u8);
/// `vpermb` controls per quarter p, for zero-masking with [`GATHER_MASK`]: byte 0 of dword j
/// (j < 8) takes grid index 8p + j (see [`IDX`]), so the low 256 bits are quarter p's eight
/// `vpgatherdq` indices, zero-extended, in one instruction.
static GATHER_IDX: [[u8; 64]; 4] = [
    bytes64!(|i| gather_idx(0, i)),
    bytes64!(|i| gather_idx(1, i)),
    bytes64!(|i| gather_idx(2, i)),
    bytes64!(|i| gather_idx(3, i)),
];
const fn gather_idx(p: usize, i: usize) -> u8 {
    let g = 8 * p + (i / 4) % 8;
    (8 * (g / 4) + g % 4) as u8
}
/// Byte 0 of each of the low eight dwords (the zero-masking of [`GATHER_IDX`]).
const GATHER_MASK: u64 = 0x1111_1111;
/// `vpermt2b` control per quarter p: qword j gets the low level byte (from the first
/// source) and the high level byte (second source, +64) of sub-group 8p + j.
static PLACE: [[u8; 64]; 4] = [
    bytes64!(|i| place(0, i)),
    bytes64!(|i| place(1, i)),
    bytes64!(|i| place(2, i)),
    bytes64!(|i| place(3, i)),
];
const fn place(p: usize, i: usize) -> u8 {
    match i % 8 {
        0 => (8 * p + i / 8) as u8,
        1 => (64 + 8 * p + i / 8) as u8,
        _ => 0,
    }
}
/// `vpermb` control: qword p takes the four sign bytes of group 2p and the four of group
/// 2p + 1 (bytes 0..3 of qwords 2p and 2p+1) — as a u64, the negation mask of quarter p.
static MASKS: [u8; 64] = bytes64!(|i| ((2 * ((i / 8) % 4) + (i % 8) / 4) * 8 + i % 4) as u8);
/// Level → grid value, per 128-bit lane (for `vpshufb`).
static VALUES: [u8; 64] = bytes64!(|e| match e % 16 {
    0 => 8,
    1 => 25,
    2 => 43,
    _ => 0,
});

/// `vpermw` controls for two registers' packed four-element sums (`vpackssdw` of registers
/// 2q and 2q + 1: in 128-bit lane j, words 0–3 from register 2q, words 4–7 from 2q + 1):
/// word w of lane j in pair q takes scale word `cq·q + cw·(w/4) + ch·(j/2) + cl·(j mod 2) +
/// offset`, the coefficients saying where each layout keeps the scale of those elements.
pub(super) const fn packed_pick(
    cq: usize,
    cw: usize,
    ch: usize,
    cl: usize,
    offset: usize,
) -> [[u16; 32]; 2] {
    let mut t = [[0u16; 32]; 2];
    let mut q = 0;
    while q < 2 {
        let mut i = 0;
        while i < 32 {
            let (j, w) = (i / 8, i % 8);
            t[q][i] = (cq * q + cw * (w / 4) + ch * (j / 2) + cl * (j % 2) + offset) as u16;
            i += 1;
        }
        q += 1;
    }
    t
}

/// [`packed_pick`] for 64-element quarters in element order with a scale per 32-element
/// group (group g's in word `stride·g + offset`): lane j of quarter 2q holds group
/// 4q + j/2, of quarter 2q + 1 group 4q + 2 + j/2 ([`scale_pairs`]).
pub(super) const fn pair_pick(stride: usize, offset: usize) -> [[u16; 32]; 2] {
    packed_pick(4 * stride, 2 * stride, stride, 0, offset)
}

/// [`pair_pick`] for scales in word 4g ([`Iq2Block::ls`]).
static IQ2_PAIRS: [[u16; 32]; 2] = pair_pick(4, 0);

/// [`pair_pick`] for IQ2_XXS's code words, whose word 4g + 3 holds group g's scale.
static IQ2_TOP_PAIRS: [[u16; 32]; 2] = pair_pick(4, 3);

/// [`pair_pick`] for scales in word g (IQ1_S's scale words, in every 128-bit lane).
static IQ1_PAIRS: [[u16; 32]; 2] = pair_pick(1, 0);

/// [`pair_pick`] for scales in dword g ([`Iq1Block::ls32`]).
static IQ1_DWORD_PAIRS: [[u16; 32]; 2] = pair_pick(2, 0);

/// A 64-byte constant table in a register: any `Pod` value of exactly 64 bytes (checked at
/// compile time), so the load never reads past it. The kernels' constructors load their
/// control tables with this (and [`tables64`]).
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) fn table64<T: bytemuck::Pod>(t: &T) -> __m512i {
    const { assert!(size_of::<T>() == 64, "not a 64-byte table") };
    // SAFETY: `t` is 64 readable bytes (checked above); unaligned load.
    unsafe { _mm512_loadu_si512((t as *const T).cast()) }
}

/// [`table64`] of each of `N` tables (for instance the two `vpermw` controls of a
/// [`packed_pick`]).
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) fn tables64<T: bytemuck::Pod, const N: usize>(t: &[T; N]) -> [__m512i; N] {
    let mut out = [_mm512_setzero_si512(); N];
    for (o, t) in out.iter_mut().zip(t) {
        *o = table64(t);
    }
    out
}

/// `acc` plus a super-block's Σ_g s_g·Σ_{e∈g} (its four quarters' four-element sums `d`,
/// `vpdpbusd`, each |·| < 2¹⁵, times their groups' scales): two quarters packed to words per
/// register (`vpackssdw`) and one `vpdpwssd` per pair against `sc`, the pair's scales
/// ([`pair_pick`]). One multiply per quarter instead of `vpmaddubsw` + `vpdpwssd`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
pub(super) fn scale_pairs(acc: __m512i, d: &[__m512i; 4], sc: &[__m512i; 2]) -> __m512i {
    let acc = super::dpwssd(acc, _mm512_packs_epi32(d[0], d[1]), sc[0]);
    super::dpwssd(acc, _mm512_packs_epi32(d[2], d[3]), sc[1])
}

/// `$f` (a `group`) on super-blocks `c..c + 4` of `$xs` and `$ys`, or, where fewer than four
/// are left before `nb`, on copies padded with zero blocks (whose products the callers do
/// not add). A macro so that the closure's body expands inside the `#[target_feature]`
/// kernel.
macro_rules! four {
    ($xs:expr, $ys:expr, $c:expr, $nb:expr, |$x:ident, $y:ident| $body:expr) => {{
        let (xs, ys, c, nb) = ($xs, $ys, $c, $nb);
        if c + 4 <= nb {
            let ($x, $y) = (
                xs[c..c + 4].try_into().unwrap(),
                ys[c..c + 4].try_into().unwrap(),
            );
            $body
        } else {
            let (mut px, mut py) = (
                [bytemuck::Zeroable::zeroed(); 4],
                [bytemuck::Zeroable::zeroed(); 4],
            );
            px[..nb - c].copy_from_slice(&xs[c..nb]);
            py[..nb - c].copy_from_slice(&ys[c..nb]);
            let ($x, $y) = (&px, &py);
            $body
        }
    }};
}

/// The body of the one-column gather kernels: `$k.group` over four super-blocks at a time,
/// their products added in block order; the row's sum. A macro so that it expands inside each
/// `#[target_feature]` kernel.
macro_rules! grid_one {
    ($k:ident, $block:ty, $w:ident, $a:ident) => {{
        let (xs, ys) = (view::<$block>($w), view::<BlockQ8K>($a));
        let nb = xs.len().min(ys.len());
        let mut s = 0f32;
        for c in (0..nb).step_by(4) {
            let cnt = (nb - c).min(4);
            // SAFETY: the kernel expanding this has the features of `group`.
            let v = four!(xs, ys, c, nb, |x, y| unsafe { $k.group(x, y) });
            add_lanes(&mut s, v, cnt);
        }
        s
    }};
}

/// An IQ2_XXS super-block's four quarters' negation masks from its code words `q`: the
/// 7-bit sign fields cut by `vpmultishiftqb` (`fields`), their parity bit from `vpopcntb`
/// (the table `KSIGNS_IQ2XS` holds `i | parity(i) << 7`), and one `vpermb` (`masks_c`)
/// that gathers each quarter's 64 sign bits, read back as four u64 masks.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512bitalg")]
#[inline]
fn iq2_negations(q: __m512i, fields: __m512i, masks_c: __m512i) -> [u64; 4] {
    let f = _mm512_and_si512(
        _mm512_multishift_epi64_epi8(fields, q),
        _mm512_set1_epi8(0x7F),
    );
    let odd = _mm512_test_epi8_mask(_mm512_popcnt_epi8(f), _mm512_set1_epi8(1));
    let signs = _mm512_or_si512(f, _mm512_maskz_mov_epi8(odd, _mm512_set1_epi8(-128)));
    let mut neg = [0u64; 4];
    // SAFETY: `neg` has room for 32 bytes; the low half of the permuted masks is stored.
    unsafe {
        _mm256_storeu_si256(
            neg.as_mut_ptr().cast(),
            _mm512_castsi512_si256(_mm512_permutexvar_epi8(masks_c, signs)),
        )
    };
    neg
}

/// One IQ2 super-block's Σ_g s_g·Σ_{e∈g} w·y, spread over the lanes: per quarter the
/// activations negated where the weight is (`neg`, one mask per quarter) and one `vpdpbusd`
/// against the magnitudes `grid` (four-element sums |Σ| ≤ 4·43·128), then the quarters
/// scaled by their groups' scales `sc` ([`scale_pairs`]). Shared by every IQ2_XXS and
/// IQ2_XXS_X kernel that works on one activation block at a time. (The quarters run in an
/// `array::from_fn`: written as a plain loop, the one-column kernels' `group` stopped being
/// inlined and ran 4–6% slower in cache, IQ2_XXS 5.42 → 5.18 GB/s; the decode kernels did
/// not move.)
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
fn iq2_signed_sums(
    grid: &[__m512i; 4],
    neg: &[u64; 4],
    sc: &[__m512i; 2],
    y: &BlockQ8K,
) -> __m512i {
    let z = _mm512_setzero_si512();
    let d: [__m512i; 4] = std::array::from_fn(|p| {
        // SAFETY: quarter p is activation bytes 64p..64p+64 (unaligned load).
        let yv = unsafe { _mm512_loadu_si512(y.qs[64 * p..].as_ptr().cast()) };
        let sy = _mm512_mask_sub_epi8(yv, neg[p], z, yv);
        _mm512_dpbusd_epi32(z, grid[p], sy)
    });
    scale_pairs(z, &d, sc)
}

/// The tables of the one-column IQ2_XXS kernels, in registers.
struct Iq2Dot {
    gidx: [__m512i; 4],
    fields: __m512i,
    masks_c: __m512i,
    tops: [__m512i; 2],
}

impl Iq2Dot {
    /// Loads the tables.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn new() -> Self {
        Iq2Dot {
            gidx: tables64(&GATHER_IDX),
            fields: table64(&FIELDS),
            masks_c: table64(&MASKS),
            tops: tables64(&IQ2_TOP_PAIRS),
        }
    }

    /// One IQ2_XXS super-block's integer sum against `y`, spread over the lanes (see
    /// [`dot_iq2_xxs_avx512`]).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums(&self, x: &BlockIQ2XXS, y: &BlockQ8K) -> __m512i {
        let base = IQ2XXS_GRID.as_ptr().cast::<u8>();
        // SAFETY: a block's 64 code bytes are readable (unaligned load).
        let q = unsafe { _mm512_loadu_si512(x.qs.as_ptr().cast()) };
        let grid: [__m512i; 4] = std::array::from_fn(|p| {
            let ix = _mm512_maskz_permutexvar_epi8(GATHER_MASK, self.gidx[p], q);
            // SAFETY: every index is < 256, the grid's length; each read is 8 bytes at
            // 8·index.
            unsafe { _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(ix), base.cast()) }
        });
        let neg = iq2_negations(q, self.fields, self.masks_c);
        // word 4g + 3 of the codes is the top half of group g's `a1`: there,
        // ((w >> 11) & 0x1E) | 1 = 2·(a1 >> 28) + 1, the group's scale (other words: unused)
        let ls = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_srli_epi16(q, 11),
            _mm512_set1_epi16(0x1E),
            _mm512_set1_epi16(1),
        );
        let sc = self.tops.map(|t| _mm512_permutexvar_epi16(t, ls));
        iq2_signed_sums(&grid, &neg, &sc, y)
    }
}

rows4x4_impl!(group Iq2Dot, BlockIQ2XXS, 1.0);

/// IQ2_XXS · Q8_K with AVX-512, one column (decode's matvec). Per super-block: the 32 grid
/// indices, zero-extended to dwords per quarter by one zero-masking `vpermb`, and each quarter's eight grid rows
/// gathered straight from `IQ2XXS_GRID` (`vpgatherdq`, element order); the signs negate the
/// activations as in [`Iq2Unpack::block`]; the group scales are formed in place in the code
/// words once per super-block and picked by one `vpermw` per quarter. Four super-blocks' sums are reduced by one unpack tree, their
/// float products run in four lanes and are added in block order: the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq2_xxs_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { Iq2Dot::new() };
    0.125 * grid_one!(k, BlockIQ2XXS, w, a)
}

/// IQ1_S's per-block bsum terms for one activation block: (Σ ls_g·B_g, Σ ±ls_g·B_g) with
/// B_g = bsum(2g) + bsum(2g+1), `ls8` the eight group scales and `sgn` ±1 per group (the delta
/// sign). Exact integer arithmetic in vectors instead of an eight-step scalar loop.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq1s_bsum_terms(ls8: __m256i, sgn: __m256i, y: &BlockQ8K) -> (i32, i32) {
    // SAFETY: the block's 32 bsum bytes (unaligned load).
    let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
    let lb = _mm256_mullo_epi32(ls8, _mm256_madd_epi16(bs, _mm256_set1_epi16(1)));
    // SAFETY: AVX2 is enabled for this function.
    unsafe {
        (
            super::hsum_i32(lb),
            super::hsum_i32(_mm256_sign_epi32(lb, sgn)),
        )
    }
}

/// IQ1_S group scales 2·((h >> 12) & 7) + 1 and delta signs (±1 from bit 15) of a block's
/// eight `qh` words.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn iq1s_scales_signs(qh: __m128i) -> (__m256i, __m256i) {
    let h = _mm256_cvtepu16_epi32(qh);
    let ls = _mm256_add_epi32(
        _mm256_slli_epi32(
            _mm256_and_si256(_mm256_srli_epi32(h, 12), _mm256_set1_epi32(7)),
            1,
        ),
        _mm256_set1_epi32(1),
    );
    let sgn = _mm256_sub_epi32(
        _mm256_set1_epi32(1),
        _mm256_slli_epi32(_mm256_srli_epi32(h, 15), 1),
    );
    (ls, sgn)
}

/// `vpermw` control per quarter p: 16-bit lane i (pair sums of elements 2i, 2i+1) takes the
/// scale of group 2p + i/16 — word 4g of IQ2_XXS's per-qword scales, word 2g of IQ1_S's
/// per-dword scales (the tile expanders' offset corrections).
static PICK16: [[[u16; 32]; 4]; 2] = {
    let mut t = [[[0u16; 32]; 4]; 2];
    let mut p = 0;
    while p < 4 {
        let mut i = 0;
        while i < 32 {
            let g = 2 * p + i / 16;
            t[0][p][i] = (4 * g) as u16;
            t[1][p][i] = (2 * g) as u16;
            i += 1;
        }
        p += 1;
    }
    t
};

/// `IQ1S_GRID[i]` as eight level bytes v + 1 (0: −1, 1: 0, 2: +1), element `j` in byte j:
/// one `vpgatherdq` fetches eight grid rows, a 64-element quarter in element order.
static IQ1S_LEVELS: [u64; 2048] = {
    let mut t = [0u64; 2048];
    let mut i = 0;
    while i < 2048 {
        let g = IQ1S_GRID[i];
        let mut c = 0u64;
        let mut j = 0;
        while j < 8 {
            let lv: u64 = match (g >> (8 * j)) as u8 {
                0xFF => 0,
                0 => 1,
                1 => 2,
                _ => panic!("IQ1S_GRID value outside -1, 0, 1"),
            };
            c |= lv << (8 * j);
            j += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// `vpmultishiftqb` control on a qword holding four `qh` words: byte 1 of dword i (grid
/// index i of those four groups, sub-group k = i mod 4 of group i/4) takes bits
/// 16·(i/4) + 3k.. — that sub-group's three high index bits land at bits 8–10.
static HI_BITS: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 16 {
        t[4 * i + 1] = (16 * (i / 4) + 3 * (i % 4)) as u8;
        i += 1;
    }
    t
};

/// `vpshufb` control: 128-bit lane l's word w takes word 4·(l mod 2) + w/2 of its lane, so
/// lanes 0–1 (and 2–3) hold groups 0..8's words twice each, matching the 16 `bsums` pairs.
static PAIR_SCALES: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut b = 0;
    while b < 64 {
        let (l, w) = (b / 16, (b % 16) / 2);
        t[b] = (2 * (4 * (l % 2) + w / 2) + b % 2) as u8;
        b += 1;
    }
    t
};

/// IQ1_S · Q8_K with AVX-512, one column (decode's matvec). Per super-block: the levels of
/// [`Iq1Unpack::levels`], Σ l·y per four elements by `vpdpbusd`, times the group scale by
/// [`scale_pairs`] (the scales formed in every lane from one lane-broadcast of `qh`); the −1 of
/// the level offset and the delta term come from one `vpmaddwd` of the `bsums` against
/// [−ls | ls·sign]. Four super-blocks' two sums (Σ ls·Σv·y, Σ ls·sign·B) are reduced
/// together by an unpack tree, and their float combines run in four lanes, then are added
/// in block order: the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq1_s_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { Iq1Dot::new() };
    grid_one!(k, BlockIQ1S, w, a)
}

/// The constants of the one-column IQ1_S kernels, in registers.
struct Iq1Dot {
    un: Iq1Unpack,
    pairs4: [__m512i; 2],
    pairs: __m512i,
}

impl Iq1Dot {
    /// Loads the constants.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn new() -> Self {
        Iq1Dot {
            // SAFETY: same features as this function.
            un: unsafe { Iq1Unpack::new() },
            pairs4: tables64(&IQ1_PAIRS),
            pairs: table64(&PAIR_SCALES),
        }
    }

    /// The products `f32(d)·dy·(Σ + Σ₁/8)` of four super-blocks of `xs · ys`, one per lane,
    /// the reference's way (see [`dot_iq1_s_avx512`]).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn group(&self, xs: &[BlockIQ1S; 4], ys: &[BlockQ8K; 4]) -> __m128 {
        let mut z = [_mm512_setzero_si512(); 4];
        let mut hd = [0u16; 4];
        let mut dy = [0f32; 4];
        for (k, zk) in z.iter_mut().enumerate() {
            let (x, y) = (&xs[k], &ys[k]);
            hd[k] = u16::from_le_bytes(x.d);
            dy[k] = y.d();
            // SAFETY: same features as this function.
            let lvs = unsafe { self.un.levels(x) };
            // SAFETY: 16 `qh` bytes (unaligned load).
            let qh = unsafe { _mm512_castsi128_si512(_mm_loadu_si128(x.qh.as_ptr().cast())) };
            // SAFETY: same features as this function.
            *zk = unsafe { self.sums(&lvs, _mm512_shuffle_i32x4::<0>(qh, qh), y) };
        }
        // SAFETY: same features as this function.
        unsafe { Self::finish(&z, &hd, &dy) }
    }

    /// One super-block's two integer sums against `y`, lanes 0–7 Σ ls·Σ l·y (in four
    /// partial pairs) and lanes 8–15 the bsum terms (see [`fold_pairs`]): `lvs` its level
    /// codes per quarter, `rq` its eight group words (scale at bits 12–14, delta sign at bit
    /// 15, as in IQ1_S's `qh`) in every 128-bit lane.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums(&self, lvs: &[__m512i; 4], rq: __m512i, y: &BlockQ8K) -> __m512i {
        // SAFETY: 256 activation bytes, 32 `bsums` bytes (unaligned).
        let (yq, bs) = unsafe {
            (
                y.qs.as_ptr(),
                _mm512_castsi256_si512(_mm256_loadu_si256(y.bsums.as_ptr().cast())),
            )
        };
        let bs = _mm512_shuffle_i64x2::<0b01_00_01_00>(bs, bs);
        // every 128-bit lane: the eight scales 2·((h >> 12) & 7) + 1 = ((h >> 11) & 0xE) | 1
        let ls = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_srli_epi16(rq, 11),
            _mm512_set1_epi16(0xE),
            _mm512_set1_epi16(1),
        );
        let sg = _mm512_srai_epi16(rq, 15);
        let lsg = _mm512_sub_epi16(_mm512_xor_si512(ls, sg), sg);
        let z = _mm512_setzero_si512();
        let d: [__m512i; 4] = std::array::from_fn(|p| {
            // SAFETY: quarter p is activation bytes 64p..64p+64 (unaligned load).
            let yv = unsafe { _mm512_loadu_si512(yq.add(64 * p).cast()) };
            _mm512_dpbusd_epi32(z, lvs[p], yv)
        });
        let sc = self.pairs4.map(|t| _mm512_permutexvar_epi16(t, ls));
        let acc = scale_pairs(z, &d, &sc);
        // lanes 0–1: −ls·B per group, lanes 2–3: ls·sign·B
        let m = _mm512_shuffle_epi8(
            _mm512_mask_blend_epi32(0xFF00, _mm512_sub_epi16(_mm512_setzero_si512(), ls), lsg),
            self.pairs,
        );
        let corr = _mm512_madd_epi16(bs, m);
        let folded = _mm512_add_epi32(acc, _mm512_shuffle_i64x2::<0b01_00_11_10>(acc, acc));
        _mm512_mask_add_epi32(corr, 0x00FF, corr, folded)
    }

    /// The float products of four super-blocks from their [`Self::sums`] `z`, f16 scales
    /// `hd` and activation scales `dy`, one per lane: the reference's operations.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn finish(z: &[__m512i; 4], hd: &[u16; 4], dy: &[f32; 4]) -> __m128 {
        let (sumi, sumi1) = fold_pairs(tree4(z[0], z[1], z[2], z[3]));
        let t = _mm_add_ps(
            _mm_cvtepi32_ps(sumi),
            _mm_mul_ps(_mm_set1_ps(0.125), _mm_cvtepi32_ps(sumi1)),
        );
        block_products(hd, dy, t)
    }
}

/// The reference's `f32(d)·dy·t` of four super-blocks, one per lane: `hd` their f16
/// scales, `dy` their activation scales, `t` their integer parts as f32.
#[target_feature(enable = "avx2,f16c")]
#[inline]
fn block_products(hd: &[u16; 4], dy: &[f32; 4], t: __m128) -> __m128 {
    let hq = hd.iter().rev().fold(0u64, |q, &h| q << 16 | u64::from(h));
    let dx = _mm_cvtph_ps(_mm_cvtsi64_si128(hq as i64));
    // SAFETY: `dy` holds four f32 (unaligned load).
    _mm_mul_ps(_mm_mul_ps(dx, unsafe { _mm_loadu_ps(dy.as_ptr()) }), t)
}

/// The reference's `s += v` for the first `cnt` lanes of `v`, in lane (block) order.
#[target_feature(enable = "sse")]
#[inline]
fn add_lanes(s: &mut f32, v: __m128, cnt: usize) {
    let mut vals = [0f32; 4];
    // SAFETY: `vals` holds four f32 (unaligned store).
    unsafe { _mm_storeu_ps(vals.as_mut_ptr(), v) };
    for vk in &vals[..cnt] {
        *s += vk;
    }
}

/// IQ1_S · Q8_K against up to eight activation columns per pass. Per super-block the 32
/// 11-bit grid indices are formed in vector registers and each quarter's eight grid rows of
/// level codes gathered from [`IQ1S_LEVELS`] (`vpgatherdq`, [`Iq1Unpack::block`]); per column Σ (l − 1)·y =
/// Σ l·y − Σ y uses the activation block sums. Exact integer arithmetic and the reference's
/// float combine: each column gets the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq1_s_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { iq1_multi::<BlockIQ1S>(n, w, acts, out) }
}

/// IQ1_S_X · Q8_K against up to eight activation columns per pass:
/// [`dot_iq1_s_avx512_multi`] with the level codes unpacked by shifts
/// ([`Iq1Unpack::block_x`]) instead of gathered.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq1_s_x_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { iq1_multi::<BlockIQ1SX>(n, w, acts, out) }
}

/// The body of the IQ1 multi-column kernels, for either layout.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
#[inline]
unsafe fn iq1_multi<B: Iq1Layout>(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let ld = |p: *const u8| {
        // SAFETY: every pointer passed is into a slice of at least 64 bytes; unaligned loads.
        unsafe { _mm512_loadu_si512(p.cast()) }
    };
    // SAFETY: same features as this function.
    let un = unsafe { Iq1Unpack::new() };
    let pick = tables64(&IQ1_DWORD_PAIRS);
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
            let Iq1Block { lvs, ls32, qh } = unsafe { un.unpack(x) };
            let lsv = pick.map(|t| _mm512_permutexvar_epi16(t, ls32));
            let dx = f16c!(x.d());
            // SAFETY: the features of this function cover the helper.
            let (ls8, sgn) = unsafe { iq1s_scales_signs(qh) };
            for (c, y) in ys.iter().enumerate() {
                let y = &y[bi];
                let z = _mm512_setzero_si512();
                let d: [__m512i; 4] = std::array::from_fn(|p| {
                    _mm512_dpbusd_epi32(z, lvs[p], ld(y.qs[64 * p..].as_ptr().cast()))
                });
                let acc = scale_pairs(z, &d, &lsv);
                // SAFETY: the features of this function cover the helper.
                let (lb, slb) = unsafe { iq1s_bsum_terms(ls8, sgn, y) };
                // − Σ ls·B is the −1 of the level offset
                let (sumi, sumi1) = (_mm512_reduce_add_epi32(acc) - lb, slb);
                s[c] += dx * y.d() * (sumi as f32 + 0.125 * sumi1 as f32);
            }
        }
        out.copy_from_slice(&s[..out.len()]);
    }
}

/// The IQ1_S unpacking constants, held in registers for a whole row.
pub(super) struct Iq1Unpack {
    hi_bits: __m512i,
    rq_ctrl: __m512i,
}

/// The two IQ1_S layouts ([`BlockIQ1S`] and its repacked [`BlockIQ1SX`]) the multi-column
/// kernel and the tile expander share.
pub(super) trait Iq1Layout: bytemuck::Pod {
    /// `true` for IQ1_S_X.
    const REPACKED: bool;
    /// The f16 super-block scale.
    fn d(&self) -> [u8; 2];
}

impl Iq1Layout for BlockIQ1S {
    const REPACKED: bool = false;
    fn d(&self) -> [u8; 2] {
        self.d
    }
}

impl Iq1Layout for BlockIQ1SX {
    const REPACKED: bool = true;
    fn d(&self) -> [u8; 2] {
        self.d
    }
}

/// `vpmultishiftqb` control that moves IQ1_S_X's group nibbles (nibble g at bit 4g of `sc`,
/// broadcast to every dword) to bits 12–15 of 16-bit lane g of every 128-bit lane: the high
/// byte of word g takes bits 4g − 4 .. 4g + 4 (rotating, so word 0 takes bits 60..64 and
/// 0..4); the low bytes are unused.
static RQ_CTRL: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 32 {
        t[2 * i + 1] = ((4 * (i % 8) + 60) % 64) as u8;
        i += 1;
    }
    t
};

/// One unpacked IQ1_S super-block: the level codes l = v + 1 (0..2) of each 64-element
/// quarter in element order, the eight group scales `2·((h >> 12) & 7) + 1` as the low
/// 256 bits of `ls32` (one per dword) and the raw `qh` words.
pub(super) struct Iq1Block {
    pub lvs: [__m512i; 4],
    pub ls32: __m512i,
    pub qh: __m128i,
}

impl Iq1Unpack {
    /// Loads the constants.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn new() -> Self {
        // SAFETY: HI_BITS has 64 bytes (unaligned load).
        let hi_bits = unsafe { _mm512_loadu_si512(HI_BITS.as_ptr().cast()) };
        // SAFETY: RQ_CTRL has 64 bytes (unaligned load).
        let rq_ctrl = unsafe { _mm512_loadu_si512(RQ_CTRL.as_ptr().cast()) };
        Iq1Unpack { hi_bits, rq_ctrl }
    }

    /// The level codes of one super-block's four quarters (exact): the 32 11-bit grid
    /// indices are formed in two registers (`vpmovzxbd` of the `qs` bytes, `vpmultishiftqb`
    /// of the broadcast `qh` words for bits 8–10) and each quarter's eight grid rows are
    /// one `vpgatherdq` from [`IQ1S_LEVELS`].
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn levels(&self, x: &BlockIQ1S) -> [__m512i; 4] {
        let q = x.qs.as_ptr();
        let h = x.qh.as_ptr();
        // SAFETY: 32 `qs` bytes and 16 `qh` bytes per block (unaligned loads of 16 and 8).
        let (q0, q1, qh) = unsafe {
            (
                _mm512_cvtepu8_epi32(_mm_loadu_si128(q.cast())),
                _mm512_cvtepu8_epi32(_mm_loadu_si128(q.add(16).cast())),
                _mm512_castsi128_si512(_mm_loadu_si128(h.cast())),
            )
        };
        let h0 = _mm512_permutexvar_epi64(_mm512_setzero_si512(), qh);
        let h1 = _mm512_permutexvar_epi64(_mm512_set1_epi64(1), qh);
        // index = qs | (hi & 0x700)
        let c700 = _mm512_set1_epi32(0x700);
        let i0 = _mm512_ternarylogic_epi32::<0xF8>(
            q0,
            _mm512_multishift_epi64_epi8(self.hi_bits, h0),
            c700,
        );
        let i1 = _mm512_ternarylogic_epi32::<0xF8>(
            q1,
            _mm512_multishift_epi64_epi8(self.hi_bits, h1),
            c700,
        );
        let base = IQ1S_LEVELS.as_ptr().cast::<u8>();
        // SAFETY: every index is < 2048, the table's length, and each read is 8 bytes at
        // 8·index.
        unsafe {
            [
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(i0), base.cast()),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(i0), base.cast()),
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(i1), base.cast()),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(i1), base.cast()),
            ]
        }
    }

    /// Unpacks one super-block (exact): [`Self::levels`] and the group scales.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn block(&self, x: &BlockIQ1S) -> Iq1Block {
        // SAFETY: same features as this function.
        let lvs = unsafe { self.levels(x) };
        // SAFETY: 16 `qh` bytes per block (unaligned load).
        let qh = unsafe { _mm_loadu_si128(x.qh.as_ptr().cast()) };
        // SAFETY: same features as this function.
        unsafe { Self::with_scales(lvs, qh) }
    }

    /// The level codes of an IQ1_S_X block's four quarters (three operations each,
    /// [`iq1sx_codes`]) and its eight group words in every 128-bit lane, each with the
    /// group's scale at bits 12–14 and its delta sign at bit 15 (where IQ1_S's `qh` words
    /// hold them; the low bits are other groups' nibbles, which no user of the words reads).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn levels_x(&self, x: &BlockIQ1SX) -> ([__m512i; 4], __m512i) {
        // SAFETY: same features as this function.
        let lvs = unsafe { iq1sx_codes(x) };
        let sc = _mm512_set1_epi32(i32::from_le_bytes(x.sc));
        (lvs, _mm512_multishift_epi64_epi8(self.rq_ctrl, sc))
    }

    /// Unpacks one IQ1_S_X super-block (exact): what [`Self::block`] gives for the IQ1_S
    /// block it was repacked from, but `qh`'s index bits.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn block_x(&self, x: &BlockIQ1SX) -> Iq1Block {
        // SAFETY: same features as this function.
        let (lvs, rq) = unsafe { self.levels_x(x) };
        // SAFETY: same features as this function.
        unsafe { Self::with_scales(lvs, _mm512_castsi512_si128(rq)) }
    }

    /// [`Self::block`] or [`Self::block_x`], by layout.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn unpack<B: Iq1Layout>(&self, x: &B) -> Iq1Block {
        // `cast_ref` is to the block's own type (the branch not taken is removed at compile
        // time)
        if B::REPACKED {
            // SAFETY: same features as this function.
            unsafe { self.block_x(bytemuck::cast_ref(x)) }
        } else {
            // SAFETY: same features as this function.
            unsafe { self.block(bytemuck::cast_ref(x)) }
        }
    }

    /// An [`Iq1Block`] from its level codes and group words (`qh`, IQ1_S's layout).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn with_scales(lvs: [__m512i; 4], qh: __m128i) -> Iq1Block {
        let ls32 = _mm512_castsi256_si512(_mm256_add_epi32(
            _mm256_slli_epi32(
                _mm256_and_si256(
                    _mm256_srli_epi32(_mm256_cvtepu16_epi32(qh), 12),
                    _mm256_set1_epi32(7),
                ),
                1,
            ),
            _mm256_set1_epi32(1),
        ));
        Iq1Block { lvs, ls32, qh }
    }
}

/// The two IQ2_XXS layouts ([`BlockIQ2XXS`] and its repacked [`BlockIQ2XXSX`]) the
/// multi-column kernel and the tile expander share.
pub(super) trait Iq2Layout: bytemuck::Pod {
    /// `true` for IQ2_XXS_X.
    const REPACKED: bool;
    /// The f16 super-block scale.
    fn d(&self) -> [u8; 2];
}

impl Iq2Layout for BlockIQ2XXS {
    const REPACKED: bool = false;
    fn d(&self) -> [u8; 2] {
        self.d
    }
}

impl Iq2Layout for BlockIQ2XXSX {
    const REPACKED: bool = true;
    fn d(&self) -> [u8; 2] {
        self.d
    }
}

/// [`LEVELS_LO`] and [`LEVELS_HI`] in eight registers: the 16-bit level code of every
/// IQ2_XXS grid index, looked up 64 indices at a time.
pub(super) struct LevelTables {
    lo: [__m512i; 4],
    hi: [__m512i; 4],
}

impl LevelTables {
    /// Loads the tables.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) fn new() -> Self {
        let quarters = |t: &'static [u8; 256]| bytemuck::cast_ref::<_, [[u8; 64]; 4]>(t);
        LevelTables {
            lo: tables64(quarters(&LEVELS_LO)),
            hi: tables64(quarters(&LEVELS_HI)),
        }
    }

    /// The low and high code bytes (levels of elements 0..4 and 4..8) of each lane's grid
    /// index in `idx`: two `vpermi2b` per half of the 256 entries, picked by bit 7.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    #[inline]
    pub(super) fn lookup(&self, idx: __m512i) -> (__m512i, __m512i) {
        let upper = _mm512_movepi8_mask(idx);
        let (l, h) = (&self.lo, &self.hi);
        let lo = _mm512_mask_blend_epi8(
            upper,
            _mm512_permutex2var_epi8(l[0], idx, l[1]),
            _mm512_permutex2var_epi8(l[2], idx, l[3]),
        );
        let hi = _mm512_mask_blend_epi8(
            upper,
            _mm512_permutex2var_epi8(h[0], idx, h[1]),
            _mm512_permutex2var_epi8(h[2], idx, h[3]),
        );
        (lo, hi)
    }
}

/// The IQ2_XXS unpacking tables, held in registers for a whole row (see the module docs),
/// and IQ2_XXS_X's constants.
pub(super) struct Iq2Unpack {
    x: iq2x::Iq2xUnpack,
    levels: LevelTables,
    idx_c: __m512i,
    place: [__m512i; 4],
    unpack: __m512i,
    fields: __m512i,
    masks_c: __m512i,
    values: __m512i,
}

/// One unpacked IQ2_XXS super-block: the grid values of each 64-element quarter (unsigned),
/// each quarter's negation mask (bit j: element j of the quarter is negated) and the eight
/// group scales `2·(a1 >> 28) + 1` (qword g of `ls` holds group g's).
pub(super) struct Iq2Block {
    pub grid: [__m512i; 4],
    pub neg: [u64; 4],
    pub ls: __m512i,
}

impl Iq2Unpack {
    /// Loads the tables.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn new() -> Self {
        Iq2Unpack {
            // SAFETY: same features as this function.
            x: unsafe { iq2x::Iq2xUnpack::new() },
            levels: LevelTables::new(),
            idx_c: table64(&IDX),
            place: tables64(&PLACE),
            unpack: table64(&UNPACK),
            fields: table64(&FIELDS),
            masks_c: table64(&MASKS),
            values: table64(&VALUES),
        }
    }

    /// Unpacks one super-block (exact; see the module docs).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn block(&self, x: &BlockIQ2XXS) -> Iq2Block {
        // SAFETY: a block's 64 code bytes are readable (unaligned load).
        let q = unsafe { _mm512_loadu_si512(x.qs.as_ptr().cast()) };
        let (lo, hi) = self.levels.lookup(_mm512_permutexvar_epi8(self.idx_c, q));
        let neg = iq2_negations(q, self.fields, self.masks_c);
        let ls = _mm512_add_epi64(
            _mm512_slli_epi64(_mm512_srli_epi64(q, 60), 1),
            _mm512_set1_epi64(1),
        );
        let grid = std::array::from_fn(|p| {
            let codes = _mm512_permutex2var_epi8(lo, self.place[p], hi);
            let lv = _mm512_and_si512(
                _mm512_multishift_epi64_epi8(self.unpack, codes),
                _mm512_set1_epi8(3),
            );
            _mm512_shuffle_epi8(self.values, lv)
        });
        Iq2Block { grid, neg, ls }
    }

    /// [`Self::block`] or IQ2_XXS_X's [`iq2x::Iq2xUnpack::block`], by layout.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn unpack<B: Iq2Layout>(&self, x: &B) -> Iq2Block {
        // `cast_ref` is to the block's own type (the branch not taken is removed at compile
        // time)
        if B::REPACKED {
            // SAFETY: same features as this function.
            unsafe { self.x.block(bytemuck::cast_ref(x)) }
        } else {
            // SAFETY: same features as this function.
            unsafe { self.block(bytemuck::cast_ref(x)) }
        }
    }
}

/// IQ2_XXS · Q8_K against several activation columns: each super-block is unpacked once
/// (grid values, sign masks, scales) and used for up to eight columns; per column exact
/// integer sums and the reference's float combine, so each result is the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq2_xxs_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { iq2_multi::<BlockIQ2XXS>(n, w, acts, out) }
}

/// The body of the IQ2 multi-column kernels, for either layout.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
#[inline]
unsafe fn iq2_multi<B: Iq2Layout>(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let un = unsafe { Iq2Unpack::new() };
    let pick = tables64(&IQ2_PAIRS);
    let xs = view::<B>(w);
    for r in crate::simd::column_split(acts.len(), COLS) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let mut ys: [&[BlockQ8K]; COLS] = [&[]; COLS];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8K>(a);
        }
        let ys = &ys[..acts.len()];
        let mut s = [0f32; COLS];
        for (b, x) in xs.iter().enumerate() {
            // SAFETY: same features as this function.
            let Iq2Block { grid, neg, ls } = unsafe { un.unpack(x) };
            let lsv = pick.map(|t| _mm512_permutexvar_epi16(t, ls));
            let dx = f16c!(x.d());
            for (c, y) in ys.iter().enumerate() {
                let y = &y[b];
                let acc = iq2_signed_sums(&grid, &neg, &lsv, y);
                s[c] += dx * y.d() * _mm512_reduce_add_epi32(acc) as f32;
            }
        }
        for (o, sc) in out.iter_mut().zip(s) {
            *o = 0.125 * sc;
        }
    }
}

/// Expands an IQ2_XXS row into the tile layout of [`super::tile_grid`] (signed grid values,
/// group scales, f32 scale, offset correction), byte for byte what the scalar
/// `expand_iq2_xxs` writes. The correction Σ ls·Σ gs is formed with `vpmaddubsw` pair sums
/// and `vpdpwssd` by the group scales (exact).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(super) unsafe fn expand_iq2_xxs_avx512(w: &[u8], out: &mut [u8]) {
    // SAFETY: same features as this function.
    unsafe { expand_iq2::<BlockIQ2XXS>(w, out) }
}

/// The body of the IQ2 expanders, for either layout.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
#[inline]
unsafe fn expand_iq2<B: Iq2Layout>(w: &[u8], out: &mut [u8]) {
    use super::tile_grid::EXPANDED_SB;
    // SAFETY: same features as this function.
    let un = unsafe { Iq2Unpack::new() };
    let pick: [__m512i; 4] = std::array::from_fn(|p| {
        // SAFETY: each PICK16 row is 64 readable bytes (unaligned load).
        unsafe { _mm512_loadu_si512(PICK16[0][p].as_ptr().cast()) }
    });
    let ones = _mm512_set1_epi8(1);
    let xs = view::<B>(w);
    for (b, (x, o)) in xs.iter().zip(out.chunks_exact_mut(EXPANDED_SB)).enumerate() {
        // eight super-blocks (528 bytes) ahead: the expansion computes ~60 cycles per
        // super-block and keeps few loads in flight (iq2 prefill experts 11.72 → 11.28 ms per
        // token, mean of five alternating pairs)
        if let Some(ahead) = xs.get(b + 8) {
            super::prefetch(bytemuck::bytes_of(ahead));
        }
        // SAFETY: same features as this function.
        let Iq2Block { grid, neg, ls } = unsafe { un.unpack(x) };
        let mut corr = _mm512_setzero_si512();
        for p in 0..4 {
            let gs = _mm512_mask_sub_epi8(grid[p], neg[p], _mm512_setzero_si512(), grid[p]);
            let lsv = _mm512_permutexvar_epi16(pick[p], ls);
            corr = super::dpwssd(corr, _mm512_maddubs_epi16(ones, gs), lsv);
            // SAFETY: `o` is EXPANDED_SB (≥ 256) bytes; quarter p is bytes 64p..64p+64.
            unsafe { _mm512_storeu_si512(o[64 * p..].as_mut_ptr().cast(), gs) };
        }
        let ls16 = _mm512_cvtepi64_epi16(ls);
        store_expanded_tail(o, ls16, _mm_setzero_si128(), f16c!(x.d()), corr);
    }
}

/// Bytes 256..328 of an expanded super-block (layout in [`super::tile_grid`]): the eight
/// group scales `ls16` and the delta weights `lsg16` (8 × i16 each), every word twice; the
/// scale `d`; and the offset correction 128·Σ lanes of `corr`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
fn store_expanded_tail(o: &mut [u8], ls16: __m128i, lsg16: __m128i, d: f32, corr: __m512i) {
    let o = &mut o[256..328];
    for (at, v) in [
        (0, _mm_unpacklo_epi16(ls16, ls16)),
        (16, _mm_unpackhi_epi16(ls16, ls16)),
        (40, _mm_unpacklo_epi16(lsg16, lsg16)),
        (56, _mm_unpackhi_epi16(lsg16, lsg16)),
    ] {
        // SAFETY: `o` is 72 bytes; each store is 16 bytes at `at` ≤ 56.
        unsafe { _mm_storeu_si128(o[at..at + 16].as_mut_ptr().cast(), v) };
    }
    o[32..36].copy_from_slice(&d.to_le_bytes());
    o[36..40].copy_from_slice(&(128 * _mm512_reduce_add_epi32(corr)).to_le_bytes());
}

/// Expands an IQ1_S row into the tile layout of [`super::tile_grid`] (values −1/0/+1, group
/// scales, f32 scale, offset correction, and the delta term's ls·sign per group), byte for
/// byte what the scalar `expand_iq1_s` writes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(super) unsafe fn expand_iq1_s_avx512(w: &[u8], out: &mut [u8]) {
    // SAFETY: same features as this function.
    unsafe { expand_iq1::<BlockIQ1S>(w, out) }
}

/// Expands an IQ1_S_X row into the tile layout, byte for byte what the scalar
/// `expand_iq1_s_x` writes (and `expand_iq1_s` for the IQ1_S row it came from).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(super) unsafe fn expand_iq1_s_x_avx512(w: &[u8], out: &mut [u8]) {
    // SAFETY: same features as this function.
    unsafe { expand_iq1::<BlockIQ1SX>(w, out) }
}

/// The body of the IQ1 expanders, for either layout.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
#[inline]
unsafe fn expand_iq1<B: Iq1Layout>(w: &[u8], out: &mut [u8]) {
    use super::tile_grid::EXPANDED_SB;
    // SAFETY: same features as this function.
    let un = unsafe { Iq1Unpack::new() };
    let pick: [__m512i; 4] = std::array::from_fn(|p| {
        // SAFETY: each PICK16 row is 64 readable bytes (unaligned load).
        unsafe { _mm512_loadu_si512(PICK16[1][p].as_ptr().cast()) }
    });
    let ones = _mm512_set1_epi8(1);
    for (x, o) in view::<B>(w).iter().zip(out.chunks_exact_mut(EXPANDED_SB)) {
        // SAFETY: same features as this function.
        let Iq1Block { lvs, ls32, qh } = unsafe { un.unpack(x) };
        let mut corr = _mm512_setzero_si512();
        for p in 0..4 {
            let v = _mm512_sub_epi8(lvs[p], ones);
            let lsv = _mm512_permutexvar_epi16(pick[p], ls32);
            corr = super::dpwssd(corr, _mm512_maddubs_epi16(ones, v), lsv);
            // SAFETY: `o` is EXPANDED_SB (≥ 256) bytes; quarter p is bytes 64p..64p+64.
            unsafe { _mm512_storeu_si512(o[64 * p..].as_mut_ptr().cast(), v) };
        }
        // SAFETY: the features of this function cover the helper.
        let (ls8, sgn) = unsafe { iq1s_scales_signs(qh) };
        let ls16 = _mm256_cvtepi32_epi16(ls8);
        let lsg16 = _mm256_cvtepi32_epi16(_mm256_sign_epi32(ls8, sgn));
        store_expanded_tail(o, ls16, lsg16, f16c!(x.d()), corr);
    }
}

mod iq1gather;
mod iq1m;
pub(super) use iq1gather::{dot_iq1_m_avx512_prepared_entry, dot_iq1_s_avx512_prepared_entry};
mod iq1sx;
pub(super) use iq1m::{
    dot_iq1_m_avx512_entry, dot_iq1_m_avx512_multi_entry, dot_iq1_m_x_avx512_entry,
    dot_iq1_m_x_avx512_multi_entry, dot_iq1_m_x_avx512_rows_entry,
};
use iq1sx::{IQ1X_HALF_OFF, IQ1X_LUT};
mod iq2pairs;
pub(super) use iq2pairs::dot_iq2_xxs_avx512_pairs_entry;
mod iq2x;
pub(super) use iq2x::{
    dot_iq2_xxs_x_avx512_entry, dot_iq2_xxs_x_avx512_multi_entry, dot_iq2_xxs_x_avx512_rows_entry,
    expand_iq2_xxs_x_avx512,
};
