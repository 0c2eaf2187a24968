//! Where the AVX-512 MXFP4 kernels (`mxfp4.rs`) read a weight row's blocks ([`Fp4Row`]): a
//! row of ggml MXFP4 blocks (scale byte, then 16 code bytes with element j in the low nibble
//! and j + 16 in the high one), or a row in the official DeepSeek FP4 layout ([`SplitRow`]:
//! the codes, column 2i in the low nibble of byte i, and the scale bytes in tensors of their
//! own — an official checkpoint's experts used in place). The kernels are generic over it,
//! so both layouts run the same registers and give the same bits.

use crate::blocks::BlockMXFP4;
use bytemuck::Zeroable;
use std::arch::x86_64::*;

/// Where the multi-row kernel reads a row's blocks: a row of MXFP4 blocks (`&[BlockMXFP4]`),
/// or a row in the official FP4 layout ([`SplitRow`]: codes and scales apart, low nibble =
/// even column).
pub(super) trait Fp4Row: Copy {
    /// The codes are in the official order: the unpacked values of the low (even) and high
    /// (odd) nibbles are interleaved back into element order (elements 0..15, 16..31).
    const OFFICIAL: bool;
    /// Blocks in the row.
    fn nb(&self) -> usize;
    /// The row cut to its first `nb` blocks.
    fn cut(self, nb: usize) -> Self;
    /// The codes from block `b` on: 64 bytes, or (`CHECK`, fewer than four blocks left) a
    /// masked load of blocks b and b + 1.
    ///
    /// # Safety
    /// The CPU has AVX-512 F and BW; blocks b and b + 1 are in the row, and without `CHECK`
    /// also b + 2 and b + 3.
    unsafe fn load<const CHECK: bool>(&self, b: usize) -> __m512i;
    /// Two rows' [`Self::load`]s in the pair layout: 128-bit lanes (row i, b), (i + 1, b),
    /// (i, b + 1), (i + 1, b + 1).
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VBMI.
    unsafe fn combine(a: __m512i, b: __m512i, codes_pick: __m512i) -> __m512i;
    /// The E8M0 bytes of blocks `g..g + 8` in the low 64 bits.
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VBMI; blocks g..g + 8 are in the row.
    unsafe fn e8(&self, g: usize) -> __m128i;
    /// Block `b`'s E8M0 byte.
    fn scale(&self, b: usize) -> u8;
    /// Block `b`'s 16 code bytes.
    fn codes16(&self, b: usize) -> &[u8; 16];
    /// Block `b` as an MXFP4 block (the scalar last odd block).
    fn block(&self, b: usize) -> BlockMXFP4;
    /// The start of block `b`'s codes (prefetches).
    fn codes_at(&self, b: usize) -> *const u8;
    /// Bytes of codes per block (prefetch distances).
    const CODE_BYTES: usize;
}

