//! AVX2 kernels for the grid (I-)quants against Q8_K activations: IQ2_XXS and its repacked
//! IQ2_XXS_X (their own child, [`iq2_xxs`]), IQ1_S, IQ1_M, and the repacked IQ1_S_X and
//! IQ1_M_X (no grid: their level codes are stored, see `codec::repack`).
//!
//! Per 32-element group the four 8-byte grid rows are gathered with scalar loads into one
//! vector; signs are applied to the activations with `vpsignb` (IQ1 from the signed grid
//! itself, the `_X` layouts from their stored sign bits), `vpmaddubsw` forms pair sums and
//! `vpmaddwd` multiplies them by the group scale. All of that is exact integer arithmetic,
//! and the float combine is the reference's, so each kernel returns the reference's bits.
//! Activations come from the Q8_K quantizer, whose codes lie in −127..=127 (`vpsignb` of
//! −128 would wrap).

use crate::blocks::{le_u16, view, BlockIQ1M, BlockIQ1MX, BlockIQ1S, BlockIQ1SX, BlockQ8K};
use crate::codec::iquants::{iq1m_d_bits, iq1m_d_of, iq1m_scales, iq1m_scales_of};
use crate::codec::repack::{iq1mx_neg, iq1sx_group};
use crate::grids::IQ1S_GRID;
use crate::simd::{entry, f16c, hsum_i32, hsum_i32x8};
use std::arch::x86_64::*;

entry!(
    dot_iq1_s_avx2_entry => dot_iq1_s_avx2,
    dot_iq1_s_x_avx2_entry => dot_iq1_s_x_avx2,
    dot_iq1_m_avx2_entry => dot_iq1_m_avx2,
    dot_iq1_m_x_avx2_entry => dot_iq1_m_x_avx2,
);
entry!(
    multi dot_iq1_s_avx2_multi_entry => dot_iq1_s_avx2_multi,
    dot_iq1_s_x_avx2_multi_entry => dot_iq1_s_x_avx2_multi,
    dot_iq1_m_x_avx2_multi_entry => dot_iq1_m_x_avx2_multi,
    dot_iq1_m_avx2_multi_entry => dot_iq1_m_avx2_multi,
);

/// Activation columns per pass of the multi-column kernels (IQ2_XXS's in [`iq2_xxs`]): as many
/// as the callers hand over at once (an MoE expert's tokens in a 512-token chunk, about
/// twelve), so that a block is unpacked once for all of them.
const COLS: usize = 16;

/// Four 8-byte rows as one vector, row 0 in the low bytes (a macro so that the intrinsic is
/// inlined into the AVX2 kernel; see `f16c!`).
macro_rules! rows4 {
    ($r0:expr, $r1:expr, $r2:expr, $r3:expr $(,)?) => {
        _mm256_set_epi64x($r3 as i64, $r2 as i64, $r1 as i64, $r0 as i64)
    };
}

/// 32 activation codes of group `g` of a Q8_K block.
macro_rules! y32 {
    ($y:expr, $g:expr) => {{
        let (y, g): (&BlockQ8K, usize) = ($y, $g);
        assert!(g < 8);
        // SAFETY: a Q8_K block has 256 codes, so bytes 32g..32g+32 (g < 8, checked) are
        // inside it (unaligned load).
        unsafe { _mm256_loadu_si256(y.qs.as_ptr().add(32 * g).cast()) }
    }};
}

mod rows;
pub(in crate::simd) use rows::{
    dot_iq1_m_avx2_rows_entry, dot_iq1_m_x_avx2_rows_entry, dot_iq1_s_avx2_rows_entry,
    dot_iq1_s_x_avx2_rows_entry, dot_iq2_xxs_x_avx2_rows_entry,
};
mod iq2_xxs;
pub(in crate::simd) use iq2_xxs::{
    dot_iq2_xxs_avx2_entry, dot_iq2_xxs_avx2_multi_entry, dot_iq2_xxs_x_avx2_entry,
    dot_iq2_xxs_x_avx2_multi_entry, group_iq2_xxs,
};

