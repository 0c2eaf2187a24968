//! IQ2_XXS · Q8_K with AVX-512: the one-column kernel (gathers), the multi-column kernel
//! and the tile expander (in-register lookup, [`Iq2Unpack`]), with the layout trait and
//! sign and scale steps IQ2_XXS_X shares. The decode kernel is `iq2_xxs_rows`.

use super::*;

entry!(multi dot_iq2_xxs_avx512_multi_entry => dot_iq2_xxs_avx512_multi);
entry!(dot_iq2_xxs_avx512_entry => dot_iq2_xxs_avx512);

/// An IQ2_XXS super-block's four quarters' negation masks from its code words `q`: the
/// 7-bit sign fields cut by `vpmultishiftqb` (`fields`), their parity bit from `vpopcntb`
/// (the table `KSIGNS_IQ2XS` holds `i | parity(i) << 7`), and one `vpermb` (`masks_c`)
/// that gathers each quarter's 64 sign bits, read back as four u64 masks.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512bitalg")]
#[inline]
pub(super) fn iq2_negations(q: __m512i, fields: __m512i, masks_c: __m512i) -> [u64; 4] {
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
pub(super) fn iq2_signed_sums(
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
pub(super) struct Iq2Dot {
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
pub(super) unsafe fn dot_iq2_xxs_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { Iq2Dot::new() };
    0.125 * grid_one!(k, BlockIQ2XXS, w, a)
}

/// The two IQ2_XXS layouts ([`BlockIQ2XXS`] and its repacked [`BlockIQ2XXSX`]) the
/// multi-column kernel and the tile expander share.
pub(in crate::simd) trait Iq2Layout: bytemuck::Pod {
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
    x: iq2_xxs_x::Iq2xUnpack,
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
            x: unsafe { iq2_xxs_x::Iq2xUnpack::new() },
            levels: LevelTables::new(),
            idx_c: table64(&IDX),
            place: tables64(&PLACE),
            unpack: table64(&UNPACK),
            fields: table64(&FIELDS),
            masks_c: table64(&MASKS),
            values: table64(&VALUES),
        }
    }

    /// The same tables with every grid value offset by 128 (`⊕ 0x80`; values are below
    /// 128): a block's `grid` then holds v + 128, and negating such a byte (mod 256) gives
    /// 128 − v, the offset code of −v.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) fn offset_by_128(mut self) -> Self {
        let c80 = _mm512_set1_epi8(0x80u8 as i8);
        self.values = _mm512_xor_si512(self.values, c80);
        self.x.offset_by_128();
        self
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

    /// [`Self::block`] or IQ2_XXS_X's [`iq2_xxs_x::Iq2xUnpack::block`], by layout.
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
pub(super) unsafe fn dot_iq2_xxs_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { iq2_multi::<BlockIQ2XXS>(n, w, acts, out) }
}

/// The body of the IQ2 multi-column kernels, for either layout.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
#[inline]
pub(super) unsafe fn iq2_multi<B: Iq2Layout>(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
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
pub(in crate::simd) unsafe fn expand_iq2_xxs_avx512(w: &[u8], out: &mut [u8]) {
    // SAFETY: same features as this function.
    unsafe { expand_iq2::<BlockIQ2XXS>(w, out) }
}

/// The body of the IQ2 expanders, for either layout.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
#[inline]
pub(in crate::simd) unsafe fn expand_iq2<B: Iq2Layout>(w: &[u8], out: &mut [u8]) {
    use crate::simd::iq::tile::EXPANDED_SB;
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
            crate::simd::prefetch(bytemuck::bytes_of(ahead));
        }
        // SAFETY: same features as this function.
        let Iq2Block { grid, neg, ls } = unsafe { un.unpack(x) };
        let mut corr = _mm512_setzero_si512();
        for p in 0..4 {
            let gs = _mm512_mask_sub_epi8(grid[p], neg[p], _mm512_setzero_si512(), grid[p]);
            let lsv = _mm512_permutexvar_epi16(pick[p], ls);
            corr = crate::simd::dpwssd(corr, _mm512_maddubs_epi16(ones, gs), lsv);
            // SAFETY: `o` is EXPANDED_SB (≥ 256) bytes; quarter p is bytes 64p..64p+64.
            unsafe { _mm512_storeu_si512(o[64 * p..].as_mut_ptr().cast(), gs) };
        }
        let ls16 = _mm512_cvtepi64_epi16(ls);
        store_expanded_tail(o, ls16, _mm_setzero_si128(), f16c!(x.d()), corr);
    }
}

