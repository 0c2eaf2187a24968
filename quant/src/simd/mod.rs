//! The SIMD kernels, chosen at run time by CPU level, each **bit-identical** to its scalar
//! reference in [`crate::dot`] (except the float types, whose f64 sums are reordered; see
//! `float::avx2`): MXFP4's reference accumulates in ggml's x86 lane order, and the Q8_0,
//! K- and I-quant references form exact integer (sub-)block sums before one scalar float
//! combine, so a SIMD kernel doing the same integer sums and float steps gives the same bits. Tested against
//! the reference on random inputs of every length (`quant/tests/simd.rs`).
//!
//! [`table`] says which kernel serves a type on a CPU ([`kernels`]); nothing else chooses.
//! One module per family of types, each holding its ISA variants:
//! - [`float`]: F32, F16, BF16 (AVX2, AVX-512, the float tile);
//! - [`q8`]: the types dotted with Q8_0 activations, Q8_0, Q2_0 / Q2_0_X and MXFP4 (AVX2,
//!   AVX-512, the panel tiles), and the activation quantizers;
//! - [`kquants`]: Q4_K, Q5_K, Q6_K (AVX2, AVX-512);
//! - [`iq`]: the grid types IQ2_XXS, IQ1_S, IQ1_M and their repacked layouts (AVX2, AVX-512,
//!   the expanded-row tile and the AMX tile).
//!
//! This module holds what they share: the safe-entry macro, the kernel function types, the
//! register helpers and the software prefetch.

pub mod float;
pub mod iq;
pub mod kquants;
pub mod q8;
pub mod table;
#[cfg(target_arch = "x86_64")]
pub use q8::quantize::{
    q8_0_forms, q8_k_forms, quantize_q8_0_fast, quantize_q8_k_fast, QuantizeFn,
};
pub use table::{kernels, CpuLevel, Kernel, Kernels, Tile};

/// Declares a safe entry point for an `unsafe` `#[target_feature]` kernel. The entry is only
/// handed out by [`kernels`] after the run-time feature check for its tier.
#[cfg(target_arch = "x86_64")]
macro_rules! entry {
    (rows $($entry:ident => $kernel:ident),* $(,)?) => {$(
        /// Safe entry point of a multi-row kernel (see the module docs): only handed out
        /// after the feature check.
        pub fn $entry(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
            // SAFETY: `table::kernels` hands this function out only when the CPU reports the
            // features the kernel is compiled for (checked at run time just before).
            unsafe { $kernel(n, rows, a, out) }
        }
    )*};
    (multi $($entry:ident => $kernel:ident),* $(,)?) => {$(
        /// Safe entry point of a multi-column kernel (see the module docs): only handed out
        /// after the feature check.
        pub fn $entry(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
            // SAFETY: `table::kernels` hands this function out only when the CPU reports the
            // features the kernel is compiled for (checked at run time just before).
            unsafe { $kernel(n, w, acts, out) }
        }
    )*};
    (split_multi $($entry:ident => $kernel:ident),* $(,)?) => {$(
        /// Safe entry point of a multi-column kernel on a row in the official FP4 layout (see
        /// the module docs): only handed out after the feature check.
        pub fn $entry(n: usize, codes: &[u8], scales: &[u8], acts: &[&[u8]], out: &mut [f32]) {
            // SAFETY: `table::kernels` hands this function out only when the CPU reports the
            // features the kernel is compiled for (checked at run time just before).
            unsafe { $kernel(n, codes, scales, acts, out) }
        }
    )*};
    (split_rows $($entry:ident => $kernel:ident),* $(,)?) => {$(
        /// Safe entry point of a multi-row kernel on rows in the official FP4 layout (see
        /// the module docs): only handed out after the feature check.
        pub fn $entry(n: usize, rows: &[(&[u8], &[u8])], a: &[u8], out: &mut [f32]) {
            // SAFETY: `table::kernels` hands this function out only when the CPU reports the
            // features the kernel is compiled for (checked at run time just before).
            unsafe { $kernel(n, rows, a, out) }
        }
    )*};
    ($($entry:ident => $kernel:ident),* $(,)?) => {$(
        /// Safe entry point (see the module docs): only handed out after the feature check.
        pub fn $entry(n: usize, w: &[u8], a: &[u8]) -> f32 {
            // SAFETY: `table::kernels` hands this function out only when the CPU reports the features
            // the kernel is compiled for (checked at run time just before).
            unsafe { $kernel(n, w, a) }
        }
    )*};
}
#[cfg(target_arch = "x86_64")]
use entry;

