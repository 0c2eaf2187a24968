//! AMX-INT8 tiled GEMM for the grid formats IQ2_XXS and IQ1_S (and their repacked forms
//! IQ2_XXS_X and IQ1_S_X) against Q8_K, for MoE experts chosen by several tokens: up to 16
//! weight rows × 16 activation columns per call, every output with the scalar reference's
//! bits. Used only where the CPU has AMX-TILE and AMX-INT8, the OS lets this process use the
//! tile registers (Linux `arch_prctl(ARCH_REQ_XCOMP_PERM)`), and the AVX-512 tier is there for
//! the float combine (the [`crate::simd::CpuLevel::Amx`] level of the kernel table).
//!
//! **Why a layout of its own.** The reference sums a super-block as exact integers —
//! IQ2_XXS `bsum = Σ_g ls_g·Σ_{j∈g} v_j·y_j`, IQ1_S `sumi = Σ_g ls_g·Σ v·y` and the delta sum
//! `sumi1 = Σ_g lsg_g·Σ y` — and only then combines in float. A tile multiply (`tdpbssd`)
//! sums int8 × int8 products over up to 64 elements into int32, with no per-group factor.
//! So the group scale is folded into the weight: per element the integer
//! - IQ2_XXS: `W = ls_g·v` (|W| ≤ 31·43 = 1333);
//! - IQ1_S: `W = 8·ls_g·v + lsg_g` (|W| ≤ 135), so that `Σ W·y = 8·sumi + sumi1 = T`,
//!
//! and `W` is split into two int8 planes, `W = 64·h + l` with `h = (W + 32) >> 6`
//! (|h| ≤ 21) and `l ∈ [−32, 31]`. Two tile products per 64 elements give
//! `T = 64·Σ h·y + Σ l·y`, the exact integer (|Σh·y|·64 ≤ 256·21·128·64 < 2³¹). The float
//! combine is then the reference's: IQ2_XXS `s += (d·dy)·f32(T)` and a final `×0.125`;
//! IQ1_S `s += (d·dy)·(f32(T)·0.125)`, which equals the reference's
//! `f32(sumi) + 0.125·f32(sumi1)` because both are the exact `T/8` (|T| < 2²⁴).
//!
//! **AMX-expanded row** ([`amx_bytes`] per row; [`AMX_SB`] = 576 bytes per 256-element
//! super-block): bytes 0..256 the `h` plane and 256..512 the `l` plane, in element order; 512..516
//! the super-block scale `d` as f32; zeros to 576. Made from the grid expander's layout
//! ([`crate::simd::iq::tile`]) by [`split_expanded`] (the reference) or its AVX-512 form; for
//! the repacked IQ2_XXS_X and IQ1_S_X directly from the row ([`amx_expand_iq2_xxs_x`],
//! [`amx_expand_iq1_s_x`] and their AVX-512 form in the kernel table): level codes and group
//! nibbles index a 64-entry table per plane, which costs less than expanding and splitting.
//!
//! **Activation panel** ([`pack_panel`]): per super-block, four 64-element steps of a
//! `tdpbssd` B operand — 16 rows of `4·cols` bytes, row `k` holding elements `4k..4k+3` of
//! every column side by side — and then the columns' `d` as 16 f32 (zero-padded).
//!
//! **Kernel.** Per super-block: two accumulator tiles zeroed, four steps of (load the `h` and
//! `l` tiles of up to 16 rows, load the panel step, two `tdpbssd`), both accumulators stored,
//! and per row one 16-lane combine (`T = (hi << 6) + lo`, convert, scale, multiply-add in the
//! reference's order). Measured on the AMX host (a KVM guest, 2 vCPUs) in a scratch harness,
//! in cycles of a dependent `add` loop: `tileloadd` 8–14, `tdpbssd` 16–19, `tilestored` 8–9
//! (bare-metal figures; the guest itself runs slowly), and the whole super-block ~0.5 µs for
//! 16 × 16 outputs (2.0 ns per row, column and super-block, against 5.0 ns for the VNNI
//! register tile).

use crate::blocks::{view, BlockIQ1SX, BlockIQ2XXSX, BlockQ8K};
use crate::codec::repack::{iq1sx_code, iq1sx_group, iq2xx_scale, iq2xx_value};
use crate::scalar::le_f16;
use crate::simd::iq::tile::EXPANDED_SB;
use crate::DType;

/// Bytes per 256-element super-block of an AMX-expanded row (see the module docs).
pub const AMX_SB: usize = 576;