/// Up to sixteen IQ2_XXS or IQ2_XXS_X rows (`rows`, whole rows of one length) → their group
/// for the sixteen-row tile (layout in [`crate::simd::iq::group`]): per super-block each row
/// is unpacked in registers as by [`expand_iq2`] (grid values, signs, scales; no offset
/// correction, which the group tile does not use), with value tables offset by 128
/// ([`Iq2Unpack::offset_by_128`]), into an L1 scratch of sixteen 256-byte rows, and the
/// sixteen rows then go through the 16 × 8 dword transpose of the
/// Q8_0 group expander, 32 bytes of every row at a time; the group scales the same way, the
/// row scales converted once. Missing rows are zero rows.
///
/// # Safety
/// The CPU must have the enabled features; `rows` holds 1..=16 rows of equal length and
/// `out` is [`crate::simd::iq::group::group_bytes`] of their element count.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(in crate::simd) unsafe fn group_iq2<B: Iq2Layout>(rows: &[&[u8]], out: &mut [u8]) {
    use crate::simd::iq::group::{D_AT, GROUP_ROWS, GROUP_SB, LS_AT};
    use crate::simd::q8::tile_x16::x86::transpose16x8;
    // SAFETY: same features as this function.
    let un = unsafe { Iq2Unpack::new() }.offset_by_128();
    let nr = rows.len();
    let mut xs: [&[B]; GROUP_ROWS] = [&[]; GROUP_ROWS];
    for (x, w) in xs.iter_mut().zip(rows) {
        *x = view::<B>(w);
    }
    // missing rows: values 0 (codes 0x80), scales 0
    let mut vals = [[0x80u8; 256]; GROUP_ROWS];
    let mut ls = [[0i32; 8]; GROUP_ROWS];
    let mut d = [0f32; GROUP_ROWS];
    for (b, ob) in out.chunks_exact_mut(GROUP_SB).enumerate() {
        for r in 0..nr {
            let x = &xs[r][b];
            if let Some(ahead) = xs[r].get(b + 2) {
                crate::simd::prefetch(bytemuck::bytes_of(ahead));
            }
            // SAFETY: same features as this function.
            let Iq2Block { grid, neg, ls: l } = unsafe { un.unpack(x) };
            for p in 0..4 {
                // the codes are offset (`offset_by_128`): negation gives 128 − v
                let gs = _mm512_mask_sub_epi8(grid[p], neg[p], _mm512_setzero_si512(), grid[p]);
                // SAFETY: quarter p is bytes 64p..64p + 64 of the row's 256 (unaligned store).
                unsafe { _mm512_storeu_si512(vals[r][64 * p..].as_mut_ptr().cast(), gs) };
            }
            // SAFETY: `ls[r]` is 32 writable bytes (unaligned store).
            unsafe { _mm256_storeu_si256(ls[r].as_mut_ptr().cast(), _mm512_cvtepi64_epi32(l)) };
            d[r] = f16c!(x.d());
        }
        // rows p (low half) and p + 8 (high half) of a 32-byte slice of `vals` or `ls`
        for e in 0..9 {
            let a: [__m512i; 8] = std::array::from_fn(|p| {
                // SAFETY: 32 bytes at 32e of a 256-byte row (e < 8), or a row's 32-byte
                // scales (e = 8).
                unsafe {
                    let (lo, hi): (*const u8, *const u8) = if e < 8 {
                        (vals[p][32 * e..].as_ptr(), vals[p + 8][32 * e..].as_ptr())
                    } else {
                        (ls[p].as_ptr().cast(), ls[p + 8].as_ptr().cast())
                    };
                    _mm512_inserti64x4::<1>(
                        _mm512_castsi256_si512(_mm256_loadu_si256(lo.cast())),
                        _mm256_loadu_si256(hi.cast()),
                    )
                }
            });
            let base = if e < 8 { 64 * 8 * e } else { LS_AT };
            for (k, v) in transpose16x8(a).iter().enumerate() {
                // SAFETY: vector k of slice e: bytes base + 64k.. of the super-block (the
                // codes' vectors 8e..8e + 8, or the scales' eight vectors).
                unsafe { _mm512_storeu_si512(ob.as_mut_ptr().add(base + 64 * k).cast(), *v) };
            }
        }
        // SAFETY: the sixteen f32 scales are bytes D_AT..D_AT + 64 (unaligned store).
        unsafe {
            _mm512_storeu_ps(
                ob.as_mut_ptr().add(D_AT).cast(),
                _mm512_loadu_ps(d.as_ptr()),
            )
        };
    }
}

/// Bytes 256..328 of an expanded super-block (layout in [`super::tile_grid`]): the eight
/// group scales `ls16` and the delta weights `lsg16` (8 × i16 each), every word twice; the
/// scale `d`; and the offset correction 128·Σ lanes of `corr`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
pub(super) fn store_expanded_tail(
    o: &mut [u8],
    ls16: __m128i,
    lsg16: __m128i,
    d: f32,
    corr: __m512i,
) {
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