/// A dot product of one weight row with several activation rows: `out[c] = dot(n, w,
/// acts[c])`, with the bits of the single-column kernel. The weight row is unpacked once
/// per block and used for every column (prompt chunks, and MoE experts with several tokens).
pub type MultiDotFn = fn(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]);

/// A dot product of several weight rows with one activation row: `out[r] = dot(n, rows[r],
/// a)`, with the bits of the one-row kernel of the same level ([`table`]) (the reference's, but
/// for the float types' reordered f64 sums). The rows' accumulation chains are
/// independent and their weight streams are read side by side (matvecs: decode).
pub type RowsDotFn = fn(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]);

/// [`RowsDotFn`] of MXFP4 on rows in the official FP4 layout (an official checkpoint's
/// experts used in place): row r is `rows[r] = (codes, scales)`, 16 code bytes per 32
/// columns (column 2i in the low nibble of byte i) and one E8M0 byte per 32 columns; `out[r]`
/// has the bits of the MXFP4 kernels on the row converted by [`crate::fp8::fp4_ds_to_mxfp4`].
pub type SplitRowsDotFn = fn(n: usize, rows: &[(&[u8], &[u8])], a: &[u8], out: &mut [f32]);

/// [`MultiDotFn`] of MXFP4 on one row in the official FP4 layout (`codes`, `scales`, as in
/// [`SplitRowsDotFn`]).
pub type SplitMultiDotFn =
    fn(n: usize, codes: &[u8], scales: &[u8], acts: &[&[u8]], out: &mut [f32]);

/// The kernels of MXFP4 rows in the official FP4 layout (an official checkpoint's experts
/// used in place), the [`table`]'s split column.
#[derive(Clone, Copy, Debug)]
pub struct SplitFp4 {
    /// Several rows · one column.
    pub rows: SplitRowsDotFn,
    /// One row · several columns.
    pub multi: SplitMultiDotFn,
}

/// Weight rows a [`RowsDotFn`] takes per pass (callers group rows by this many).
pub const DOT_ROWS: usize = 4;

/// The `vgf2p8affineqb` bit matrix (one qword, the same for every qword) that moves bits
/// `from`, `from + 1` of every byte to bits `to`, `to + 1` and clears the others: a shift
/// and a mask in one operation. Matrix byte 7 − i selects the input bits whose parity is
/// output bit i.
pub(crate) const fn gf_move2(from: u32, to: u32) -> i64 {
    ((1i64 << from) << (8 * (7 - to))) | ((1i64 << (from + 1)) << (8 * (6 - to)))
}

/// Most weight rows a caller hands a [`RowsDotFn`] at once (a multiple of [`DOT_ROWS`]):
/// kernels that prepare their activation side once per call (Q2_0) use it for all of them.
pub const DOT_BATCH: usize = 64;

/// Runs `$body!(R, P)` for a tile of `$rows` (1..=4) weight rows and `$pairs` (1..=4)
/// activation column pairs, the const-generic shape of the register-tiled kernels
/// (`tile_q8`, `tile_q2`, `tile_grid`). Callers check both ranges first.
#[cfg(target_arch = "x86_64")]
macro_rules! tile_shapes {
    ($rows:expr, $pairs:expr, $body:ident) => {
        match ($rows, $pairs) {
            (1, 1) => $body!(1, 1),
            (1, 2) => $body!(1, 2),
            (1, 3) => $body!(1, 3),
            (1, _) => $body!(1, 4),
            (2, 1) => $body!(2, 1),
            (2, 2) => $body!(2, 2),
            (2, 3) => $body!(2, 3),
            (2, _) => $body!(2, 4),
            (3, 1) => $body!(3, 1),
            (3, 2) => $body!(3, 2),
            (3, 3) => $body!(3, 3),
            (3, _) => $body!(3, 4),
            (_, 1) => $body!(4, 1),
            (_, 2) => $body!(4, 2),
            (_, 3) => $body!(4, 3),
            (_, _) => $body!(4, 4),
        }
    };
}
#[cfg(target_arch = "x86_64")]
use tile_shapes;