/// IQ1_S · Q8_K with AVX2 (the delta term comes from the activation block sums, in scalar
/// code as in the reference).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_s_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let ones8 = _mm256_set1_epi8(1);
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ1S>(w).iter().zip(view::<BlockQ8K>(a)) {
        let mut acc = _mm256_setzero_si256();
        let mut sumi1 = 0i32;
        for g in 0..8 {
            let h = le_u16(&x.qh, g);
            let ls = (2 * ((h >> 12) & 7) + 1) as i32;
            let idx = |k: usize| x.qs[4 * g + k] as usize | ((((h >> (3 * k)) & 7) as usize) << 8);
            let grid = rows4!(
                IQ1S_GRID[idx(0)],
                IQ1S_GRID[idx(1)],
                IQ1S_GRID[idx(2)],
                IQ1S_GRID[idx(3)],
            );
            // grid bytes are −1, 0 or +1: y·grid, then pairs summed by a ×1 `vpmaddubsw`
            let gy = _mm256_sign_epi8(y32!(y, g), grid);
            let p = _mm256_madd_epi16(
                _mm256_maddubs_epi16(ones8, gy),
                _mm256_set1_epi16(ls as i16),
            );
            acc = _mm256_add_epi32(acc, p);
            let sgn = if h & 0x8000 != 0 { -1 } else { 1 };
            sumi1 += ls * sgn * (y.bsum(2 * g) as i32 + y.bsum(2 * g + 1) as i32);
        }
        // SAFETY: AVX2 is enabled for this function.
        let sumi = unsafe { hsum_i32(acc) };
        s += f16c!(x.d) * y.d() * (sumi as f32 + 0.125 * sumi1 as f32);
    }
    s
}

/// One IQ1_S block unpacked for [`dot_iq1_s_avx2_multi`]: per group the grid values + 1
/// (0, 1 or 2: unsigned bytes for `vpmaddubsw`) and the scale 2·s + 1, and the two i16
/// vectors that `vpmaddwd` multiplies a Q8_K block's sixteen block sums by — group g's
/// scale, and its scale signed by the delta bit, in lanes 2g and 2g + 1.
pub(in crate::simd) struct Iq1sBlock {
    w: [__m256i; 8],
    ls: [i16; 8],
    /// The scales signed by the groups' delta bits.
    signed: [i16; 8],
    ls2: __m256i,
    signed2: __m256i,
}

/// The two IQ1_S layouts ([`BlockIQ1S`], the repacked [`BlockIQ1SX`]) as the multi-column
/// kernel takes them: a block unpacked into the same [`Iq1sBlock`].
pub(in crate::simd) trait Iq1sUnpack: bytemuck::Pod {
    /// The block unpacked.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    unsafe fn unpack(&self) -> Iq1sBlock;
    /// The f16 super-block scale.
    fn d(&self) -> [u8; 2];
}

impl Iq1sUnpack for BlockIQ1S {
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn unpack(&self) -> Iq1sBlock {
        iq1_s_unpack(self)
    }
    fn d(&self) -> [u8; 2] {
        self.d
    }
}

impl Iq1sUnpack for BlockIQ1SX {
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn unpack(&self) -> Iq1sBlock {
        iq1_s_x_unpack(self)
    }
    fn d(&self) -> [u8; 2] {
        self.d
    }
}

/// [`Iq1sBlock`]'s scale fields from the eight group scales `ls` and the same signed by the
/// groups' delta bits (i16 lanes).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn iq1_s_scales(w: [__m256i; 8], ls: __m128i, signed: __m128i) -> Iq1sBlock {
    let dup = |v: __m128i| {
        let v = _mm256_cvtepu16_epi32(v);
        _mm256_or_si256(v, _mm256_slli_epi32(v, 16))
    };
    let (mut lsa, mut sga) = ([0i16; 8], [0i16; 8]);
    // SAFETY: both arrays are 16 writable bytes (unaligned stores).
    unsafe {
        _mm_storeu_si128(lsa.as_mut_ptr().cast(), ls);
        _mm_storeu_si128(sga.as_mut_ptr().cast(), signed);
    }
    Iq1sBlock {
        w,
        ls: lsa,
        signed: sga,
        ls2: dup(ls),
        signed2: dup(signed),
    }
}

/// An IQ1_S block's eight group scales 2·s + 1 (from bits 12–14 of its `qh` words) and the
/// same signed by the groups' delta bits, as i16 lanes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn iq1_s_group_scales(x: &BlockIQ1S) -> (__m128i, __m128i) {
    // SAFETY: `qh` is 16 bytes (unaligned load).
    let qh = unsafe { _mm_loadu_si128(x.qh.as_ptr().cast()) };
    let ls = _mm_or_si128(
        _mm_and_si128(_mm_srli_epi16::<11>(qh), _mm_set1_epi16(14)),
        _mm_set1_epi16(1),
    );
    // the delta's sign is the word's top bit, which `vpsignw` reads (`| 1`: never zero)
    let signed = _mm_sign_epi16(ls, _mm_or_si128(qh, _mm_set1_epi16(1)));
    (ls, signed)
}

