//! IQ2_XXS · Q8_K with AVX2: the one-row (decode) and multi-column (prompt chunks, MoE
//! experts with several tokens) kernels on the raw layout and on the repacked IQ2_XXS_X,
//! and the group expander of the AVX-VNNI group tile.
//!
//! Per block the eight groups' sign fields are cut out in vectors, their parity bits appended
//! ([`sign_bytes`]), so the only lookups left are the grid rows, each one `vpbroadcastq` from
//! the table and the four of a group joined by blends ([`grid4`]): load ports and any vector
//! port, no shuffle-port inserts ([`grid_row`]). Per group one `vpshufb` spreads each sign
//! byte over its eight elements and one bit test plus 127 makes a `vpsignb` operand
//! ([`sign_mask`]). `vpmaddubsw` forms pair sums, `vpmaddwd` multiplies them by the group
//! scale: exact integers, and the float combine is the reference's, so every kernel returns the
//! reference's bits. Activations come from the Q8_K quantizer, whose codes lie in −127..=127
//! (`vpsignb` of −128 would wrap).

use super::COLS;
use crate::blocks::{view, BlockIQ2XXS, BlockIQ2XXSX, BlockQ8K};
use crate::codec::repack::IQ2X_LEVELS;
use crate::grids::IQ2XXS_GRID;
use crate::simd::{entry, f16c, hsum_i32, hsum_i32x8};
use std::arch::x86_64::*;

entry!(
    dot_iq2_xxs_avx2_entry => dot_iq2_xxs_avx2,
    dot_iq2_xxs_x_avx2_entry => dot_iq2_xxs_x_avx2,
);
entry!(
    multi dot_iq2_xxs_avx2_multi_entry => dot_iq2_xxs_avx2_multi,
    dot_iq2_xxs_x_avx2_multi_entry => dot_iq2_xxs_x_avx2_multi,
);

/// What IQ2_XXS's signed grid values (±8, ±25, ±43) are offset by to be unsigned bytes for
/// `vpmaddubsw` (0..=86: a pair sum is at most 2·86·127, no i16 saturation).
const IQ2_OFFSET: i16 = 43;

/// 43·ls of each group in the i16 lanes of its two Q8_K block sums (lanes 2g, 2g + 1), for
/// the offset's share of a block ([`IQ2_OFFSET`]).
macro_rules! ls43 {
    ($ls:expr) => {{
        let l: [i16; 8] = $ls;
        let o = IQ2_OFFSET;
        _mm256_setr_epi16(
            o * l[0],
            o * l[0],
            o * l[1],
            o * l[1],
            o * l[2],
            o * l[2],
            o * l[3],
            o * l[3],
            o * l[4],
            o * l[4],
            o * l[5],
            o * l[5],
            o * l[6],
            o * l[6],
            o * l[7],
            o * l[7],
        )
    }};
}

/// The eight sign-and-scale words of a block ([`words`]) cut into their four 7-bit sign
/// fields, one a byte, with the parity bit appended as bit 7 (`KSIGNS_IQ2XS[i] = i |
/// parity(i) << 7`): byte k of group g's word holds the signs of elements 8k..8k + 8. All
/// shifts and masks, no table.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn sign_bytes(words: __m256i) -> __m256i {
    // fields 0, 1 at bits 0..14, fields 2, 3 at bits 16..30
    let t = _mm256_or_si256(
        _mm256_and_si256(words, _mm256_set1_epi32(0x3FFF)),
        _mm256_and_si256(_mm256_slli_epi32(words, 2), _mm256_set1_epi32(0x3FFF_0000)),
    );
    // one field a byte
    let z = _mm256_or_si256(
        _mm256_and_si256(t, _mm256_set1_epi32(0x007F_007F)),
        _mm256_and_si256(_mm256_slli_epi32(t, 1), _mm256_set1_epi32(0x7F00_7F00)),
    );
    // bit 0 of each byte: the parity of its (7-bit) byte; the bits shifted in from the next
    // byte only reach bits 4..7, which the folds below bit 0 never read
    let p = _mm256_xor_si256(z, _mm256_srli_epi32(z, 4));
    let p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 2));
    let p = _mm256_xor_si256(p, _mm256_srli_epi32(p, 1));
    _mm256_or_si256(
        z,
        _mm256_and_si256(
            _mm256_slli_epi32(p, 7),
            _mm256_set1_epi32(0x8080_8080u32 as i32),
        ),
    )
}