impl Fp4Row for &[BlockMXFP4] {
    const OFFICIAL: bool = false;
    const CODE_BYTES: usize = size_of::<BlockMXFP4>();
    fn nb(&self) -> usize {
        self.len()
    }
    fn cut(self, nb: usize) -> Self {
        &self[..nb]
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn load<const CHECK: bool>(&self, b: usize) -> __m512i {
        debug_assert!(b + 2 <= self.len() && (CHECK || b + 4 <= self.len()));
        // SAFETY: block b is in the row (the caller's contract).
        let p = unsafe { self.as_ptr().add(b) }.cast::<u8>();
        if !CHECK || self.len() - b >= 4 {
            // SAFETY: four blocks (68 bytes) from block b are in the row (unaligned load).
            unsafe { _mm512_loadu_si512(p.cast()) }
        } else {
            // SAFETY: blocks b and b + 1 (34 bytes) are in the row; the masked-off bytes
            // are not read.
            unsafe { _mm512_maskz_loadu_epi8((1 << 34) - 1, p.cast()) }
        }
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn combine(a: __m512i, b: __m512i, codes_pick: __m512i) -> __m512i {
        _mm512_permutex2var_epi8(a, codes_pick, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn e8(&self, g: usize) -> __m128i {
        // SAFETY: E_PICK has 64 bytes (unaligned load).
        let idx = unsafe { _mm512_loadu_si512(E_PICK.as_ptr().cast()) };
        let p = self[g..g + 8].as_ptr().cast::<u8>();
        // SAFETY: the eight blocks are 136 bytes; the two loads read the first 128.
        let (lo, hi) = unsafe {
            (
                _mm512_loadu_si512(p.cast()),
                _mm512_loadu_si512(p.add(64).cast()),
            )
        };
        _mm512_castsi512_si128(_mm512_permutex2var_epi8(lo, idx, hi))
    }
    fn scale(&self, b: usize) -> u8 {
        self[b].e
    }
    fn codes16(&self, b: usize) -> &[u8; 16] {
        &self[b].qs
    }
    fn block(&self, b: usize) -> BlockMXFP4 {
        self[b]
    }
    fn codes_at(&self, b: usize) -> *const u8 {
        self[b..].as_ptr().cast()
    }
}

/// A row in the official FP4 layout: 16 code bytes per block (column 2i in the low nibble of
/// byte i) and its E8M0 bytes, each contiguous.
#[derive(Clone, Copy)]
pub(super) struct SplitRow<'a> {
    /// 16 code bytes per block.
    pub codes: &'a [u8],
    /// One E8M0 byte per block.
    pub scales: &'a [u8],
}

impl<'a> From<(&'a [u8], &'a [u8])> for SplitRow<'a> {
    /// A `(codes, scales)` row ([`crate::simd::SplitRowsDotFn`]).
    fn from((codes, scales): (&'a [u8], &'a [u8])) -> Self {
        SplitRow { codes, scales }
    }
}

impl Fp4Row for SplitRow<'_> {
    const OFFICIAL: bool = true;
    const CODE_BYTES: usize = 16;
    fn nb(&self) -> usize {
        self.scales.len().min(self.codes.len() / 16)
    }
    fn cut(self, nb: usize) -> Self {
        SplitRow {
            codes: &self.codes[..16 * nb],
            scales: &self.scales[..nb],
        }
    }
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn load<const CHECK: bool>(&self, b: usize) -> __m512i {
        debug_assert!(b + 2 <= self.nb() && (CHECK || b + 4 <= self.nb()));
        // SAFETY: block b's codes are in the row (the caller's contract).
        let p = unsafe { self.codes.as_ptr().add(16 * b) };
        if !CHECK || self.nb() - b >= 4 {
            // SAFETY: four blocks' codes (64 bytes) from block b are in the row.
            unsafe { _mm512_loadu_si512(p.cast()) }
        } else {
            // SAFETY: blocks b and b + 1 (32 bytes) are in the row; the rest is not read.
            unsafe { _mm512_maskz_loadu_epi8((1 << 32) - 1, p.cast()) }
        }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn combine(a: __m512i, b: __m512i, _: __m512i) -> __m512i {
        // 128-bit lanes: a's block b, b's block b, a's block b + 1, b's block b + 1
        _mm512_permutex2var_epi64(a, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn e8(&self, g: usize) -> __m128i {
        let e = &self.scales[g..g + 8];
        // SAFETY: the eight bytes are in the row (unaligned 64-bit load).
        unsafe { _mm_loadl_epi64(e.as_ptr().cast()) }
    }
    fn scale(&self, b: usize) -> u8 {
        self.scales[b]
    }
    fn codes16(&self, b: usize) -> &[u8; 16] {
        self.codes[16 * b..16 * b + 16]
            .try_into()
            .expect("16 bytes")
    }
    fn block(&self, b: usize) -> BlockMXFP4 {
        let mut x = [0u8; 17];
        crate::fp8::fp4_ds_block_to_mxfp4(&self.codes[16 * b..16 * b + 16], self.scales[b], &mut x);
        let mut blk = BlockMXFP4::zeroed();
        bytemuck::bytes_of_mut(&mut blk).copy_from_slice(&x);
        blk
    }
    fn codes_at(&self, b: usize) -> *const u8 {
        self.codes[16 * b..].as_ptr()
    }
}

/// `vpermt2b` indices of the E8M0 bytes of eight consecutive blocks (17 bytes apart, all
/// within the first 128 bytes) into bytes 0..8.
static E_PICK: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut k = 0;
    while k < 8 {
        t[k] = (17 * k) as u8;
        k += 1;
    }
    t
};