/// Most weight rows per kernel call (one tile's rows).
pub const TILE_ROWS: usize = 16;

/// Most activation columns per kernel call (one tile's 32-bit columns).
pub const TILE_COLS: usize = 16;

/// Bytes of one panel step: 16 rows of 4 bytes per column.
fn step_bytes(cols: usize) -> usize {
    64 * cols
}

/// Bytes of the panel per super-block for `cols` columns: four steps and 16 f32 scales.
fn panel_sb_bytes(cols: usize) -> usize {
    4 * step_bytes(cols) + 64
}

/// The two grid families, by their integer fold (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridKind {
    /// IQ2_XXS and IQ2_XXS_X: `W = ls·v`, `s += (d·dy)·f32(T)`, final `×0.125`.
    Iq2,
    /// IQ1_S and IQ1_S_X: `W = 8·ls·v + lsg`, `s += (d·dy)·(f32(T)·0.125)`.
    Iq1,
}

impl GridKind {
    /// The family of `dtype`, if it is a grid format this module handles.
    pub fn of(dtype: DType) -> Option<GridKind> {
        match dtype {
            DType::IQ2_XXS | DType::IQ2_XXS_X => Some(GridKind::Iq2),
            DType::IQ1_S | DType::IQ1_S_X => Some(GridKind::Iq1),
            _ => None,
        }
    }
}

/// Bytes of an AMX-expanded row of `n` elements.
pub fn amx_bytes(n: usize) -> usize {
    n / 256 * AMX_SB
}

/// Bytes of the activation panel ([`pack_panel`]) for `cols` (1..=[`TILE_COLS`]) Q8_K
/// columns of `n` elements.
pub fn panel_bytes(n: usize, cols: usize) -> usize {
    n / 256 * panel_sb_bytes(cols)
}

/// The folded weight of expanded element `e` of super-block `o` (see the module docs).
fn folded(kind: GridKind, o: &[u8], e: usize) -> i32 {
    let g = e / 32;
    let v = o[e] as i8 as i32;
    let ls = i16::from_le_bytes([o[256 + 4 * g], o[257 + 4 * g]]) as i32;
    let lsg = i16::from_le_bytes([o[296 + 4 * g], o[297 + 4 * g]]) as i32;
    match kind {
        GridKind::Iq2 => ls * v,
        GridKind::Iq1 => 8 * ls * v + lsg,
    }
}

/// The reference splitter: a row in the grid expander's layout ([`crate::simd::iq::tile`],
/// [`EXPANDED_SB`] bytes per super-block) → its AMX-expanded form in `out` ([`amx_bytes`]
/// long; see the module docs).
///
/// # Panics
/// If the lengths are not whole super-blocks of the two layouts (a caller's bug).
pub fn split_expanded(kind: GridKind, ex: &[u8], out: &mut [u8]) {
    assert_eq!(ex.len() % EXPANDED_SB, 0, "whole expanded super-blocks");
    assert_eq!(out.len(), ex.len() / EXPANDED_SB * AMX_SB, "AMX row length");
    for (o, a) in ex
        .chunks_exact(EXPANDED_SB)
        .zip(out.chunks_exact_mut(AMX_SB))
    {
        let d = f32::from_le_bytes([o[288], o[289], o[290], o[291]]);
        write_amx_sb(a, d, |e| folded(kind, o, e));
    }
}

/// Writes one AMX-expanded super-block `a` ([`AMX_SB`] bytes): element `e`'s folded weight
/// `w(e)` as `h = (w + 32) >> 6` and `l = w − 64·h`, then `d` and the zero padding. The
/// scalar references' common last step.
fn write_amx_sb(a: &mut [u8], d: f32, w: impl Fn(usize) -> i32) {
    for e in 0..256 {
        let w = w(e);
        let h = (w + 32) >> 6;
        a[e] = h as i8 as u8;
        a[256 + e] = (w - 64 * h) as i8 as u8;
    }
    a[512..516].copy_from_slice(&d.to_le_bytes());
    a[516..].fill(0);
}