/// Where group g's sign-and-scale word sits among the dwords of [`words`]' result: groups
/// 0, 1, 4, 5 in the low 128-bit lane, 2, 3, 6, 7 in the high one (one `vshufps`).
const WORD_POS: [i32; 8] = [0, 1, 4, 5, 2, 3, 6, 7];

/// The eight sign-and-scale words of a block (the odd dwords of its 64 code bytes) in one
/// register, in [`WORD_POS`] order.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn words(x: &BlockIQ2XXS) -> __m256i {
    // SAFETY: `qs` is 64 bytes: two unaligned 32-byte loads.
    let (lo, hi) = unsafe {
        (
            _mm256_loadu_ps(x.qs.as_ptr().cast()),
            _mm256_loadu_ps(x.qs.as_ptr().add(32).cast()),
        )
    };
    _mm256_castps_si256(_mm256_shuffle_ps(lo, hi, 0b11_01_11_01))
}

/// A block's sign bytes ([`sign_bytes`] of [`words`]) as two registers with one 128-bit lane
/// in both halves each: the words of groups 0, 1, 4, 5, then of 2, 3, 6, 7, so that one
/// in-lane `vpshufb` reaches all four sign bytes of a group.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn sign_halves(words: __m256i) -> [__m256i; 2] {
    let signs = sign_bytes(words);
    [
        _mm256_permute4x64_epi64(signs, 0b01_00_01_00),
        _mm256_permute4x64_epi64(signs, 0b11_10_11_10),
    ]
}

/// Group `G`'s `vpsignb` operand, from [`sign_halves`]: each of its four sign bytes spread
/// over its eight elements (one `vpshufb`), the element's bit kept and 127 added, so a lane
/// is 127 (keep) where the sign bit is clear and 128..=255, negative, where it is set.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn sign_mask<const G: usize>(halves: &[__m256i; 2]) -> __m256i {
    let pos = WORD_POS[G];
    // sign bytes 0, 1 of the word over the low 128-bit lane, 2, 3 over the high one
    let spread = _mm256_add_epi8(
        _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, //
            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
        ),
        _mm256_set1_epi8(4 * (pos % 4) as i8),
    );
    let e = _mm256_shuffle_epi8(halves[(pos / 4) as usize], spread);
    let bits = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_add_epi8(_mm256_and_si256(e, bits), _mm256_set1_epi8(127))
}

/// Grid row `i` broadcast to all four qword lanes by one `vpbroadcastq` from the table: a
/// load port's work alone. An `asm` load, since LLVM would otherwise rebuild the broadcasts
/// and blends of [`grid4`] into inserts and unpacks on the shuffle port.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn grid_row(i: u8) -> __m256i {
    let v: __m256i;
    // SAFETY: a `u8` indexes the 256-row table (8-byte rows, aligned); the asm only loads
    // into a register.
    unsafe {
        std::arch::asm!(
            "vpbroadcastq {v}, qword ptr [{t} + {i} * 8]",
            v = out(ymm_reg) v,
            t = in(reg) IQ2XXS_GRID.as_ptr(),
            i = in(reg) usize::from(i),
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    v
}

/// One dword broadcast from memory (`vpbroadcastd`, a load port's alone: an `asm` load, as
/// in [`grid_row`], or LLVM forwards a stored vector into shuffle-port broadcasts).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn bcast32(r: &i32) -> __m256i {
    let v: __m256i;
    // SAFETY: `r` is a valid, aligned 4-byte read; the asm only loads into a register.
    unsafe {
        std::arch::asm!(
            "vpbroadcastd {v}, dword ptr [{p}]",
            v = out(ymm_reg) v,
            p = in(reg) r as *const i32,
            options(pure, readonly, nostack, preserves_flags),
        );
    }
    v
}