/// Safe entries of the sixteen-row group tiles (`q8::tile_x16`, `iq::group`), whose kernels
/// take `n / $block` blocks of a group and a panel and write `[column][row]`: each entry
/// checks the lengths against the invoking module's `group_bytes`, `panel_bytes` and
/// `PANEL_COLS`, then runs its kernel for the panel's column count. An entry written
/// `entry => kernel [h, inner]` is of a layout with `h` scale groups a block (`iq::group`):
/// the sizes take `h`, and the kernel's generics are `<columns, h, inner>`.
#[cfg(target_arch = "x86_64")]
macro_rules! group_tile_entries {
    ($block:literal; $($entry:ident => $kernel:ident $([$h:expr, $inner:expr])?),+ $(,)?) => {$(
        pub(crate) fn $entry(
            n: usize,
            group: &[u8],
            panel: &[u8],
            cols: usize,
            out: &mut [[f32; 16]],
        ) {
            assert!((1..=PANEL_COLS).contains(&cols), "tile columns");
            assert_eq!(group.len(), group_bytes(n $(, $h)?), "group length");
            assert_eq!(panel.len(), panel_bytes(n, cols $(, $h)?), "panel length");
            assert_eq!(out.len(), cols, "tile output length");
            let nb = n / $block;
            macro_rules! go {
                ($c:literal) => {{
                    let out: &mut [[f32; 16]; $c] = out.try_into().expect("checked above");
                    // SAFETY: `table::kernels` hands this entry out only after checking the
                    // features; the lengths are checked above (every block of the group and
                    // the panel is in bounds).
                    unsafe { $kernel::<$c $(, $h, $inner)?>(nb, group, panel, out) }
                }};
            }
            match cols {
                1 => go!(1),
                2 => go!(2),
                3 => go!(3),
                4 => go!(4),
                5 => go!(5),
                6 => go!(6),
                7 => go!(7),
                _ => go!(8),
            }
        }
    )+};
}
#[cfg(target_arch = "x86_64")]
use group_tile_entries;

/// Copies a tile's `[column][row]` sums into row-major `out` (`rows` × `cols`), times
/// `scale` (1.0 is exact).
#[cfg(target_arch = "x86_64")]
fn store_tile(s: &[[f32; 4]; 8], rows: usize, cols: usize, scale: f32, out: &mut [f32]) {
    for r in 0..rows {
        for c in 0..cols {
            out[r * cols + c] = scale * s[c][r];
        }
    }
}

/// Little-endian f16 bytes → f32 with one F16C instruction (exact, like
/// [`crate::scalar::le_f16`], which goes through a run-time-dispatched library call). A macro,
/// not a function: an intrinsic is only inlined into a function compiled with its features,
/// so a plain helper would turn it into a call. Use inside `f16c`-enabled kernels only.
#[cfg(target_arch = "x86_64")]
macro_rules! f16c {
    // `set1` (a broadcast) rather than `cvtsi32`: LLVM folds the latter into a `vpinsrw` that
    // merges into whatever register it picks, which can chain unrelated iterations
    ($b:expr) => {
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(u16::from_le_bytes($b) as i16)))
    };
}
#[cfg(target_arch = "x86_64")]
use f16c;

/// Eight f16 values → f32 with one `vcvtph2ps` (exact). Kernels convert their per-block
/// scales eight at a time with this: a scalar F16C conversion per block compiles to a
/// `vpinsrw` that merges into a live register and chains every block to the previous FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn f16x8(h: &[u16; 8]) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: `h` is 16 readable bytes (unaligned load).
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(h.as_ptr().cast()) })
}

/// `vpdpwssd` (`acc + a₀·b₀ + a₁·b₁` per 32-bit lane, 16-bit signed pairs) as one instruction.
/// With its default (generic) tuning LLVM rewrites `_mm512_dpwssd_epi32` into `vpmaddwd` +
/// `vpaddd`, two vector operations where the CPU has a one-operation instruction that runs
/// at the same rate (measured on this project's AVX-512 hosts: 1.9 per cycle with enough
/// independent accumulators); in the register tiles that split was a third of the inner
/// loop's operations. Inline assembly keeps the instruction. Same result bit for bit.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vnni")]
#[inline]
fn dpwssd(
    acc: std::arch::x86_64::__m512i,
    a: std::arch::x86_64::__m512i,
    b: std::arch::x86_64::__m512i,
) -> std::arch::x86_64::__m512i {
    let mut acc = acc;
    // SAFETY: a register-only instruction of AVX-512 VNNI, which this function requires;
    // it reads and writes only the named registers.
    unsafe {
        std::arch::asm!(
            "vpdpwssd {acc}, {a}, {b}",
            acc = inout(zmm_reg) acc,
            a = in(zmm_reg) a,
            b = in(zmm_reg) b,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    acc
}

/// Per 128-bit lane, the lane sums of `a`, `b`, `c`, `d` (exact): lane L of the result is
/// `[Σ_L a, Σ_L b, Σ_L c, Σ_L d]`. Reduces four registers of lane sums at once.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn tree4(
    a: std::arch::x86_64::__m512i,
    b: std::arch::x86_64::__m512i,
    c: std::arch::x86_64::__m512i,
    d: std::arch::x86_64::__m512i,
) -> std::arch::x86_64::__m512i {
    use std::arch::x86_64::*;
    let ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    let cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd))
}