/// Unpacks one IQ1_S block ([`Iq1sBlock`]): the levels gathered as the rows kernel gathers
/// them ([`rows::iq1_s_levels`]).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn iq1_s_unpack(x: &BlockIQ1S) -> Iq1sBlock {
    let (ls, signed) = iq1_s_group_scales(x);
    iq1_s_scales(rows::iq1_s_levels(x), ls, signed)
}

/// Unpacks one IQ1_S_X block into IQ1_S's [`Iq1sBlock`]: group g's level codes l = v + 1
/// (code bytes 8g..8g + 8, half-major: one qword per 2-bit cut by `vpsrlvq`, a mask and one
/// `vpermd` into element order, as [`dot_iq1_s_x_avx2`] cuts them) are the grid values + 1,
/// and the scales and delta signs come from the stored nibbles.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn iq1_s_x_unpack(x: &BlockIQ1SX) -> Iq1sBlock {
    let w = std::array::from_fn(|g| iq1_x_codes(&x.qs, g));
    let mut ls = [0i16; 8];
    let mut signed = [0i16; 8];
    for g in 0..8 {
        let (l, neg) = iq1sx_group(x, g);
        ls[g] = l as i16;
        signed[g] = if neg { -l as i16 } else { l as i16 };
    }
    // SAFETY: both arrays are 16 readable bytes (unaligned loads).
    let (ls, signed) = unsafe {
        (
            _mm_loadu_si128(ls.as_ptr().cast()),
            _mm_loadu_si128(signed.as_ptr().cast()),
        )
    };
    iq1_s_scales(w, ls, signed)
}

/// Group `g`'s 32 level codes of IQ1_S_X or IQ1_M_X code bytes `qs`, in element order: the
/// group's bytes 8g..8g + 8 (halves 2g, 2g + 1, half-major) broadcast, qword p takes 2-bit cut
/// p (`vpsrlvq` and a mask; byte 8p + 4d + r: element 32g + 16d + 4p + r), and one `vpermd`
/// puts them in element order (dword 4d + p from dword 2p + d).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn iq1_x_codes(qs: &[u8; 64], g: usize) -> __m256i {
    let q8 = u64::from_le_bytes(qs[8 * g..8 * g + 8].try_into().unwrap());
    let shifts = _mm256_setr_epi64x(0, 2, 4, 6);
    let cuts = _mm256_and_si256(
        _mm256_srlv_epi64(_mm256_set1_epi64x(q8 as i64), shifts),
        _mm256_set1_epi8(3),
    );
    _mm256_permutevar8x32_epi32(cuts, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7))
}

/// IQ1_S · Q8_K for several activation columns with AVX2: each block is unpacked once per
/// pass of up to [`COLS`] columns ([`iq1_s_unpack`]: grid values + 1, scales, signed
/// scales), and then costs one `vpmaddubsw`, one `vpmaddwd` by the group scale and one add
/// per group and column. The offset's share, Σ ls·Σy, and the delta term, Σ ±ls·Σy, are one
/// `vpmaddwd` each of the column's Q8_K block sums. Eight columns' integer sums are reduced
/// together ([`hsum_i32x8`]) and the float combine — `d·dy·(Σ + 0.125·Σ₁)`, separate
/// roundings — runs lane by lane in the reference's order: every column gets
/// [`dot_iq1_s_avx2`]'s bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_s_avx2_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features.
    unsafe { iq1_s_multi::<BlockIQ1S>(n, w, acts, out) }
}

/// [`dot_iq1_s_avx2_multi`] on IQ1_S_X rows (their unpack: [`Iq1sUnpack`]): the same sums,
/// IQ1_S's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_s_x_avx2_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features.
    unsafe { iq1_s_multi::<BlockIQ1SX>(n, w, acts, out) }
}