/// Group `G`'s four grid rows (row k in qword k): [`grid_row`] each, joined by three blends
/// (no shuffle-port work, where `_mm256_set_epi64x` costs three shuffles). The index bytes
/// are read one by one from memory (volatile: otherwise LLVM takes some out of the vector
/// that loaded the block, with shuffle-port `vpextrb`s).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn grid4<const G: usize>(x: &BlockIQ2XXS) -> __m256i {
    let q = &x.qs[8 * G..8 * G + 4];
    // SAFETY: in-bounds byte reads of a reference.
    let r = [0, 1, 2, 3].map(|k| grid_row(unsafe { std::ptr::read_volatile(&q[k]) }));
    _mm256_blend_epi32(
        _mm256_blend_epi32(r[0], r[1], 0b0000_1100),
        _mm256_blend_epi32(r[2], r[3], 0b1100_0000),
        0b1111_0000,
    )
}

/// Calls `$m!(G)` for the eight groups, `G` a constant each time (the unrolled group loop).
macro_rules! groups8 {
    ($m:ident) => {
        $m!(0);
        $m!(1);
        $m!(2);
        $m!(3);
        $m!(4);
        $m!(5);
        $m!(6);
        $m!(7);
    };
}

/// One IQ2_XXS block · its Q8_K block with AVX2: `d(x)·d(y)·Σ`, the reference's term of the
/// block (the row's sum is these terms in order, × 0.125). The sign bytes and the scales
/// 2·(a1 >> 28) + 1 of all eight groups are cut out in vectors; per group the grid rows
/// ([`grid4`]), the activations signed by [`sign_mask`] (`vpsignb`), `vpmaddubsw`,
/// `vpmaddwd` by the group scale (broadcast from a stack copy: a load, not a shuffle) and an
/// add.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn block(x: &BlockIQ2XXS, y: &BlockQ8K) -> f32 {
    let words = words(x);
    let halves = sign_halves(words);
    // 2·(a1 >> 28) + 1 in both i16 halves of each dword
    let ls = _mm256_or_si256(
        _mm256_slli_epi32(_mm256_srli_epi32(words, 28), 1),
        _mm256_set1_epi32(1),
    );
    let ls = _mm256_or_si256(ls, _mm256_slli_epi32(ls, 16));
    let mut lsa = [0i32; 8];
    // SAFETY: `lsa` is 32 writable bytes (unaligned store).
    unsafe { _mm256_storeu_si256(lsa.as_mut_ptr().cast(), ls) };
    let mut acc = _mm256_setzero_si256();
    macro_rules! group {
        ($g:literal) => {{
            let sy = _mm256_sign_epi8(y32!(y, $g), sign_mask::<$g>(&halves));
            let scale = bcast32(&lsa[WORD_POS[$g] as usize]);
            // grid bytes ≤ 43 are unsigned: |pair| ≤ 2·43·127, no i16 overflow
            let p = _mm256_madd_epi16(_mm256_maddubs_epi16(grid4::<$g>(x), sy), scale);
            acc = _mm256_add_epi32(acc, p);
        }};
    }
    groups8!(group);
    // SAFETY: AVX2 is enabled for this function.
    let bsum = unsafe { hsum_i32(acc) };
    f16c!(x.d) * y.d() * bsum as f32
}

/// IQ2_XXS · Q8_K with AVX2, one row: [`block`] per block.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq2_xxs_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ2XXS>(w).iter().zip(view::<BlockQ8K>(a)) {
        s += block(x, y);
    }
    0.125 * s
}

/// An IQ2_XXS block unpacked for [`dot_iq2_xxs_avx2_multi`]: group g's 32 signed grid
/// values + [`IQ2_OFFSET`] as unsigned bytes (`vpsignb` of the rows by [`sign_mask`], then
/// the offset), and its scale 2·s + 1.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn unpack(x: &BlockIQ2XXS) -> ([__m256i; 8], [i16; 8]) {
    let halves = sign_halves(words(x));
    let mut wv = [_mm256_setzero_si256(); 8];
    macro_rules! group {
        ($g:literal) => {
            wv[$g] = _mm256_add_epi8(
                _mm256_sign_epi8(grid4::<$g>(x), sign_mask::<$g>(&halves)),
                _mm256_set1_epi8(IQ2_OFFSET as i8),
            );
        };
    }
    groups8!(group);
    let ls = std::array::from_fn(|g| (2 * (x.qs[8 * g + 7] >> 4) + 1) as i16);
    (wv, ls)
}