/// The whole lane sums of `a`, `b`, `c`, `d` (exact), as the four lanes of one register:
/// [`tree4`], then its four 128-bit lanes added.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn sums4(
    a: std::arch::x86_64::__m512i,
    b: std::arch::x86_64::__m512i,
    c: std::arch::x86_64::__m512i,
    d: std::arch::x86_64::__m512i,
) -> std::arch::x86_64::__m128i {
    use std::arch::x86_64::*;
    let t = tree4(a, b, c, d);
    let t = _mm512_add_epi32(t, _mm512_shuffle_i32x4::<0b01_00_11_10>(t, t));
    let t = _mm512_add_epi32(t, _mm512_shuffle_i32x4::<0b10_11_00_01>(t, t));
    _mm512_castsi512_si128(t)
}

/// `t`'s 128-bit lanes 0 + 1 and 2 + 3 (exact): after [`tree4`] on registers holding two
/// columns each (lanes 0–1 the first, 2–3 the second), the first and the second column.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn fold_pairs(
    t: std::arch::x86_64::__m512i,
) -> (std::arch::x86_64::__m128i, std::arch::x86_64::__m128i) {
    use std::arch::x86_64::*;
    let u = _mm512_add_epi32(t, _mm512_shuffle_i32x4::<0x31>(t, t));
    (_mm512_castsi512_si128(u), _mm512_extracti32x4_epi32::<2>(u))
}

/// `vpermw` controls for two registers' packed four-element sums (`vpackssdw` of registers
/// 2q and 2q + 1: in 128-bit lane j, words 0–3 from register 2q, words 4–7 from 2q + 1):
/// word w of lane j in pair q takes scale word `cq·q + cw·(w/4) + ch·(j/2) + cl·(j mod 2) +
/// offset`, the coefficients saying where each layout keeps the scale of those elements.
pub(crate) const fn packed_pick(
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
pub(crate) const fn pair_pick(stride: usize, offset: usize) -> [[u16; 32]; 2] {
    packed_pick(4 * stride, 2 * stride, stride, 0, offset)
}

/// A 64-byte constant table in a register: any `Pod` value of exactly 64 bytes (checked at
/// compile time), so the load never reads past it. The kernels' constructors load their
/// control tables with this (and [`tables64`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn table64<T: bytemuck::Pod>(t: &T) -> std::arch::x86_64::__m512i {
    const { assert!(size_of::<T>() == 64, "not a 64-byte table") };
    // SAFETY: `t` is 64 readable bytes (checked above); unaligned load.
    unsafe { std::arch::x86_64::_mm512_loadu_si512((t as *const T).cast()) }
}

/// [`table64`] of each of `N` tables (for instance the two `vpermw` controls of a
/// [`packed_pick`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn tables64<T: bytemuck::Pod, const N: usize>(
    t: &[T; N],
) -> [std::arch::x86_64::__m512i; N] {
    let mut out = [std::arch::x86_64::_mm512_setzero_si512(); N];
    for (o, t) in out.iter_mut().zip(t) {
        *o = table64(t);
    }
    out
}

/// `acc` plus a super-block's Σ_g s_g·Σ_{e∈g} (its four quarters' four-element sums `d`,
/// `vpdpbusd`, each |·| < 2¹⁵, times their groups' scales): two quarters packed to words per
/// register (`vpackssdw`) and one `vpdpwssd` per pair against `sc`, the pair's scales
/// ([`pair_pick`]). One multiply per quarter instead of `vpmaddubsw` + `vpdpwssd`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
pub(crate) fn scale_pairs(
    acc: std::arch::x86_64::__m512i,
    d: &[std::arch::x86_64::__m512i; 4],
    sc: &[std::arch::x86_64::__m512i; 2],
) -> std::arch::x86_64::__m512i {
    let acc = dpwssd(
        acc,
        std::arch::x86_64::_mm512_packs_epi32(d[0], d[1]),
        sc[0],
    );
    dpwssd(
        acc,
        std::arch::x86_64::_mm512_packs_epi32(d[2], d[3]),
        sc[1],
    )
}

