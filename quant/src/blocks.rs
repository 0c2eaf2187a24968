//! `#[repr(C)]` block structs, byte for byte ggml's (`ggml-common.h`).
//!
//! Every field is a byte array, so every block has alignment 1 and a GGUF tensor slice can be
//! reinterpreted with `bytemuck::cast_slice` at any offset. Multi-byte fields are little-endian
//! and read through accessors. Sizes are asserted at compile time.

use bytemuck::{Pod, Zeroable};

macro_rules! block {
    ($(#[$m:meta])* $name:ident, $size:expr, { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Pod, Zeroable, PartialEq, Eq)]
        pub struct $name { $( $(#[$fm])* pub $f: $t ),* }
        const _: () = assert!(std::mem::size_of::<$name>() == $size);
        const _: () = assert!(std::mem::align_of::<$name>() == 1);
    };
}

block!(/// Q8_0: 32 int8 codes with an f16 scale (34 bytes).
BlockQ8_0, 34, { /// scale (f16)
 d: [u8; 2], /// codes
 qs: [i8; 32] });
block!(/// Q8_K: 256 int8 codes, an f32 scale and 16 sums of 16 codes (292 bytes).
BlockQ8K, 292, { /// scale (f32, may be negative)
 d: [u8; 4], /// codes
 qs: [i8; 256], /// `bsums[j]` = Σ qs[16j..16j+16] as little-endian i16
 bsums: [u8; 32] });
block!(/// Q2_K: 256 elements, 2-bit codes, 4-bit scales and mins (84 bytes).
BlockQ2K, 84, { /// low nibble scale, high nibble min, per 16 elements
 scales: [u8; 16], /// 2-bit codes
 qs: [u8; 64], /// super-scale (f16)
 d: [u8; 2], /// super-min (f16)
 dmin: [u8; 2] });
block!(/// Q4_K: 256 elements, 4-bit codes, 6-bit scales/mins (144 bytes).
BlockQ4K, 144, { /// super-scale (f16)
 d: [u8; 2], /// super-min (f16)
 dmin: [u8; 2], /// packed 6-bit scales and mins (spec §4.1)
 scales: [u8; 12], /// 4-bit codes
 qs: [u8; 128] });
block!(/// Q5_K: 256 elements, 5-bit codes (176 bytes).
BlockQ5K, 176, { /// super-scale (f16)
 d: [u8; 2], /// super-min (f16)
 dmin: [u8; 2], /// packed 6-bit scales and mins
 scales: [u8; 12], /// 5th bits
 qh: [u8; 32], /// low 4 bits
 qs: [u8; 128] });
block!(/// Q6_K: 256 elements, 6-bit codes, int8 scales per 16 (210 bytes).
BlockQ6K, 210, { /// low 4 bits
 ql: [u8; 128], /// high 2 bits
 qh: [u8; 64], /// signed scales
 scales: [i8; 16], /// super-scale (f16)
 d: [u8; 2] });
block!(/// Q2_0: 64 elements, 2-bit codes {−1,0,1,2}·d (18 bytes).
BlockQ2_0, 18, { /// scale (f16)
 d: [u8; 2], /// codes, 4 per byte, lowest bits first
 qs: [u8; 16] });
block!(/// Q1_0: 128 elements, one sign bit each, ±d (18 bytes).
BlockQ1_0, 18, { /// scale (f16)
 d: [u8; 2], /// bits
 qs: [u8; 16] });
block!(/// IQ2_XXS: 256 elements (66 bytes).
BlockIQ2XXS, 66, { /// scale (f16)
 d: [u8; 2], /// 8 groups × (4 grid bytes, u32 of signs+scale)
 qs: [u8; 64] });
block!(/// IQ2_XS: 256 elements (74 bytes).
BlockIQ2XS, 74, { /// scale (f16)
 d: [u8; 2], /// 32 little-endian u16: 9-bit grid index, 7-bit sign index
 qs: [u8; 64], /// two 4-bit scales per 32 elements
 scales: [u8; 8] });
block!(/// IQ1_S: 256 elements (50 bytes).
BlockIQ1S, 50, { /// scale (f16)
 d: [u8; 2], /// low 8 bits of the 11-bit grid indices
 qs: [u8; 32], /// 8 little-endian u16: index high bits, 3-bit scale, delta sign
 qh: [u8; 16] });
block!(/// IQ1_S_X: IQ1_S repacked at load time (fathom's own layout, never in a GGUF; see
/// [`crate::codec::repack`]): 256 elements (70 bytes).
BlockIQ1SX, 70, { /// scale (f16), IQ1_S's `d`
 d: [u8; 2], /// eight 4-bit group fields (3-bit scale, delta sign at bit 3) as a little-endian
 /// u32: group g's nibble at bit 4g
 sc: [u8; 4], /// 2-bit level codes l = v + 1, half-major: byte i, bits 2p..2p+2 hold
 /// element 16·(i/4) + 4p + i % 4 (see [`crate::codec::repack::iq1mx_code_at`])
 qs: [u8; 64] });
block!(/// IQ2_XXS_X: IQ2_XXS repacked at load time (fathom's own layout, never in a GGUF; see
/// [`crate::codec::repack`]): 256 elements (102 bytes).
BlockIQ2XXSX, 102, { /// scale (f16), IQ2_XXS's `d`
 d: [u8; 2], /// eight 4-bit group scales (IQ2_XXS's `a1 >> 28`) as a little-endian u32:
 /// group g's at bit 4g
 sc: [u8; 4], /// 2-bit level codes (0: 8, 1: 25, 2: 43): byte i, bits 2p..2p+2 hold element
 /// 64p + i
 qs: [u8; 64], /// sign bits, little-endian: bit e set negates element e
 sg: [u8; 32] });
block!(/// Q2_0_X: eight Q2_0 blocks repacked at load time (fathom's own layout, never in a
/// GGUF; see [`crate::codec::repack`]): 512 elements (144 bytes, Q2_0's bytes reordered).
BlockQ2_0X, 144, { /// code bytes in the decode kernels' step-register order: byte
 /// 64r + 8k + 4h + m is byte 8h + 4r + m of block k's `qs` (r, h ∈ {0, 1}, m < 4)
 qs: [u8; 128], /// the eight blocks' f16 scales (block k's at 2k)
 d: [u8; 16] });
block!(/// IQ1_M: 256 elements, no separate scale field (56 bytes).
BlockIQ1M, 56, { /// low 8 bits of grid indices
 qs: [u8; 32], /// high index bits and delta signs
 qh: [u8; 16], /// 4 little-endian u16: 3-bit scales and the f16 super-scale's nibbles
 scales: [u8; 8] });
block!(/// IQ1_M_X: IQ1_M repacked at load time (fathom's own layout, never in a GGUF; see
/// [`crate::codec::repack`]): 256 elements (76 bytes).
BlockIQ1MX, 76, { /// 2-bit level codes l = v + 1, half-major: byte i, bits 2p..2p+2 hold
 /// element 16·(i/4) + 4p + i % 4 (see [`crate::codec::repack::iq1mx_code_at`])
 qs: [u8; 64], /// delta signs, little-endian u32: bit k set makes sub-group k's (elements
 /// 8k..8k+8) delta −1/8
 sg: [u8; 4], /// IQ1_M's `scales`, unchanged (3-bit scales, the f16 super-scale's nibbles)
 scales: [u8; 8] });
block!(/// IQ4_XS: 256 elements, non-linear 4-bit codes (136 bytes).
BlockIQ4XS, 136, { /// scale (f16)
 d: [u8; 2], /// high 2 bits of the 6-bit scales (u16)
 scales_h: [u8; 2], /// low 4 bits of the 6-bit scales
 scales_l: [u8; 4], /// codes
 qs: [u8; 128] });
block!(/// MXFP4: 32 E2M1 codes with an E8M0 exponent (17 bytes).
BlockMXFP4, 17, { /// shared exponent (E8M0)
 e: u8, /// codes: low nibble element j, high nibble element j+16
 qs: [u8; 16] });

impl BlockQ8K {
    /// The f32 scale.
    #[inline]
    pub fn d(&self) -> f32 {
        f32::from_le_bytes(self.d)
    }
    /// `bsums[j]`.
    #[inline]
    pub fn bsum(&self, j: usize) -> i16 {
        i16::from_le_bytes([self.bsums[2 * j], self.bsums[2 * j + 1]])
    }
}

/// Little-endian u16 number `i` of a byte array.
#[inline]
pub fn le_u16(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[2 * i], b[2 * i + 1]])
}

/// Bytes `at..at + 4` of `b`, as one 4-byte copy (indexing the four bytes one by one
/// compiles to four loads, shifts and bounds checks).
#[inline]
pub(crate) fn le4(b: &[u8], at: usize) -> [u8; 4] {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[at..at + 4]);
    v
}

/// View whole blocks of bytes as blocks. Panics only if `bytes.len()` is not a multiple of the
/// block size, which every caller has already checked (see [`crate::dequantize_row`]).
#[inline]
pub fn view<B: Pod>(bytes: &[u8]) -> &[B] {
    bytemuck::cast_slice(bytes)
}

/// Mutable view of whole blocks.
#[inline]
pub fn view_mut<B: Pod>(bytes: &mut [u8]) -> &mut [B] {
    bytemuck::cast_slice_mut(bytes)
}

block!(/// Q4_0: 32 elements, 4-bit codes with offset 8 (18 bytes).
BlockQ4_0, 18, { /// scale (f16)
 d: [u8; 2], /// codes: low nibble element j, high nibble element j+16
 qs: [u8; 16] });
block!(/// Q4_1: 32 elements, 4-bit codes with a min (20 bytes).
BlockQ4_1, 20, { /// scale (f16)
 d: [u8; 2], /// min (f16)
 m: [u8; 2], /// codes
 qs: [u8; 16] });
block!(/// Q5_0: 32 elements, 5-bit codes with offset 16 (22 bytes).
BlockQ5_0, 22, { /// scale (f16)
 d: [u8; 2], /// 5th bits, little-endian u32 (bit j = element j)
 qh: [u8; 4], /// low 4 bits
 qs: [u8; 16] });
block!(/// Q5_1: 32 elements, 5-bit codes with a min (24 bytes).
BlockQ5_1, 24, { /// scale (f16)
 d: [u8; 2], /// min (f16)
 m: [u8; 2], /// 5th bits
 qh: [u8; 4], /// low 4 bits
 qs: [u8; 16] });
block!(/// IQ4_NL: 32 elements, non-linear 4-bit codes (18 bytes).
BlockIQ4NL, 18, { /// scale (f16)
 d: [u8; 2], /// codes: low nibble element j, high nibble element j+16
 qs: [u8; 16] });
block!(/// Q8_1: 32 int8 codes, scale and `s = d·Σq` (36 bytes; activation type of Q4_1/Q5_1).
BlockQ8_1, 36, { /// scale (f16)
 d: [u8; 2], /// d·Σq (f16)
 s: [u8; 2], /// codes
 qs: [i8; 32] });