/// The IQ1_S multi-column kernel's body for either layout.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq1_s_multi<B: Iq1sUnpack>(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<B>(w);
    let eighth = _mm256_set1_ps(0.125);
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
            let u = unsafe { x.unpack() };
            let dx = _mm256_set1_ps(f16c!(x.d()));
            for (ys8, s8) in ys.chunks(8).zip(s.iter_mut()) {
                let mut sums = [_mm256_setzero_si256(); 8];
                let mut deltas = [_mm256_setzero_si256(); 8];
                let mut yd = [0f32; 8];
                for (((y, acc), delta), d) in
                    ys8.iter().zip(&mut sums).zip(&mut deltas).zip(&mut yd)
                {
                    let y = &y[b];
                    *d = y.d();
                    // SAFETY: a Q8_K block's 16 block sums are 32 bytes (unaligned load).
                    let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
                    *delta = _mm256_madd_epi16(bs, u.signed2);
                    let mut a =
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(bs, u.ls2));
                    for (g, (wg, &l)) in u.w.iter().zip(&u.ls).enumerate() {
                        let p = _mm256_maddubs_epi16(*wg, y32!(y, g));
                        a = _mm256_add_epi32(a, _mm256_madd_epi16(p, _mm256_set1_epi16(l)));
                    }
                    *acc = a;
                }
                let sumi = _mm256_cvtepi32_ps(hsum_i32x8(&sums));
                let sumi1 = _mm256_cvtepi32_ps(hsum_i32x8(&deltas));
                // SAFETY: `yd` is 32 readable bytes (unaligned load).
                let yd = unsafe { _mm256_loadu_ps(yd.as_ptr()) };
                let inner = _mm256_add_ps(sumi, _mm256_mul_ps(eighth, sumi1));
                *s8 = _mm256_add_ps(*s8, _mm256_mul_ps(_mm256_mul_ps(dx, yd), inner));
            }
        }
        let mut lanes = [0f32; COLS];
        for (l, v) in lanes.chunks_exact_mut(8).zip(s) {
            // SAFETY: `l` has room for 8 f32.
            unsafe { _mm256_storeu_ps(l.as_mut_ptr(), v) };
        }
        out.copy_from_slice(&lanes[..out.len()]);
    }
}

/// IQ1_M · Q8_K for several activation columns with AVX2. The delta is folded into the
/// weights: per element 8·grid + δ (−9..9, δ = ∓1 by the sub-group's sign bit), + 9 to be
/// unsigned for `vpmaddubsw` (0..18). So one integer sum S = 8·Σ ls·grid·y + Σ ls·δ·y =
/// 8·sumi + sumi1 per column and block, with the offset's share 9·Σ ls·Σy taken off by one
/// `vpmaddwd` of the Q8_K block sums by 9·ls (the scales are per 16 elements, as the block
/// sums). |S| < 2²³, so `S as f32 · 0.125` is S/8 exactly, and so is the reference's
/// `sumi as f32 + 0.125·sumi1 as f32` (both terms exact, their sum representable): the float
/// combine `d·dy·(S/8)` runs lane by lane on eight columns with the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_m_avx2_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features.
    unsafe { iq1_m_multi::<BlockIQ1M>(n, w, acts, out) }
}

/// [`dot_iq1_m_avx2_multi`] on IQ1_M_X rows (their groups: [`Iq1mGroups`]): the same sums,
/// IQ1_M's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_m_x_avx2_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features.
    unsafe { iq1_m_multi::<BlockIQ1MX>(n, w, acts, out) }
}

/// The two IQ1_M layouts ([`BlockIQ1M`], the repacked [`BlockIQ1MX`]) as the multi-column
/// kernel takes them: per group the unsigned weights 8·grid + δ + 9 (0..18), and the packed
/// scales (IQ1_M's in both).
pub(in crate::simd) trait Iq1mGroups: bytemuck::Pod {
    /// The eight groups' weights, element j of group g in byte j of register g.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    unsafe fn weights(&self) -> [__m256i; 8];
    /// The packed scales (3-bit half scales; the super-block scale is cut from them).
    fn scales(&self) -> &[u8; 8];
}

impl Iq1mGroups for BlockIQ1M {
    /// Gathered whole ([`rows::iq1m_weights`]).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn weights(&self) -> [__m256i; 8] {
        rows::iq1m_weights(self)
    }
    fn scales(&self) -> &[u8; 8] {
        &self.scales
    }
}

impl Iq1mGroups for BlockIQ1MX {
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn weights(&self) -> [__m256i; 8] {
        // the codes l = grid + 1: 8·grid + 9 + δ = 8·l + 1 + δ, δ = −1 where the sub-group's
        // sign bit is set (0 then), else +1 (2)
        std::array::from_fn(|g| {
            let lv = iq1_x_codes(&self.qs, g);
            let dm = |k: usize| {
                if iq1mx_neg(self, 4 * g + k) {
                    0u64
                } else {
                    0x0202_0202_0202_0202
                }
            };
            let d = rows4!(dm(0), dm(1), dm(2), dm(3));
            _mm256_add_epi8(_mm256_slli_epi16(lv, 3), d)
        })
    }
    fn scales(&self) -> &[u8; 8] {
        &self.scales
    }
}