/// Horizontal sum of 8 i32 lanes (exact).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn hsum_i32(v: std::arch::x86_64::__m256i) -> i32 {
    use std::arch::x86_64::*;
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// The eight lanes' sums of eight i32 vectors, vector `i`'s in lane `i` (exact integers: the
/// order of the additions does not matter): a `vphaddd` tree and one cross-lane add, a third
/// of the instructions of eight separate horizontal sums.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn hsum_i32x8(v: &[std::arch::x86_64::__m256i; 8]) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    let t0 = _mm256_hadd_epi32(v[0], v[1]);
    let t1 = _mm256_hadd_epi32(v[2], v[3]);
    let t2 = _mm256_hadd_epi32(v[4], v[5]);
    let t3 = _mm256_hadd_epi32(v[6], v[7]);
    // u0: (half sums of v0, v1, v2, v3) per 128-bit lane; u1 the same of v4..v7
    let u0 = _mm256_hadd_epi32(t0, t1);
    let u1 = _mm256_hadd_epi32(t2, t3);
    _mm256_add_epi32(
        _mm256_permute2x128_si256(u0, u1, 0x20),
        _mm256_permute2x128_si256(u0, u1, 0x31),
    )
}

/// Splits `n` activation columns into passes of at most `max` (≥ 3) columns, in order, with
/// no pass of a single column unless `n` is 1: where one column would be left over, the
/// pass before it gives up a column (for `max` 4: 5 → 3 + 2, 9 → 4 + 3 + 2; for 8: 9 → 7 +
/// 2). So a multi-column kernel's passes are {max, …, 3, 2} — every unpacked block serves
/// at least two columns — and there are as few passes as `n.div_ceil(max)`.
///
/// # Panics
/// If `max` < 3 (a caller's bug: 3 columns cannot be split into passes of 2 without a 1).
pub fn column_split(n: usize, max: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    assert!(max >= 3, "column_split: passes of at most {max} columns");
    let mut start = 0;
    std::iter::from_fn(move || {
        let rem = n - start;
        if rem == 0 {
            return None;
        }
        let take = if rem == max + 1 {
            max - 1
        } else {
            rem.min(max)
        };
        start += take;
        Some(start - take..start)
    })
}

/// Up to four weight rows of a multi-row kernel pass viewed as blocks of `B`, and the
/// fewest blocks any of them holds (at most `cap`, the activation's).
#[cfg(target_arch = "x86_64")]
fn row_views<'a, B: bytemuck::Pod>(rows: &[&'a [u8]], cap: usize) -> ([&'a [B]; 4], usize) {
    let mut xs: [&[B]; 4] = [&[]; 4];
    let mut nb = cap;
    for (x, w) in xs.iter_mut().zip(rows) {
        *x = crate::blocks::view::<B>(w);
        nb = nb.min(x.len());
    }
    (xs, nb)
}

/// How far ahead of its read position a multi-row kernel prefetches each weight stream, in
/// bytes. Measured on the project's hosts (`docs/kernels.md`): 2 KiB carried every stream
/// into its next row without evicting what the kernels still read; no prefetch left the
/// hardware prefetchers short of the memory latency on a VM (Q6_K 8.8 against 16.3 GB/s).
pub const PREFETCH_DISTANCE: usize = 2048;

/// Prefetches the `len` bytes that lie `dist` bytes after `p` (one hint per 64-byte line;
/// nothing if `dist` is 0, or on other architectures). The address may lie past the end of
/// the weights: a prefetch is a hint, never a load, so the pointer is only formed
/// (`wrapping_add`) and never read.
#[inline(always)]
pub fn prefetch_ahead(p: *const u8, len: usize, dist: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        if dist == 0 {
            return;
        }
        let mut o = 0;
        while o < len {
            // SAFETY: a prefetch cannot fault and reads nothing into the program; the
            // address is only computed. SSE is part of the x86_64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(dist).wrapping_add(o).cast()) };
            o += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len, dist);
}

/// Asks the CPU to start loading `bytes` into cache (one prefetch per 64-byte line; nothing
/// on other architectures). Matmuls call it for the next weight row while computing the
/// current one: the hardware prefetchers stop at 4 KiB page boundaries, and weights mapped
/// from a file sit in 4 KiB pages, so without it every page starts with a cold miss.
#[inline]
pub fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        for line in bytes.chunks(64) {
            // SAFETY: a prefetch is only a hint and cannot fault; the address is inside
            // `bytes` anyway. SSE is part of the x86_64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