/// The scalar reference dot of an AMX-expanded row with a Q8_K row, in the kernel's
/// operations: per super-block the exact `T = Σ (64·h + l)·y` and the reference's float
/// combine. Equal to the grid format's own reference dot of the row it was made from
/// (tested in `quant/tests/simd.rs`).
pub fn dot_amx_reference(kind: GridKind, n: usize, w: &[u8], a: &[u8]) -> f32 {
    let ys = view::<BlockQ8K>(a);
    let mut s = 0f32;
    for (x, y) in w.chunks_exact(AMX_SB).zip(ys).take(n / 256) {
        let t: i32 = (0..256)
            .map(|e| (64 * (x[e] as i8 as i32) + x[256 + e] as i8 as i32) * y.qs[e] as i32)
            .sum();
        let d = f32::from_le_bytes([x[512], x[513], x[514], x[515]]);
        s += match kind {
            GridKind::Iq2 => d * y.d() * t as f32,
            GridKind::Iq1 => d * y.d() * (t as f32 * 0.125),
        };
    }
    match kind {
        GridKind::Iq2 => 0.125 * s,
        GridKind::Iq1 => s,
    }
}

/// Packs `acts` (1..=[`TILE_COLS`] Q8_K rows of `n` elements) into `out`, which must be
/// [`panel_bytes`]`(n, acts.len())` long (see the module docs for the layout).
///
/// # Panics
/// If the column count or a length does not match (a caller's bug, not bad input).
pub fn pack_panel(n: usize, acts: &[&[u8]], out: &mut [u8]) {
    let cols = acts.len();
    assert!((1..=TILE_COLS).contains(&cols), "panel of {cols} columns");
    assert_eq!(out.len(), panel_bytes(n, cols), "panel length");
    let ys: Vec<&[BlockQ8K]> = acts.iter().map(|a| view(a)).collect();
    assert!(ys.iter().all(|y| y.len() == n / 256), "activation length");
    for (b, p) in out.chunks_exact_mut(panel_sb_bytes(cols)).enumerate() {
        let (codes, ds) = p.split_at_mut(4 * step_bytes(cols));
        for (i, quad) in codes.chunks_exact_mut(4).enumerate() {
            // quad i: step s, row k, column c; elements 64s + 4k .. +4 of column c
            let (k4, c) = (i / cols, i % cols);
            for (j, q) in quad.iter_mut().enumerate() {
                *q = ys[c][b].qs[4 * k4 + j] as u8;
            }
        }
        for (c, d) in ds.chunks_exact_mut(4).enumerate() {
            let v = if c < cols { ys[c][b].d() } else { 0.0 };
            d.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// The reference direct expander of IQ2_XXS_X: a row straight into its AMX-expanded form
/// (`W = ls·v` per element, `h = (W + 32) >> 6`, `l = W − 64·h`, then `d`), the same bytes as
/// [`split_expanded`] of the grid-expanded row, without that intermediate.
///
/// # Panics
/// If `out` is not [`amx_bytes`] of the row's length (a caller's bug).
pub fn amx_expand_iq2_xxs_x(w: &[u8], out: &mut [u8]) {
    let xs = view::<BlockIQ2XXSX>(w);
    assert_eq!(out.len(), xs.len() * AMX_SB, "AMX row length");
    for (x, a) in xs.iter().zip(out.chunks_exact_mut(AMX_SB)) {
        write_amx_sb(a, le_f16(x.d), |e| {
            iq2xx_scale(x, e / 32) * iq2xx_value(x, e)
        });
    }
}

/// The reference direct expander of IQ1_S_X: `W = 8·ls·(code − 1) + lsg` per element (`ls`
/// and the delta sign from the group's nibble, `lsg = ±ls`), split as in [`split_expanded`]:
/// the same bytes as the split of the grid-expanded row.
///
/// # Panics
/// If `out` is not [`amx_bytes`] of the row's length (a caller's bug).
pub fn amx_expand_iq1_s_x(w: &[u8], out: &mut [u8]) {
    let xs = view::<BlockIQ1SX>(w);
    assert_eq!(out.len(), xs.len() * AMX_SB, "AMX row length");
    for (x, a) in xs.iter().zip(out.chunks_exact_mut(AMX_SB)) {
        write_amx_sb(a, le_f16(x.d), |e| {
            let (ls, neg) = iq1sx_group(x, e / 32);
            8 * ls * (iq1sx_code(x, e) as i32 - 1) + if neg { -ls } else { ls }
        });
    }
}

/// A direct expander: weight row → AMX-expanded row in one pass (no grid-expanded row).
pub type AmxExpandFn = fn(w: &[u8], out: &mut [u8]);

/// A splitter: expanded grid row → AMX-expanded row (the layout of [`split_expanded`]).
pub type SplitFn = fn(kind: GridKind, ex: &[u8], out: &mut [u8]);

/// An AMX tile kernel: `out[r * cols + c] = dot(n, row r, acts[c])` for `nr` (1..=16)
/// AMX-expanded rows placed back to back in `rows` ([`amx_bytes`]`(n)` each) and `cols`
/// (1..=16) columns packed in `panel` ([`pack_panel`]).
pub type AmxTileFn =
    fn(n: usize, rows: &[u8], nr: usize, panel: &[u8], cols: usize, out: &mut [f32]);

/// Whether this process may run the AMX kernels: an x86_64 CPU with AMX-TILE and AMX-INT8
/// whose OS enables the tile state (XCR0 bits 17 and 18) and Linux granting this process the
/// tile data (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`). Part of
/// [`crate::simd::CpuLevel::detect`], which checks it once.
pub(crate) fn amx_allowed() -> bool {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        x86::cpu_and_os_allow_amx()
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{step_bytes, GridKind, AMX_SB, TILE_COLS, TILE_ROWS};
    use crate::codec::repack::IQ2X_LEVELS;
    use crate::scalar::le_f16;
    use crate::simd::iq::tile::EXPANDED_SB;
    use std::arch::asm;
    use std::arch::x86_64::*;

    /// CPUID and XCR0 report AMX-TILE, AMX-INT8 and the OS-enabled tile state, and Linux
    /// grants this process the tile data.
    #[cfg(target_os = "linux")]
    pub(super) fn cpu_and_os_allow_amx() -> bool {
        // leaf 7 exists on every CPU with the AVX-512 tier checked before this
        let l7 = __cpuid_count(7, 0);
        let (tile, int8) = (l7.edx & (1 << 24) != 0, l7.edx & (1 << 25) != 0);
        let osxsave = __cpuid(1).ecx & (1 << 27) != 0;
        if !(tile && int8 && osxsave) {
            return false;
        }
        let (lo, _hi): (u32, u32);
        // SAFETY: `xgetbv` with ECX = 0 reads XCR0; it is valid when CPUID reports OSXSAVE
        // (checked above). It touches no memory.
        unsafe {
            asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") _hi,
                 options(nomem, nostack, preserves_flags));
        }
        if lo & (3 << 17) != 3 << 17 {
            return false;
        }
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: arch_prctl(ARCH_REQ_XCOMP_PERM, 18) only asks the kernel to enlarge this
        // process's signal frames and permit the tile state; it takes no pointers.
        let r = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        r == 0
    }

    /// Safe entry of the AVX-512 splitter: checks the lengths, then splits.
    pub(crate) fn split_entry(kind: GridKind, ex: &[u8], out: &mut [u8]) {
        assert_eq!(ex.len() % EXPANDED_SB, 0, "whole expanded super-blocks");
        assert_eq!(out.len(), ex.len() / EXPANDED_SB * AMX_SB, "AMX row length");
        // SAFETY: `table::kernels` hands this entry out only after checking the AVX-512 features;
        // the lengths are checked above.
        unsafe { split(kind, ex, out) }
    }

    /// [`super::split_expanded`] with 512-bit registers, 64 elements (two groups) per step and
    /// no widening: a `vpermb` spreads the groups' multipliers (`ls`, or `8·ls` for IQ1_S) over
    /// the even and the odd bytes, two `vpmaddubsw` give the folded `W` of the even and of the
    /// odd elements as i16 (the other byte of each pair meets a zero multiplier), IQ1_S adds
    /// `lsg` (a `vpermw`), and with `t = W + 32` the planes are `h = t >> 6` and
    /// `l = (t & 63) − 32`, each put back into byte order by a shift and a `vpternlogd`.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F/BW/VBMI; the lengths are whole super-blocks of both layouts.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn split(kind: GridKind, ex: &[u8], out: &mut [u8]) {
        const EVEN: u64 = 0x5555_5555_5555_5555;
        let lo_byte = _mm512_set1_epi16(0x00ff);
        let x63 = _mm512_set1_epi8(63);
        let x32b = _mm512_set1_epi8(32);
        let x32w = _mm512_set1_epi16(32);
        // byte e of step c (elements 64c..64c+64) takes the multiplier of group 2c + e/32,
        // the low byte of the i16 at 4·group; word i of the i16 results belongs to group
        // 2c + i/16, whose `lsg` is the i16 at word 2·group
        let byte_idx: [__m512i; 4] = core::array::from_fn(|c| {
            _mm512_add_epi8(
                _mm512_set1_epi8((8 * c) as i8),
                _mm512_set_epi64(
                    0x0404_0404_0404_0404,
                    0x0404_0404_0404_0404,
                    0x0404_0404_0404_0404,
                    0x0404_0404_0404_0404,
                    0,
                    0,
                    0,
                    0,
                ),
            )
        });
        let word_idx: [__m512i; 4] = core::array::from_fn(|c| {
            _mm512_add_epi16(
                _mm512_set1_epi16((4 * c) as i16),
                _mm512_set_epi64(
                    0x0002_0002_0002_0002,
                    0x0002_0002_0002_0002,
                    0x0002_0002_0002_0002,
                    0x0002_0002_0002_0002,
                    0,
                    0,
                    0,
                    0,
                ),
            )
        });
        for (o, a) in ex
            .chunks_exact(EXPANDED_SB)
            .zip(out.chunks_exact_mut(AMX_SB))
        {
            // SAFETY: bytes 256..288 (the `ls` words) and 296..328 (the `lsg` words) lie inside
            // the 328-byte expanded super-block (unaligned loads).
            let (ls, lsg) = unsafe {
                (
                    _mm512_castsi256_si512(_mm256_loadu_si256(o[256..288].as_ptr().cast())),
                    _mm512_castsi256_si512(_mm256_loadu_si256(o[296..328].as_ptr().cast())),
                )
            };
            // ls ≤ 31 (IQ2_XXS) and 8·ls ≤ 120 (IQ1_S): the low byte holds it, unsigned
            let mult = if kind == GridKind::Iq2 {
                ls
            } else {
                _mm512_slli_epi16::<3>(ls)
            };
            for c in 0..4 {
                // SAFETY: bytes 64c..64c+64 of the expanded super-block.
                let v = unsafe { _mm512_loadu_si512(o[64 * c..].as_ptr().cast()) };
                let m_even = _mm512_maskz_permutexvar_epi8(EVEN, byte_idx[c], mult);
                let m_odd = _mm512_maskz_permutexvar_epi8(!EVEN, byte_idx[c], mult);
                let add = if kind == GridKind::Iq2 {
                    x32w
                } else {
                    _mm512_add_epi16(_mm512_permutexvar_epi16(word_idx[c], lsg), x32w)
                };
                let te = _mm512_add_epi16(_mm512_maddubs_epi16(m_even, v), add);
                let to = _mm512_add_epi16(_mm512_maddubs_epi16(m_odd, v), add);
                // (a & b) | c: even words' low bytes, odd words' low bytes moved up
                let t = _mm512_ternarylogic_epi32::<0xEA>(te, lo_byte, _mm512_slli_epi16::<8>(to));
                let h = _mm512_ternarylogic_epi32::<0xEA>(
                    _mm512_srai_epi16::<6>(te),
                    lo_byte,
                    _mm512_slli_epi16::<8>(_mm512_srai_epi16::<6>(to)),
                );
                let l = _mm512_sub_epi8(_mm512_and_si512(t, x63), x32b);
                // SAFETY: bytes 64c.. of each 256-byte plane of the AMX super-block.
                unsafe {
                    _mm512_storeu_si512(a[64 * c..].as_mut_ptr().cast(), h);
                    _mm512_storeu_si512(a[256 + 64 * c..].as_mut_ptr().cast(), l);
                }
            }
            a[512..516].copy_from_slice(&o[288..292]);
            a[516..].fill(0);
        }
    }

    /// `vpermb` tables of the direct expanders, index `l | s << 2` (level code `l`, group
    /// nibble `s`) → the `h` and the `l` plane byte of the folded weight: IQ2_XXS_X
    /// `W = (2·s + 1)·level(l)` (before the element's sign), IQ1_S_X
    /// `W = 8·ls·(l − 1) ± ls` with `ls = 2·(s & 7) + 1` and `−` where `s & 8`.
    static DIRECT_PLANES: [[[u8; 64]; 2]; 2] = {
        let mut t = [[[0u8; 64]; 2]; 2];
        let mut i = 0;
        while i < 64 {
            let (l, s) = ((i & 3) as i32, (i >> 2) as i32);
            let ls1 = 2 * (s & 7) + 1;
            let w = [
                (2 * s + 1) * IQ2X_LEVELS[i & 3] as i32,
                8 * ls1 * (l - 1) + if s & 8 != 0 { -ls1 } else { ls1 },
            ];
            let mut k = 0;
            while k < 2 {
                let h = (w[k] + 32) >> 6;
                t[k][0][i] = h as i8 as u8;
                t[k][1][i] = (w[k] - 64 * h) as i8 as u8;
                k += 1;
            }
            i += 1;
        }
        t
    };

    /// `vpmultishiftqb` controls on the block's `sc` broadcast to every dword (each qword
    /// holds it twice): for quarter `p`, bytes 0..32 take the bits from `8p − 2` (group 2p's
    /// nibble lands at bits 2..5), bytes 32..64 from `8p + 2` (group 2p + 1's).
    static NIBBLE_CTRL: [[u8; 64]; 4] = {
        let mut t = [[0u8; 64]; 4];
        let mut p = 0;
        while p < 4 {
            let mut i = 0;
            while i < 64 {
                t[p][i] = if i < 32 {
                    ((8 * p + 62) % 64) as u8
                } else {
                    (8 * p + 2) as u8
                };
                i += 1;
            }
            p += 1;
        }
        t
    };

    /// Safe entry of the AVX-512 direct expander (IQ2_XXS_X when `IQ2`, else IQ1_S_X):
    /// checks the lengths, then expands.
    pub(crate) fn expand_direct_entry<const IQ2: bool>(w: &[u8], out: &mut [u8]) {
        let bs = if IQ2 { 102 } else { 70 };
        assert_eq!(w.len() % bs, 0, "whole repacked blocks");
        assert_eq!(out.len(), w.len() / bs * AMX_SB, "AMX row length");
        // SAFETY: `table::kernels` hands this entry out only after checking the AVX-512
        // features; the lengths are checked above.
        unsafe { expand_direct::<IQ2>(w, out) }
    }

    /// [`super::amx_expand_iq2_xxs_x`] / [`super::amx_expand_iq1_s_x`] with 512-bit
    /// registers, a quarter (64 elements) per step. Both repacked blocks start with `d`
    /// (bytes 0..2), the group nibbles `sc` (2..6) and the level codes (6..70: IQ2_XXS_X's
    /// element `64p + i` at bits 2p, 2p + 1 of byte i, IQ1_S_X's half-major, see
    /// `codec::repack::iq1mx_code_at`); IQ2_XXS_X adds the sign bits (70..102). The
    /// level codes (shifted down) and the two groups' nibbles (`vpmultishiftqb` of `sc`) merge
    /// into a 6-bit index by one `vpternlogd`, each plane is one `vpermb`, and IQ2_XXS_X's
    /// signs negate both planes by a masked subtraction: negation commutes with the split
    /// because its `W = ls·level` is never 32 mod 64 (`ls` odd, levels 8, 25, 43 and 0).
    /// `quant/tests/amx.rs` checks the bytes against the split of the grid-expanded row on
    /// random blocks and on every index × sign.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F/BW/VBMI; `w` is whole repacked blocks and `out` their
    /// AMX-expanded length.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn expand_direct<const IQ2: bool>(w: &[u8], out: &mut [u8]) {
        let (bs, planes) = if IQ2 {
            (102, &DIRECT_PLANES[0])
        } else {
            (70, &DIRECT_PLANES[1])
        };
        // SAFETY: the tables are 64 bytes each (unaligned loads).
        let (th, tl, ctrl) = unsafe {
            (
                _mm512_loadu_si512(planes[0].as_ptr().cast()),
                _mm512_loadu_si512(planes[1].as_ptr().cast()),
                NIBBLE_CTRL.map(|c| _mm512_loadu_si512(c.as_ptr().cast())),
            )
        };
        let three = _mm512_set1_epi8(3);
        let zero = _mm512_setzero_si512();
        for (x, a) in w.chunks_exact(bs).zip(out.chunks_exact_mut(AMX_SB)) {
            // SAFETY: a block's 64 code bytes at 6..70 are readable (unaligned load).
            let q = unsafe { _mm512_loadu_si512(x[6..70].as_ptr().cast()) };
            let sc = _mm512_set1_epi32(i32::from_le_bytes([x[2], x[3], x[4], x[5]]));
            // each quarter's codes at bits 0..2 of every byte (the bits above are masked
            // below): IQ2_XXS_X's by a shift, IQ1_S_X's (half-major) by a `vpermd` and a
            // `vpsrlvd`
            let codes = if IQ2 {
                [
                    q,
                    _mm512_srli_epi16::<2>(q),
                    _mm512_srli_epi16::<4>(q),
                    _mm512_srli_epi16::<6>(q),
                ]
            } else {
                crate::simd::iq::avx512::half_major_quarters(q)
            };
            for (p, c) in codes.into_iter().enumerate() {
                // bits 0..2 the level code, 2..6 the group's nibble; `vpermb` ignores 6..8
                let idx = _mm512_ternarylogic_epi32::<0xE2>(
                    c,
                    three,
                    _mm512_multishift_epi64_epi8(ctrl[p], sc),
                );
                let mut h = _mm512_permutexvar_epi8(idx, th);
                let mut l = _mm512_permutexvar_epi8(idx, tl);
                if IQ2 {
                    let neg = u64::from_le_bytes(x[70 + 8 * p..78 + 8 * p].try_into().unwrap());
                    h = _mm512_mask_sub_epi8(h, neg, zero, h);
                    l = _mm512_mask_sub_epi8(l, neg, zero, l);
                }
                // SAFETY: bytes 64p.. of each 256-byte plane of the AMX super-block.
                unsafe {
                    _mm512_storeu_si512(a[64 * p..].as_mut_ptr().cast(), h);
                    _mm512_storeu_si512(a[256 + 64 * p..].as_mut_ptr().cast(), l);
                }
            }
            a[512..516].copy_from_slice(&le_f16([x[0], x[1]]).to_le_bytes());
            a[516..].fill(0);
        }
    }

    /// Safe entry (the IQ1_S family when `IQ1`, else IQ2_XXS): checks the shapes, then runs
    /// the kernel.
    pub(crate) fn tile_entry<const IQ1: bool>(
        n: usize,
        rows: &[u8],
        nr: usize,
        panel: &[u8],
        cols: usize,
        out: &mut [f32],
    ) {
        assert_eq!(n % 256, 0, "whole super-blocks");
        assert!((1..=TILE_ROWS).contains(&nr), "tile rows");
        assert!((1..=TILE_COLS).contains(&cols), "tile columns");
        assert_eq!(rows.len(), nr * super::amx_bytes(n), "AMX rows length");
        assert_eq!(panel.len(), super::panel_bytes(n, cols), "panel length");
        assert_eq!(out.len(), nr * cols, "tile output length");
        let kind = if IQ1 { GridKind::Iq1 } else { GridKind::Iq2 };
        // SAFETY: `table::kernels` hands the entries out only at the AMX level, which `amx_allowed()` confirmed (AMX-TILE,
        // AMX-INT8, the OS permission and the AVX-512 tier); the shapes are checked above.
        unsafe { tile(kind, n / 256, rows, nr, panel, cols, out) }
    }

    /// The 64-byte tile configuration (palette 1): tiles 0 and 1 the `h`/`l` accumulators
    /// (`nr` rows × `cols` i32), 2 and 3 the `h`/`l` weight tiles (`nr` rows × 64 bytes), 4
    /// the panel step (16 rows × `4·cols` bytes).
    #[repr(C, align(64))]
    struct TileConfig([u8; 64]);

    impl TileConfig {
        fn new(nr: usize, cols: usize) -> TileConfig {
            let mut b = [0u8; 64];
            b[0] = 1;
            let shapes = [
                (nr, 4 * cols),
                (nr, 4 * cols),
                (nr, 64),
                (nr, 64),
                (16, 4 * cols),
            ];
            for (t, (r, c)) in shapes.into_iter().enumerate() {
                b[16 + 2 * t..18 + 2 * t].copy_from_slice(&(c as u16).to_le_bytes());
                b[48 + t] = r as u8;
            }
            TileConfig(b)
        }
    }

    /// The kernel (see the module docs).
    ///
    /// # Safety
    /// AMX-TILE/INT8 usable by this process and the AVX-512 tier present; `rows` holds `nr`
    /// AMX-expanded rows of `nsb` super-blocks, `panel` a panel of `cols` columns of `nsb`
    /// super-blocks, `out` `nr·cols` floats.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
    unsafe fn tile(
        kind: GridKind,
        nsb: usize,
        rows: &[u8],
        nr: usize,
        panel: &[u8],
        cols: usize,
        out: &mut [f32],
    ) {
        #[repr(C, align(64))]
        struct Acc([[i32; 16]; 16]);
        let cfg = TileConfig::new(nr, cols);
        let (mut hi, mut lo) = (Acc([[0; 16]; 16]), Acc([[0; 16]; 16]));
        let mut s = [_mm512_setzero_ps(); TILE_ROWS];
        let rs = rows.len() / nr;
        let (sb_panel, step) = (super::panel_sb_bytes(cols), step_bytes(cols));
        let bs = 4 * cols;
        let eighth = _mm512_set1_ps(0.125);
        // SAFETY: the configuration is a valid palette-1 layout (rows ≤ 16, bytes per row
        // ≤ 64, the operand shapes of `tdpbssd` consistent).
        unsafe { asm!("ldtilecfg [{0}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly)) };
        for b in 0..nsb {
            let a = rows[b * AMX_SB..].as_ptr();
            let p = panel[b * sb_panel..].as_ptr();
            // SAFETY: the tile loads read `nr` rows of 64 bytes at stride `rs` from `a` (the
            // h plane) and `a + 256` (the l plane), steps 0..4 at +64·s: inside the rows
            // (super-block `b` of every row). The panel loads read 16 rows of `4·cols` bytes
            // at stride `4·cols` from step `s` of super-block `b`. The stores write `nr` rows
            // of `4·cols` bytes at stride 64 into the 1 KiB accumulators.
            unsafe {
                asm!(
                    "tilezero tmm0",
                    "tilezero tmm1",
                    "tileloadd tmm2, [{a} + {rs}*1]",
                    "tileloadd tmm3, [{a} + {rs}*1 + 256]",
                    "tileloadd tmm4, [{p0} + {bs}*1]",
                    "tdpbssd tmm0, tmm2, tmm4",
                    "tdpbssd tmm1, tmm3, tmm4",
                    "tileloadd tmm2, [{a} + {rs}*1 + 64]",
                    "tileloadd tmm3, [{a} + {rs}*1 + 320]",
                    "tileloadd tmm4, [{p1} + {bs}*1]",
                    "tdpbssd tmm0, tmm2, tmm4",
                    "tdpbssd tmm1, tmm3, tmm4",
                    "tileloadd tmm2, [{a} + {rs}*1 + 128]",
                    "tileloadd tmm3, [{a} + {rs}*1 + 384]",
                    "tileloadd tmm4, [{p2} + {bs}*1]",
                    "tdpbssd tmm0, tmm2, tmm4",
                    "tdpbssd tmm1, tmm3, tmm4",
                    "tileloadd tmm2, [{a} + {rs}*1 + 192]",
                    "tileloadd tmm3, [{a} + {rs}*1 + 448]",
                    "tileloadd tmm4, [{p3} + {bs}*1]",
                    "tdpbssd tmm0, tmm2, tmm4",
                    "tdpbssd tmm1, tmm3, tmm4",
                    "tilestored [{hi} + {st}*1], tmm0",
                    "tilestored [{lo} + {st}*1], tmm1",
                    a = in(reg) a,
                    rs = in(reg) rs,
                    p0 = in(reg) p,
                    p1 = in(reg) p.add(step),
                    p2 = in(reg) p.add(2 * step),
                    p3 = in(reg) p.add(3 * step),
                    bs = in(reg) bs,
                    hi = in(reg) hi.0.as_mut_ptr(),
                    lo = in(reg) lo.0.as_mut_ptr(),
                    st = in(reg) 64usize,
                    options(nostack),
                );
            }
            // SAFETY: the 16 scales follow the four steps of super-block `b`'s panel.
            let dy = unsafe { _mm512_loadu_ps(p.add(4 * step).cast()) };
            for (r, sr) in s.iter_mut().enumerate().take(nr) {
                // SAFETY: rows `r < nr` of the accumulators were just stored (lanes past
                // `cols` hold stale values that are never written out).
                let (h, l) = unsafe {
                    (
                        _mm512_load_si512(hi.0[r].as_ptr().cast()),
                        _mm512_load_si512(lo.0[r].as_ptr().cast()),
                    )
                };
                let t = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32::<6>(h), l));
                let x = &rows[r * rs + b * AMX_SB + 512..][..4];
                let d = _mm512_mul_ps(
                    _mm512_set1_ps(f32::from_le_bytes([x[0], x[1], x[2], x[3]])),
                    dy,
                );
                let v = if kind == GridKind::Iq2 {
                    t
                } else {
                    _mm512_mul_ps(t, eighth)
                };
                *sr = _mm512_add_ps(*sr, _mm512_mul_ps(d, v));
            }
        }
        // SAFETY: releases the tile state this function configured.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
        let scale = if kind == GridKind::Iq2 { 0.125 } else { 1.0 };
        for (r, sr) in s.iter().enumerate().take(nr) {
            let mut v = [0f32; 16];
            // SAFETY: `v` has room for 16 f32.
            unsafe { _mm512_storeu_ps(v.as_mut_ptr(), *sr) };
            for (o, x) in out[r * cols..(r + 1) * cols].iter_mut().zip(v) {
                *o = scale * x;
            }
        }
    }
}
