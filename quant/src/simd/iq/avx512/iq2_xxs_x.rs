//! AVX-512 kernels for the repacked IQ2_XXS_X · Q8_K (see `codec::repack`): a child of
//! `iq::avx512`, whose IQ2_XXS kernel bodies these share (the multi-column kernel and the
//! tile expander through [`Iq2Layout`], the one-column and four-row passes through
//! `grid_one!` / `grid_rows4!`).
//!
//! IQ2_XXS_X holds what IQ2_XXS's kernels compute per super-block before they can multiply:
//! the grid magnitudes as 2-bit level codes (a quarter's 64 magnitudes are one `vpermb` of
//! the block's 64 code bytes into that quarter's 64-entry table, which reads only the
//! quarter's two bits of each index; the last quarter's codes are shifted down first), the
//! signs as bits (a quarter's negation mask is one 64-bit load) and the group scales as
//! nibbles (one `vpmultishiftqb` and one `vpternlogq` place all eight, one `vpermw` per
//! quarter spreads them). No gathers, no
//! sign-field arithmetic; the integer sums and the float combine are IQ2_XXS's, so the
//! results are IQ2_XXS's bits.

use super::*;
use crate::blocks::BlockIQ2XXSX;
use crate::codec::repack::IQ2X_LEVELS;

entry!(multi dot_iq2_xxs_x_avx512_multi_entry => dot_iq2_xxs_x_avx512_multi);
entry!(rows dot_iq2_xxs_x_avx512_rows_entry => dot_iq2_xxs_x_avx512_rows);
entry!(dot_iq2_xxs_x_avx512_entry => dot_iq2_xxs_x_avx512);

/// `vpermb` tables: index i (a code byte's low six bits) → the magnitude of the level code
/// at bits 2p, 2p + 1 of i, for quarters p = 0, 1, 2 (quarter 3's codes, bits 6 and 7, are
/// shifted down and looked up in table 0).
static X_VALUES: [[u8; 64]; 3] = [
    bytes64!(|i| IQ2X_LEVELS[i % 4]),
    bytes64!(|i| IQ2X_LEVELS[(i >> 2) % 4]),
    bytes64!(|i| IQ2X_LEVELS[(i >> 4) % 4]),
];

/// `vpmultishiftqb` control on the block's `sc` broadcast to every dword: byte 0 of qword g
/// takes bits 4g − 1 .. 4g + 7 (rotating: qword g holds `sc` twice, so for g = 0 bit 63 is
/// bit 31 of `sc`), which puts group g's nibble at bits 1..5; masking with 0x1E and setting
/// bit 0 leaves qword g = 2·s + 1, the group's scale (where [`Iq2Block::ls`] wants it).
static X_LS_CTRL: [u8; 64] = bytes64!(|i| if i % 8 == 0 {
    ((4 * (i / 8) + 63) % 64) as u8
} else {
    0
});

/// The IQ2_XXS_X unpacking constants, in registers.
pub(super) struct Iq2xUnpack {
    values: [__m512i; 3],
    ls_ctrl: __m512i,
}