/// Writes one super-block `ob` of a group (`iq::group`'s layout with `h` scale groups, 8 or
/// 16): row r's 256 value bytes `vals[r]` (already v ⊕ 0x80), its `h` scales `ls[r][..h]` and
/// its f32 scale `d[r]`, each 32-byte slice of eight rows transposed by dwords
/// ([`transpose8x8`]) into the lanes of the group's vectors.
///
/// # Safety
/// The CPU must have AVX2; `ob` must be `group_sb(h)` bytes.
#[target_feature(enable = "avx2")]
unsafe fn store_group_block(
    ob: &mut [u8],
    vals: &[[u8; 256]; 16],
    ls: &[[i32; 16]; 16],
    d: &[f32; 16],
    h: usize,
) {
    use crate::simd::iq::group::{d_at, group_sb};
    use crate::simd::q8::tile_x16::x86::transpose8x8;
    assert_eq!(ob.len(), group_sb(h), "group block length");
    // slice e: values 32e..32e + 32 (e < 8) or scales 8(e − 8).. (e ≥ 8), at vectors 8e..
    for e in 0..8 + h / 8 {
        for half in 0..2 {
            let a: [__m256i; 8] = std::array::from_fn(|p| {
                let r = 8 * half + p;
                let src: *const u8 = if e < 8 {
                    vals[r][32 * e..].as_ptr()
                } else {
                    ls[r][8 * (e - 8)..].as_ptr().cast()
                };
                // SAFETY: 32 bytes at 32e of a 256-byte row (e < 8), or eight of a row's
                // sixteen i32 scales (e − 8 < 2; unaligned load).
                unsafe { _mm256_loadu_si256(src.cast()) }
            });
            for (k, v) in transpose8x8(a).iter().enumerate() {
                // SAFETY: half `half` of vector 8e + k: bytes 512e + 64k + 32·half.. + 32,
                // inside the block (8e + k < 64 + h; checked length; unaligned store).
                unsafe {
                    _mm256_storeu_si256(
                        ob.as_mut_ptr().add(512 * e + 64 * k + 32 * half).cast(),
                        *v,
                    )
                };
            }
        }
    }
    for (q, dq) in d.chunks_exact(8).enumerate() {
        // SAFETY: the sixteen f32 scales are bytes d_at(h)..d_at(h) + 64 (unaligned load and
        // store of eight).
        unsafe {
            _mm256_storeu_ps(
                ob.as_mut_ptr().add(d_at(h) + 32 * q).cast(),
                _mm256_loadu_ps(dq.as_ptr()),
            )
        };
    }
}

/// The AVX2 group expanders' loop (`iq::group`'s layout with `h` scale groups): per
/// super-block each row's value registers (group g's 32 bytes, already v ⊕ 0x80), its `h`
/// scales and its f32 scale from `block`, then one [`store_group_block`]. Missing rows
/// stay values 0 (codes 0x80) and scales 0.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; `rows` holds 1..=16 rows of `B` of equal length
/// and `out` is `iq::group::group_bytes` of their element count with `h` scale groups.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn expand_group<B: bytemuck::Pod>(
    rows: &[&[u8]],
    out: &mut [u8],
    h: usize,
    block: impl Fn(&B) -> ([__m256i; 8], [i32; 16], f32),
) {
    use crate::simd::iq::group::{group_sb, GROUP_ROWS};
    let nr = rows.len();
    let mut xs: [&[B]; GROUP_ROWS] = [&[]; GROUP_ROWS];
    for (x, w) in xs.iter_mut().zip(rows) {
        *x = view::<B>(w);
    }
    let mut vals = [[0x80u8; 256]; GROUP_ROWS];
    let mut ls = [[0i32; 16]; GROUP_ROWS];
    let mut d = [0f32; GROUP_ROWS];
    for (b, ob) in out.chunks_exact_mut(group_sb(h)).enumerate() {
        for r in 0..nr {
            let x = &xs[r][b];
            if let Some(ahead) = xs[r].get(b + 2) {
                crate::simd::prefetch(bytemuck::bytes_of(ahead));
            }
            let (wv, l, dr) = block(x);
            for (g, v) in wv.iter().enumerate() {
                // SAFETY: group g is bytes 32g..32g + 32 of the row's 256 (unaligned store).
                unsafe { _mm256_storeu_si256(vals[r][32 * g..].as_mut_ptr().cast(), *v) };
            }
            (ls[r], d[r]) = (l, dr);
        }
        // SAFETY: same features; `ob` is one super-block of the group.
        unsafe { store_group_block(ob, &vals, &ls, &d, h) };
    }
}