/// IQ2_XXS · Q8_K for several activation columns with AVX2: each block is unpacked once per
/// pass of up to [`COLS`] columns — the grid rows signed and offset ([`unpack`]) — and then
/// costs one `vpmaddubsw`, one `vpmaddwd` by the group scale and one add per group and column.
/// The offset's share, 43·Σ ls·Σy, is taken off per block and column with one `vpmaddwd` of the
/// Q8_K block sums by 43·ls. Eight columns' block sums are then reduced together
/// ([`hsum_i32x8`]) and their float combine runs in one vector, lane by lane
/// [`dot_iq2_xxs_avx2`]'s: the block's integer sum is the reference's exactly, and every column
/// gets the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq2_xxs_avx2_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features.
    unsafe { multi::<BlockIQ2XXS>(n, w, acts, out) }
}

/// [`dot_iq2_xxs_avx2_multi`] on IQ2_XXS_X rows (their unpack: [`Avx2Iq2`]): the same sums,
/// IQ2_XXS's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq2_xxs_x_avx2_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features.
    unsafe { multi::<BlockIQ2XXSX>(n, w, acts, out) }
}

/// The multi-column kernel's body for either layout.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn multi<B: Avx2Iq2>(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<B>(w);
    for r in crate::simd::column_split(acts.len(), COLS) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let mut ys: [&[BlockQ8K]; COLS] = [&[]; COLS];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8K>(a);
        }
        let ys = &ys[..acts.len()];
        // column c's sum in lane c % 8 of s[c / 8]
        let mut s = [_mm256_setzero_ps(); COLS / 8];
        for (b, x) in xs.iter().enumerate() {
            // SAFETY: same features.
            let (wv, ls) = unsafe { x.unpack() };
            let ls43 = ls43!(ls);
            let dx = _mm256_set1_ps(f16c!(x.d()));
            for (ys8, s8) in ys.chunks(8).zip(s.iter_mut()) {
                let mut sums = [_mm256_setzero_si256(); 8];
                let mut yd = [0f32; 8];
                for ((y, acc), d) in ys8.iter().zip(sums.iter_mut()).zip(yd.iter_mut()) {
                    let y = &y[b];
                    *d = y.d();
                    // SAFETY: a Q8_K block's 16 block sums are 32 bytes (unaligned load).
                    let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
                    let mut a =
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(bs, ls43));
                    for (g, wg) in wv.iter().enumerate() {
                        let p = _mm256_maddubs_epi16(*wg, y32!(y, g));
                        a = _mm256_add_epi32(a, _mm256_madd_epi16(p, _mm256_set1_epi16(ls[g])));
                    }
                    *acc = a;
                }
                let bsum = _mm256_cvtepi32_ps(hsum_i32x8(&sums));
                // SAFETY: `yd` is 32 readable bytes (unaligned load).
                let yd = unsafe { _mm256_loadu_ps(yd.as_ptr()) };
                *s8 = _mm256_add_ps(*s8, _mm256_mul_ps(_mm256_mul_ps(dx, yd), bsum));
            }
        }
        let mut lanes = [0f32; COLS];
        for (l, v) in lanes.chunks_exact_mut(8).zip(s) {
            // SAFETY: `l` has room for 8 f32.
            unsafe { _mm256_storeu_ps(l.as_mut_ptr(), v) };
        }
        for (o, sc) in out.iter_mut().zip(lanes) {
            *o = 0.125 * sc;
        }
    }
}