impl Iq2xUnpack {
    /// Offsets every value of the tables by 128 (see [`super::iq2_xxs::Iq2Unpack::offset_by_128`]).
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) fn offset_by_128(&mut self) {
        let c80 = _mm512_set1_epi8(0x80u8 as i8);
        for v in &mut self.values {
            *v = _mm512_xor_si512(*v, c80);
        }
    }

    /// Loads the constants.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn new() -> Self {
        // SAFETY: every table is 64 bytes (unaligned loads).
        unsafe {
            Iq2xUnpack {
                values: X_VALUES.map(|t| _mm512_loadu_si512(t.as_ptr().cast())),
                ls_ctrl: _mm512_loadu_si512(X_LS_CTRL.as_ptr().cast()),
            }
        }
    }

    /// Unpacks one IQ2_XXS_X super-block: exactly what [`Iq2Unpack::block`] gives for the
    /// IQ2_XXS block it was repacked from.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn block(&self, x: &BlockIQ2XXSX) -> Iq2Block {
        // SAFETY: a block's 64 code bytes are readable (unaligned load).
        let q = unsafe { _mm512_loadu_si512(x.qs.as_ptr().cast()) };
        // quarter p's codes are bits 2p, 2p + 1 of each byte: `vpermb` reads an index's low
        // six bits, so quarters 0, 1 and 2 index their own tables with the bytes as they
        // are; quarter 3's are moved down by a 16-bit shift (the high byte's bits shifted in
        // above them are ignored by table 0, which reads only bits 0 and 1)
        let v = &self.values;
        let grid = [
            _mm512_permutexvar_epi8(q, v[0]),
            _mm512_permutexvar_epi8(q, v[1]),
            _mm512_permutexvar_epi8(q, v[2]),
            _mm512_permutexvar_epi8(_mm512_srli_epi16::<6>(q), v[0]),
        ];
        let neg =
            std::array::from_fn(|p| u64::from_le_bytes(x.sg[8 * p..8 * p + 8].try_into().unwrap()));
        let sc = _mm512_set1_epi32(i32::from_le_bytes(x.sc));
        let ls = _mm512_ternarylogic_epi64::<0xEA>(
            _mm512_multishift_epi64_epi8(self.ls_ctrl, sc),
            _mm512_set1_epi64(0x1E),
            _mm512_set1_epi64(1),
        );
        Iq2Block { grid, neg, ls }
    }
}

/// The one-column IQ2_XXS_X kernels' constants, in registers.
struct Iq2xDot {
    un: Iq2xUnpack,
    pick: [__m512i; 2],
}

impl Iq2xDot {
    /// Loads the constants.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn new() -> Self {
        Iq2xDot {
            // SAFETY: same features as this function.
            un: unsafe { Iq2xUnpack::new() },
            pick: tables64(&IQ2_PAIRS),
        }
    }

    /// One IQ2_XXS_X super-block's integer sum against `y`, spread over the lanes (see
    /// [`dot_iq2_xxs_x_avx512`]).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums(&self, x: &BlockIQ2XXSX, y: &BlockQ8K) -> __m512i {
        // SAFETY: same features as this function.
        let Iq2Block { grid, neg, ls } = unsafe { self.un.block(x) };
        let sc = self.pick.map(|t| _mm512_permutexvar_epi16(t, ls));
        iq2_signed_sums(&grid, &neg, &sc, y)
    }
}

rows4x4_impl!(group Iq2xDot, BlockIQ2XXSX, 1.0);
rows4x4_impl!(Iq2xDot, BlockIQ2XXSX, 1.0);

/// IQ2_XXS_X · Q8_K with AVX-512, one column (decode's matvec): per super-block
/// [`Iq2xUnpack::block`], then per quarter the activations negated by the sign mask and
/// four-element sums by `vpdpbusd`; two quarters' sums packed to words and multiplied by
/// their group scales by one `vpdpwssd` (`scale_pairs`) — exact integers; four
/// super-blocks' sums reduced by one unpack tree and their float products added in block
/// order, then ×0.125: IQ2_XXS's reference bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq2_xxs_x_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { Iq2xDot::new() };
    0.125 * grid_one!(k, BlockIQ2XXSX, w, a)
}

/// IQ2_XXS_X · Q8_K for several weight rows against one activation row, four rows per pass
/// ([`dot_iq2_xxs_x_avx512`]'s steps for four super-blocks of each row in turn, each row
/// prefetched ahead): the one-row kernel's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq2_xxs_x_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { Iq2xDot::new() };
    grid_rows4!(k, BlockIQ2XXSX, rows, a, out, 0.125);
}

/// IQ2_XXS_X · Q8_K against up to eight activation columns per pass: IQ2_XXS's
/// multi-column kernel on [`Iq2xUnpack::block`]'s unpacking.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
unsafe fn dot_iq2_xxs_x_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { iq2_multi::<BlockIQ2XXSX>(n, w, acts, out) }
}

/// Expands an IQ2_XXS_X row into the tile layout of [`crate::simd::iq::tile`], byte for
/// byte what the scalar `expand_iq2_xxs_x` writes (and `expand_iq2_xxs` for the IQ2_XXS row
/// it came from).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(in crate::simd) unsafe fn expand_iq2_xxs_x_avx512(w: &[u8], out: &mut [u8]) {
    // SAFETY: same features as this function.
    unsafe { expand_iq2::<BlockIQ2XXSX>(w, out) }
}