/// The AVX2 group expander of IQ1_M and IQ1_M_X (sixteen scale groups, the halves): the
/// weights W + 9 of [`Iq1mGroups::weights`] (IQ1_M: gathered) plus 119, so W ⊕ 0x80; the
/// half scales 2·s + 1 and the super-block scale from the packed `scales`. Exactly the bytes
/// of `iq::group::expand_group_iq1_m(_x)`.
///
/// # Safety
/// As [`expand_group`]'s, with sixteen scale groups.
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::simd) unsafe fn group_iq1_m<B: Iq1mGroups>(rows: &[&[u8]], out: &mut [u8]) {
    let to_group = _mm256_set1_epi8(119);
    let block = |x: &B| {
        // SAFETY: same features.
        let wv = unsafe { x.weights() }.map(|v| _mm256_add_epi8(v, to_group));
        let mut ls = [0i32; 16];
        for g in 0..8 {
            let (s1, s2) = iq1m_scales_of(x.scales(), g);
            (ls[2 * g], ls[2 * g + 1]) = (2 * s1 as i32 + 1, 2 * s2 as i32 + 1);
        }
        (wv, ls, iq1m_d_of(x.scales()))
    };
    // SAFETY: the caller's guarantees.
    unsafe { expand_group(rows, out, crate::simd::iq::group::SCALES_16, block) }
}

/// The AVX2 group expander of IQ1_S and IQ1_S_X (eight scale groups): per group the levels
/// l = v + 1 of [`Iq1sUnpack::unpack`] (IQ1_S: gathered) as W ⊕ 0x80 = 8·l + 120 + σ, with
/// W = 8·v + σ (σ = ±1 the group's delta sign), the scales 2·s + 1 and the super-block
/// scale. Exactly the bytes of `iq::group::expand_group_iq1_s(_x)`.
///
/// # Safety
/// As [`expand_group`]'s, with eight scale groups.
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::simd) unsafe fn group_iq1_s<B: Iq1sUnpack>(rows: &[&[u8]], out: &mut [u8]) {
    let block = |x: &B| {
        // SAFETY: same features.
        let u = unsafe { x.unpack() };
        let wv = std::array::from_fn(|g| {
            let off = if u.signed[g] < 0 { 119 } else { 121 };
            // 8·l ≤ 16: the 16-bit shift moves no bit across a byte
            _mm256_add_epi8(_mm256_slli_epi16::<3>(u.w[g]), _mm256_set1_epi8(off))
        });
        let mut ls = [0i32; 16];
        for (l, &v) in ls.iter_mut().zip(&u.ls) {
            *l = i32::from(v);
        }
        (wv, ls, f16c!(x.d()))
    };
    // SAFETY: the caller's guarantees.
    unsafe { expand_group(rows, out, crate::simd::iq::group::SCALES_32, block) }
}