/// Sixteen IQ2_XXS or IQ2_XXS_X rows → their group for the AVX-VNNI group tile (the bytes
/// of [`crate::simd::iq::group::expand_group_iq2_xxs`] / `_x`): per super-block each row is unpacked
/// as for [`dot_iq2_xxs_avx2_multi`] ([`unpack`]: signed values + 43), moved to the group's
/// offset (+ 85 more: v ⊕ 0x80 = v + 128); the AVX2 expanders' loop ([`super::expand_group`])
/// writes the group.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; `rows` holds 1..=16 rows of `B` of equal length
/// and `out` is [`crate::simd::iq::group::group_bytes`] of their element count.
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::simd) unsafe fn group_iq2_xxs<B: Avx2Iq2>(rows: &[&[u8]], out: &mut [u8]) {
    let to_group = _mm256_set1_epi8((128 - IQ2_OFFSET) as i8);
    let block = |x: &B| {
        // SAFETY: same features.
        let (wv, l) = unsafe { x.unpack() };
        let mut ls = [0i32; 16];
        for (o, &v) in ls.iter_mut().zip(&l) {
            *o = i32::from(v);
        }
        (wv.map(|v| _mm256_add_epi8(v, to_group)), ls, f16c!(x.d()))
    };
    // SAFETY: the caller's guarantees.
    unsafe { super::expand_group(rows, out, crate::simd::iq::group::SCALES_32, block) }
}

/// The two IQ2_XXS layouts ([`BlockIQ2XXS`], the repacked [`BlockIQ2XXSX`]) as the
/// multi-column kernel and the group expander take them: a block unpacked into the same
/// registers (group g's signed values + [`IQ2_OFFSET`], the scales 2·s + 1).
pub(in crate::simd) trait Avx2Iq2: bytemuck::Pod {
    /// The block unpacked.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    unsafe fn unpack(&self) -> ([__m256i; 8], [i16; 8]);
    /// The f16 super-block scale.
    fn d(&self) -> [u8; 2];
}

impl Avx2Iq2 for BlockIQ2XXS {
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn unpack(&self) -> ([__m256i; 8], [i16; 8]) {
        unpack(self)
    }
    fn d(&self) -> [u8; 2] {
        self.d
    }
}

impl Avx2Iq2 for BlockIQ2XXSX {
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn unpack(&self) -> ([__m256i; 8], [i16; 8]) {
        unpack_x(self)
    }
    fn d(&self) -> [u8; 2] {
        self.d
    }
}

/// [`IQ2X_LEVELS`] in each 128-bit lane's first four bytes (a `vpshufb` table; zero above).
static X_LEVELS: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        if i % 16 < 4 {
            t[i] = IQ2X_LEVELS[i % 16];
        }
        i += 1;
    }
    t
};

/// IQ2_XXS_X's block code bytes, for [`x_group`].
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn x_codes(x: &BlockIQ2XXSX) -> [__m256i; 2] {
    // SAFETY: 64 code bytes (two unaligned loads of 32).
    unsafe {
        [
            _mm256_loadu_si256(x.qs.as_ptr().cast()),
            _mm256_loadu_si256(x.qs.as_ptr().add(32).cast()),
        ]
    }
}

/// IQ2_XXS_X's group `g` of block `x` (code bytes `q`): the 2-bit level codes (a shift and a
/// mask) become magnitudes 8, 25, 43 by `vpshufb`, and the group's 32 sign bits become
/// bytes that are negative exactly where the element is, the `vpsignb` operand (broadcast,
/// spread a byte per 8 lanes, the lane's bit masked and 127 added).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn x_group(x: &BlockIQ2XXSX, q: &[__m256i; 2], g: usize) -> (__m256i, __m256i) {
    let (p, h) = (g / 2, g % 2);
    let lv = _mm256_and_si256(
        _mm256_srl_epi16(q[h], _mm_cvtsi32_si128(2 * p as i32)),
        _mm256_set1_epi8(3),
    );
    // SAFETY: the table is 32 bytes (unaligned load).
    let levels = unsafe { _mm256_loadu_si256(X_LEVELS.as_ptr().cast()) };
    let mag = _mm256_shuffle_epi8(levels, lv);
    // byte i takes sign byte i/8 of the group; bit i mod 8 of it is element i's
    let spread = _mm256_setr_epi64x(
        0,
        0x0101_0101_0101_0101,
        0x0202_0202_0202_0202,
        0x0303_0303_0303_0303,
    );
    let bits = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let sg = u32::from_le_bytes(x.sg[4 * g..4 * g + 4].try_into().unwrap());
    let spread = _mm256_shuffle_epi8(_mm256_set1_epi32(sg as i32), spread);
    // the element's bit (0 or 1 << i mod 8) + 127: 127 where the sign is clear, 128..=255
    // (negative as i8) where it is set: a `vpsignb` operand in two operations
    let set = _mm256_and_si256(spread, bits);
    (mag, _mm256_add_epi8(set, _mm256_set1_epi8(127)))
}