/// The IQ1_M multi-column kernel's body for either layout.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq1_m_multi<B: Iq1mGroups>(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<B>(w);
    let eighth = _mm256_set1_ps(0.125);
    for r in crate::simd::column_split(acts.len(), COLS) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let mut ys: [&[BlockQ8K]; COLS] = [&[]; COLS];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8K>(a);
        }
        let ys = &ys[..acts.len()];
        let mut s = [_mm256_setzero_ps(); COLS / 8];
        for (b, x) in xs.iter().enumerate() {
            // per group: the unsigned weights and the scales of its two halves (i16 lanes)
            // SAFETY: same features.
            let wv = unsafe { x.weights() };
            let mut lsv = [_mm256_setzero_si256(); 8];
            let mut ls16 = [0i16; 16];
            for (g, lg) in lsv.iter_mut().enumerate() {
                let (s1, s2) = iq1m_scales_of(x.scales(), g);
                let (l1, l2) = ((2 * s1 + 1) as i16, (2 * s2 + 1) as i16);
                *lg = _mm256_set_m128i(_mm_set1_epi16(l2), _mm_set1_epi16(l1));
                (ls16[2 * g], ls16[2 * g + 1]) = (9 * l1, 9 * l2);
            }
            // SAFETY: `ls16` is 32 readable bytes (unaligned load).
            let ls9 = unsafe { _mm256_loadu_si256(ls16.as_ptr().cast()) };
            let dx = _mm256_set1_ps(iq1m_d_of(x.scales()));
            for (ys8, s8) in ys.chunks(8).zip(s.iter_mut()) {
                let mut sums = [_mm256_setzero_si256(); 8];
                let mut yd = [0f32; 8];
                for ((y, acc), d) in ys8.iter().zip(sums.iter_mut()).zip(yd.iter_mut()) {
                    let y = &y[b];
                    *d = y.d();
                    // SAFETY: a Q8_K block's 16 block sums are 32 bytes (unaligned load).
                    let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
                    let mut a =
                        _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(bs, ls9));
                    for (g, (wg, lg)) in wv.iter().zip(&lsv).enumerate() {
                        let p = _mm256_maddubs_epi16(*wg, y32!(y, g));
                        a = _mm256_add_epi32(a, _mm256_madd_epi16(p, *lg));
                    }
                    *acc = a;
                }
                let s8v = _mm256_mul_ps(_mm256_cvtepi32_ps(hsum_i32x8(&sums)), eighth);
                // SAFETY: `yd` is 32 readable bytes (unaligned load).
                let yd = unsafe { _mm256_loadu_ps(yd.as_ptr()) };
                *s8 = _mm256_add_ps(*s8, _mm256_mul_ps(_mm256_mul_ps(dx, yd), s8v));
            }
        }
        let mut lanes = [0f32; COLS];
        for (l, v) in lanes.chunks_exact_mut(8).zip(s) {
            // SAFETY: `l` has room for 8 f32.
            unsafe { _mm256_storeu_ps(l.as_mut_ptr(), v) };
        }
        out.copy_from_slice(&lanes[..out.len()]);
    }
}

/// IQ1_S_X · Q8_K with AVX2. Group g's 32 level codes l = v + 1 are code bytes 8g..8g + 8
/// (half-major): one qword per 2-bit cut (`vpsrlvq`), a mask and one `vpermd` into element
/// order, then `vpmaddubsw` against
/// the activations (Σ l·y), `vpmaddwd` by the group scale, and the −1 of the offset and the
/// delta from the block sums. Exact integers and the reference's float combine: its bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_s_x_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ1SX>(w).iter().zip(view::<BlockQ8K>(a)) {
        let mut acc = _mm256_setzero_si256();
        let (mut sumi1, mut off) = (0i32, 0i32);
        for g in 0..8 {
            let (ls, neg) = iq1sx_group(x, g);
            let lv = iq1_x_codes(&x.qs, g);
            let t = _mm256_madd_epi16(
                _mm256_maddubs_epi16(lv, y32!(y, g)),
                _mm256_set1_epi16(ls as i16),
            );
            acc = _mm256_add_epi32(acc, t);
            let b = y.bsum(2 * g) as i32 + y.bsum(2 * g + 1) as i32;
            off += ls * b;
            sumi1 += if neg { -ls * b } else { ls * b };
        }
        // SAFETY: AVX2 is enabled for this function.
        let sumi = unsafe { hsum_i32(acc) } - off;
        s += f16c!(x.d) * y.d() * (sumi as f32 + 0.125 * sumi1 as f32);
    }
    s
}

/// Group `g` of an IQ1_M block: its four grid rows (−1/0/+1 bytes), the mask of its
/// bytes whose 8-element sub-group has the negative delta (0xFF there: sub-group k's sign is
/// bit 4k + 3 of the group's `qh` word, broadcast, spread to its bytes, tested by a compare),
/// and its two half-group scales 2·s + 1.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn iq1m_group(x: &BlockIQ1M, g: usize) -> (__m256i, __m256i, (i16, i16)) {
    // byte j: the `qh` byte of its sub-group (sub-group j / 8 reads byte j / 16)
    let spread = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1,
    );
    // the sub-group's delta-sign bit in that byte: bit 3, or 7 for odd sub-groups
    let bit = _mm256_setr_epi8(
        8, 8, 8, 8, 8, 8, 8, 8, -128, -128, -128, -128, -128, -128, -128, -128, 8, 8, 8, 8, 8, 8,
        8, 8, -128, -128, -128, -128, -128, -128, -128, -128,
    );
    let (s1, s2) = iq1m_scales(x, g);
    // sub-group k: 3 high index bits and the delta sign in nibble k of the qh word
    let h = le_u16(&x.qh, g) as usize;
    let q = &x.qs[4 * g..4 * g + 4];
    let grid = rows4!(
        IQ1S_GRID[q[0] as usize | ((h & 7) << 8)],
        IQ1S_GRID[q[1] as usize | ((h & 0x70) << 4)],
        IQ1S_GRID[q[2] as usize | (h & 0x700)],
        IQ1S_GRID[q[3] as usize | ((h & 0x7000) >> 4)],
    );
    let hv = _mm256_shuffle_epi8(_mm256_set1_epi16(h as i16), spread);
    let neg = _mm256_cmpeq_epi8(_mm256_and_si256(hv, bit), bit);
    (grid, neg, ((2 * s1 + 1) as i16, (2 * s2 + 1) as i16))
}

/// IQ1_M · Q8_K with AVX2: the grid term as IQ1_S, the delta term Σ ±y per 8 elements with a
/// second `vpsignb` against ±1 masks; both scaled per 16 elements by `vpmaddwd`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_m_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let ones8 = _mm256_set1_epi8(1);
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ1M>(w).iter().zip(view::<BlockQ8K>(a)) {
        let mut acc = _mm256_setzero_si256();
        let mut acc1 = _mm256_setzero_si256();
        for g in 0..8 {
            let (grid, neg, (l1, l2)) = iq1m_group(x, g);
            // i16 lane i covers elements 2i, 2i+1: lanes 0..8 are the first 16 elements
            let ls = _mm256_set_m128i(_mm_set1_epi16(l2), _mm_set1_epi16(l1));
            // ±1 bytes: −1 where the sub-group's delta bit is set (`vpsignb`'s operand)
            let delta = _mm256_or_si256(neg, ones8);
            let yv = y32!(y, g);
            let gy = _mm256_maddubs_epi16(ones8, _mm256_sign_epi8(yv, grid));
            let dy = _mm256_maddubs_epi16(ones8, _mm256_sign_epi8(yv, delta));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(gy, ls));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(dy, ls));
        }
        // SAFETY: AVX2 is enabled for this function.
        let (sumi, sumi1) = unsafe { (hsum_i32(acc), hsum_i32(acc1)) };
        let bits = iq1m_d_bits(&x.scales);
        s += f16c!(bits.to_le_bytes()) * y.d() * (sumi as f32 + 0.125 * sumi1 as f32);
    }
    s
}

/// IQ1_M_X · Q8_K with AVX2: per 32-element group its eight half-major code bytes, one
/// qword per 2-bit cut (`vpsrlvq`), a mask and one `vpermd` into element order; Σ l·y by
/// `vpmaddubsw`, the −1 of the offset from the block sums, with IQ1_M's scales per 16
/// elements and its delta term Σ ±y per 8 elements ([`dot_iq1_m_avx2`]'s `vpsignb`). Exact
/// integers and the reference's float combine: IQ1_M's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_m_x_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let ones8 = _mm256_set1_epi8(1);
    const PLUS: u64 = 0x0101_0101_0101_0101;
    const MINUS: u64 = u64::MAX;
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ1MX>(w).iter().zip(view::<BlockQ8K>(a)) {
        let (mut acc, mut acc1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        let mut off = 0i32;
        for g in 0..8 {
            let (s1, s2) = iq1m_scales_of(&x.scales, g);
            let (l1, l2) = ((2 * s1 + 1) as i16, (2 * s2 + 1) as i16);
            // i16 lane i covers elements 2i, 2i+1: lanes 0..8 are the first 16 elements
            let ls = _mm256_set_m128i(_mm_set1_epi16(l2), _mm_set1_epi16(l1));
            // the group's codes are bytes 8g..8g + 8 (halves 2g, 2g + 1, half-major): qword p
            // takes cut p (byte 8p + 4d + r: element 32g + 16d + 4p + r), one `vpermd` puts
            // them in element order (dword 4d + p from dword 2p + d)
            let lv = iq1_x_codes(&x.qs, g);
            let yv = y32!(y, g);
            let dm = |k: usize| if iq1mx_neg(x, 4 * g + k) { MINUS } else { PLUS };
            let delta = rows4!(dm(0), dm(1), dm(2), dm(3));
            let dy = _mm256_maddubs_epi16(ones8, _mm256_sign_epi8(yv, delta));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(lv, yv), ls));
            acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(dy, ls));
            off += l1 as i32 * y.bsum(2 * g) as i32 + l2 as i32 * y.bsum(2 * g + 1) as i32;
        }
        // SAFETY: AVX2 is enabled for this function.
        let (sumi, sumi1) = unsafe { (hsum_i32(acc) - off, hsum_i32(acc1)) };
        let bits = iq1m_d_bits(&x.scales);
        s += f16c!(bits.to_le_bytes()) * y.d() * (sumi as f32 + 0.125 * sumi1 as f32);
    }
    s
}