/// IQ2_XXS_X's eight group scales 2·s + 1, each in both i16 halves of a dword: the
/// `vpmaddwd` operands, one [`bcast32`] load each (a general register and a shuffle-port
/// broadcast per group otherwise).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn x_scale_pairs(x: &BlockIQ2XXSX) -> [i32; 8] {
    let nib = _mm256_and_si256(
        _mm256_srlv_epi32(
            _mm256_set1_epi32(i32::from_le_bytes(x.sc)),
            _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28),
        ),
        _mm256_set1_epi32(15),
    );
    let ls = _mm256_or_si256(_mm256_slli_epi32::<1>(nib), _mm256_set1_epi32(1));
    let mut pairs = [0i32; 8];
    // SAFETY: `pairs` is 32 writable bytes (unaligned store).
    unsafe {
        _mm256_storeu_si256(
            pairs.as_mut_ptr().cast(),
            _mm256_or_si256(ls, _mm256_slli_epi32::<16>(ls)),
        )
    };
    pairs
}

/// One IQ2_XXS_X super-block against `y`: eight i32 lanes adding up to Σ ls·Σ w·y, per
/// group [`x_group`]'s magnitudes and signs, the activations signed by `vpsignb`,
/// `vpmaddubsw` and `vpmaddwd` by the group scale.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn x_sums(x: &BlockIQ2XXSX, y: &BlockQ8K) -> __m256i {
    let q = x_codes(x);
    let pairs = x_scale_pairs(x);
    let mut acc = _mm256_setzero_si256();
    for g in 0..8 {
        let (mag, sign) = x_group(x, &q, g);
        let sy = _mm256_sign_epi8(y32!(y, g), sign);
        let ls = bcast32(&pairs[g]);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(mag, sy), ls));
    }
    acc
}

impl super::rows::GridRows for BlockIQ2XXSX {
    const INNER: f32 = 1.0;
    const OUTER: f32 = 0.125;
    type Act = ();

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn prepare(_y: &BlockQ8K) {}

    /// The one-row kernel's group steps ([`x_sums`]).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn sums(&self, y: &BlockQ8K, _act: &()) -> __m256i {
        x_sums(self, y)
    }

    fn d(&self) -> i16 {
        i16::from_le_bytes(self.d)
    }
}

/// IQ2_XXS_X · Q8_K with AVX2, one row: per group the magnitudes and signs of [`x_group`],
/// the activations signed by `vpsignb`, then the raw layout's integer steps and float combine:
/// IQ2_XXS's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq2_xxs_x_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ2XXSX>(w).iter().zip(view::<BlockQ8K>(a)) {
        let acc = x_sums(x, y);
        // SAFETY: AVX2 is enabled for this function.
        let bsum = unsafe { hsum_i32(acc) };
        s += f16c!(x.d) * y.d() * bsum as f32;
    }
    0.125 * s
}

/// An IQ2_XXS_X block unpacked as [`unpack`] unpacks IQ2_XXS: [`x_group`]'s magnitudes signed
/// by `vpsignb`, plus the offset.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn unpack_x(x: &BlockIQ2XXSX) -> ([__m256i; 8], [i16; 8]) {
    let q = x_codes(x);
    let wv = std::array::from_fn(|g| {
        let (mag, sign) = x_group(x, &q, g);
        _mm256_add_epi8(
            _mm256_sign_epi8(mag, sign),
            _mm256_set1_epi8(IQ2_OFFSET as i8),
        )
    });
    // the scale pairs' low halves (one decode of the nibbles for every kernel here)
    let ls = x_scale_pairs(x).map(|p| p as i16);
    (wv, ls)
}
