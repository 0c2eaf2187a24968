//! Q8_0 · Q8_0 GEMM for prompt chunks with sixteen weight rows in a register's lanes
//! (AVX-512 VNNI; the AVX-VNNI and AVX2 forms take eight rows at a time), every output with
//! the scalar reference's bits ([`crate::dot::dot_q8_0`]: per block the exact integer sum,
//! then `s += Σ·(dw·dy)` in block order).
//!
//! A chunk's weight rows are first *expanded* sixteen at a time into a group
//! ([`expand_group_ref`] and the kernel table's expanders): per block, eight 64-byte vectors whose lane r holds bytes 4k..4k+4 of
//! row r's block (offset by 128, `x ⊕ 0x80`, so that `vpdpbusd` takes them as unsigned), then
//! the sixteen rows' scales as f32. The activation columns are packed eight at a time into
//! a *panel* ([`pack_panel`]): per block each column's 32 codes, its scale as f32 and
//! −128·Σy, the offset's share of the block sum.
//!
//! Per (group, column, block) the kernel starts an integer accumulator from −128·Σy and adds
//! eight `vpdpbusd` of the group's vectors with the column's code dwords broadcast from the
//! panel: lane r ends with row r's exact block sum. A conversion, the scale product
//! `dw·dy` (sixteen rows at once), a multiply and an add follow: 13 vector operations for
//! 512 multiply-adds (with the add joining two `vpdpbusd` chains), against 32 for the four-row tiles of the lane form
//! (docs/kernels.md, "Q8_0 in the integer-sum form"). Each column's sixteen outputs are
//! one store.

use crate::blocks::{view, BlockQ8_0};
use crate::scalar::le_f16;

/// Weight rows in a group.
pub const GROUP_ROWS: usize = 16;

/// Most activation columns in a panel.
pub const PANEL_COLS: usize = 8;

/// Bytes of one expanded block of a group: 8 × 64 code bytes and 16 f32 scales.
const GROUP_BLOCK: usize = 8 * 64 + 4 * GROUP_ROWS;

/// Bytes of a group of rows of `n` elements.
pub fn group_bytes(n: usize) -> usize {
    n / 32 * GROUP_BLOCK
}

/// Bytes of a panel of `cols` (1..=[`PANEL_COLS`]) columns of `n` elements: per block
/// `cols` × 32 codes, then `cols` f32 scales, then `cols` i32 terms −128·Σy.
pub fn panel_bytes(n: usize, cols: usize) -> usize {
    n / 32 * 40 * cols
}

/// A group expander: `rows` (1..=[`GROUP_ROWS`] Q8_0 rows of `n` elements) → a group
/// (`out`, [`group_bytes`]`(n)` bytes; the layout in the module docs). Missing rows are zero
/// rows (codes 0, scale 0), whose outputs are 0 and are not stored by callers.
pub type GroupExpandFn = fn(n: usize, rows: &[&[u8]], out: &mut [u8]);

/// The reference group expander ([`GroupExpandFn`]), row by row and block by block; the
/// kernel table's AVX2 and AVX-512 expanders write its bytes.
///
/// # Panics
/// If a length does not match (a caller's bug, not bad input).
pub fn expand_group_ref(n: usize, rows: &[&[u8]], out: &mut [u8]) {
    let xs = group_rows(n, rows, out);
    expand_blocks(&xs, out);
}

/// The rows of a group as blocks (missing rows empty), after checking the shapes.
fn group_rows<'a>(n: usize, rows: &[&'a [u8]], out: &[u8]) -> [&'a [BlockQ8_0]; GROUP_ROWS] {
    assert!(
        (1..=GROUP_ROWS).contains(&rows.len()),
        "group of {} rows",
        rows.len()
    );
    assert_eq!(out.len(), group_bytes(n), "group length");
    let mut xs: [&[BlockQ8_0]; GROUP_ROWS] = [&[]; GROUP_ROWS];
    for (x, w) in xs.iter_mut().zip(rows) {
        *x = view::<BlockQ8_0>(w);
        assert_eq!(x.len(), n / 32, "weight row length");
    }
    xs
}

/// [`expand_group_ref`]'s loop.
fn expand_blocks(xs: &[&[BlockQ8_0]; GROUP_ROWS], out: &mut [u8]) {
    for (b, ob) in out.chunks_exact_mut(GROUP_BLOCK).enumerate() {
        let (codes, scales) = ob.split_at_mut(8 * 64);
        for r in 0..GROUP_ROWS {
            let (q, d) = match xs[r].get(b) {
                Some(x) => (x.qs.map(|q| q as u8 ^ 0x80), le_f16(x.d)),
                None => ([0x80; 32], 0.0),
            };
            for k in 0..8 {
                codes[64 * k + 4 * r..64 * k + 4 * r + 4].copy_from_slice(&q[4 * k..4 * k + 4]);
            }
            scales[4 * r..4 * r + 4].copy_from_slice(&d.to_le_bytes());
        }
    }
}

/// Packs `acts` (1..=[`PANEL_COLS`] Q8_0 rows of `n` elements) into a panel (`out`,
/// [`panel_bytes`]`(n, acts.len())` bytes; the layout in the module docs).
///
/// # Panics
/// If a length does not match (a caller's bug).
pub fn pack_panel(n: usize, acts: &[&[u8]], out: &mut [u8]) {
    let cols = acts.len();
    assert!((1..=PANEL_COLS).contains(&cols), "panel of {cols} columns");
    assert_eq!(out.len(), panel_bytes(n, cols), "panel length");
    let ys: Vec<&[BlockQ8_0]> = acts.iter().map(|a| view::<BlockQ8_0>(a)).collect();
    assert!(ys.iter().all(|y| y.len() == n / 32), "activation length");
    for (b, ob) in out.chunks_exact_mut(40 * cols).enumerate() {
        let (codes, rest) = ob.split_at_mut(32 * cols);
        let (scales, terms) = rest.split_at_mut(4 * cols);
        for (c, y) in ys.iter().enumerate() {
            let y = &y[b];
            let mut sum = 0i32;
            for (o, &q) in codes[32 * c..32 * c + 32].iter_mut().zip(&y.qs) {
                *o = q as u8;
                sum += i32::from(q);
            }
            scales[4 * c..4 * c + 4].copy_from_slice(&le_f16(y.d).to_le_bytes());
            terms[4 * c..4 * c + 4].copy_from_slice(&(-128 * sum).to_le_bytes());
        }
    }
}

/// A group tile: `out[c][r] = dot_q8_0(n, row r of the group, column c of the panel)` for the
/// panel's `cols` columns and all sixteen rows (a missing row's outputs are 0).
pub type GroupTileFn = fn(n: usize, group: &[u8], panel: &[u8], cols: usize, out: &mut [[f32; 16]]);

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{group_bytes, panel_bytes, BlockQ8_0, GROUP_BLOCK, GROUP_ROWS, PANEL_COLS};
    use std::arch::x86_64::*;

    /// Safe entry of the AVX-512 group expander: checks the shapes, then expands.
    pub(crate) fn expand_avx512_entry(n: usize, rows: &[&[u8]], out: &mut [u8]) {
        let xs = super::group_rows(n, rows, out);
        // SAFETY: `table::kernels` hands this entry out only after checking the features;
        // the shapes were checked above.
        unsafe { expand_avx512(&xs, rows.len(), out) }
    }

    /// Safe entry of the AVX2 group expander: checks the shapes, then expands.
    pub(crate) fn expand_avx2_entry(n: usize, rows: &[&[u8]], out: &mut [u8]) {
        let xs = super::group_rows(n, rows, out);
        // SAFETY: `table::kernels` hands this entry out only after checking the features;
        // the shapes were checked above.
        unsafe { expand_avx2(&xs, rows.len(), out) }
    }

    /// [`super::expand_group_ref`]'s bytes with AVX2: [`expand_avx512`]'s transpose on each
    /// half of the group (rows 0..8, then 8..16) in 256-bit registers (`vperm2i128` pairs
    /// the 128-bit halves), and one `vcvtph2ps` per eight scales.
    ///
    /// # Safety
    /// The CPU must have AVX2 and F16C; `xs[..nr]` hold whole rows of the same block count,
    /// `out` is their group.
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn expand_avx2(xs: &[&[BlockQ8_0]; GROUP_ROWS], nr: usize, out: &mut [u8]) {
        let c80 = _mm256_set1_epi8(0x80u8 as i8);
        let zeros = [0u8; 32];
        for (b, ob) in out.chunks_exact_mut(GROUP_BLOCK).enumerate() {
            let code = |r: usize| -> *const u8 {
                if r < nr {
                    xs[r][b].qs.as_ptr().cast()
                } else {
                    zeros.as_ptr()
                }
            };
            let (codes, scales) = ob.split_at_mut(8 * 64);
            for half in 0..2 {
                // SAFETY: every pointer is 32 readable bytes (a block's codes or `zeros`).
                let a: [__m256i; 8] = std::array::from_fn(|p| unsafe {
                    _mm256_xor_si256(_mm256_loadu_si256(code(8 * half + p).cast()), c80)
                });
                for (k, v) in transpose8x8(a).iter().enumerate() {
                    // SAFETY: half `half` of vector k: bytes 64k + 32·half.. of the 512 code
                    // bytes (unaligned store).
                    unsafe {
                        _mm256_storeu_si256(codes.as_mut_ptr().add(64 * k + 32 * half).cast(), *v)
                    };
                }
            }
            let mut h = [0u16; GROUP_ROWS];
            for (r, h) in h.iter_mut().enumerate().take(nr) {
                *h = u16::from_le_bytes(xs[r][b].d);
            }
            // SAFETY: `h` is 32 readable bytes and `scales` 64 writable ones (unaligned).
            unsafe {
                for q in 0..2 {
                    let d = _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr().add(8 * q).cast()));
                    _mm256_storeu_ps(scales.as_mut_ptr().add(32 * q).cast(), d);
                }
            }
        }
    }

    /// Eight 16-byte chunks, two a register (`b[k]`: chunk k in the low half, chunk k + 4 in
    /// the high half), turned so that vector j holds dword j of every chunk, chunk m in lane m
    /// (`vpunpck{l,h}dq`, then `vpunpck{l,h}qdq`): the AVX2 decode kernels' split of eight
    /// Q2_0 blocks' code dwords and IQ1_S_X's activation order.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) fn transpose_chunks(b: [__m256i; 4]) -> [__m256i; 4] {
        let t = [
            _mm256_unpacklo_epi32(b[0], b[1]),
            _mm256_unpackhi_epi32(b[0], b[1]),
            _mm256_unpacklo_epi32(b[2], b[3]),
            _mm256_unpackhi_epi32(b[2], b[3]),
        ];
        [
            _mm256_unpacklo_epi64(t[0], t[2]),
            _mm256_unpackhi_epi64(t[0], t[2]),
            _mm256_unpacklo_epi64(t[1], t[3]),
            _mm256_unpackhi_epi64(t[1], t[3]),
        ]
    }

    /// The 8 × 8 dword transpose of the AVX2 group expanders: `a[p]` holds 32 bytes of row p;
    /// vector k of the result holds every row's dword k, row p in lane p (`vpunpck{l,h}dq`,
    /// `vpunpck{l,h}qdq`, then `vperm2i128` pairing the 128-bit halves).
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(crate) fn transpose8x8(a: [__m256i; 8]) -> [__m256i; 8] {
        let u: [__m256i; 8] = std::array::from_fn(|i| {
            let (x, y) = (a[2 * (i / 2)], a[2 * (i / 2) + 1]);
            if i % 2 == 0 {
                _mm256_unpacklo_epi32(x, y)
            } else {
                _mm256_unpackhi_epi32(x, y)
            }
        });
        // c[j][g]: per 128-bit half L, dword 4L + j of rows 4g..4g + 4
        let c: [[__m256i; 2]; 4] = std::array::from_fn(|j| {
            std::array::from_fn(|g| {
                let (x, y) = (u[4 * g + j / 2], u[4 * g + 2 + j / 2]);
                if j % 2 == 0 {
                    _mm256_unpacklo_epi64(x, y)
                } else {
                    _mm256_unpackhi_epi64(x, y)
                }
            })
        });
        std::array::from_fn(|k| {
            let j = k % 4;
            if k < 4 {
                _mm256_permute2x128_si256::<0x20>(c[j][0], c[j][1])
            } else {
                _mm256_permute2x128_si256::<0x31>(c[j][0], c[j][1])
            }
        })
    }

    /// The 16 × 8 dword transpose of the AVX-512 group expanders: `a[p]` holds 32 bytes of
    /// row p in its low half and of row p + 8 in its high half; vector k of the result holds
    /// every row's dword k, row r in lane r (`vpunpck{l,h}dq`, `vpunpck{l,h}qdq`, then
    /// `vpermt2q` pairing the 128-bit quarters).
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn transpose16x8(a: [__m512i; 8]) -> [__m512i; 8] {
        // qword indices of vpermt2q: quarters (0 of a, 0 of b, 2 of a, 2 of b), then 1 and 3
        let lo_q = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
        let hi_q = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
        // per quarter: rows (2i, 2i + 1) interleaved, dwords 4L, 4L + 1 (lo) / + 2, + 3 (hi)
        let u: [__m512i; 8] = std::array::from_fn(|i| {
            let (x, y) = (a[2 * (i / 2)], a[2 * (i / 2) + 1]);
            if i % 2 == 0 {
                _mm512_unpacklo_epi32(x, y)
            } else {
                _mm512_unpackhi_epi32(x, y)
            }
        });
        // c[j][g]: per quarter L, dword 4L + j of rows 4g..4g + 4
        let c: [[__m512i; 2]; 4] = std::array::from_fn(|j| {
            std::array::from_fn(|g| {
                let (x, y) = (u[4 * g + j / 2], u[4 * g + 2 + j / 2]);
                if j % 2 == 0 {
                    _mm512_unpacklo_epi64(x, y)
                } else {
                    _mm512_unpackhi_epi64(x, y)
                }
            })
        });
        std::array::from_fn(|k| {
            let q = if k < 4 { lo_q } else { hi_q };
            _mm512_permutex2var_epi64(c[k % 4][0], q, c[k % 4][1])
        })
    }

    /// [`super::expand_group_ref`]'s bytes with AVX-512: per block the sixteen rows' codes
    /// (rows p and p + 8 in one register's halves, offset by `⊕ 0x80`) go through
    /// [`transpose16x8`], so vector k holds every row's dword k; the sixteen f16 scales are
    /// converted by one `vcvtph2ps`.
    ///
    /// # Safety
    /// The CPU must have AVX-512 F/BW/VL and F16C; `xs[..nr]` hold whole rows of the same
    /// block count, `out` is their group.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,f16c")]
    unsafe fn expand_avx512(xs: &[&[BlockQ8_0]; GROUP_ROWS], nr: usize, out: &mut [u8]) {
        let c80 = _mm512_set1_epi8(0x80u8 as i8);
        let zeros = [0u8; 32];
        for (b, ob) in out.chunks_exact_mut(GROUP_BLOCK).enumerate() {
            let code = |r: usize| -> *const u8 {
                if r < nr {
                    xs[r][b].qs.as_ptr().cast()
                } else {
                    zeros.as_ptr()
                }
            };
            // SAFETY: every pointer is 32 readable bytes (a block's codes or `zeros`).
            let a: [__m512i; 8] = std::array::from_fn(|p| unsafe {
                let lo = _mm256_loadu_si256(code(p).cast());
                let hi = _mm256_loadu_si256(code(p + 8).cast());
                _mm512_xor_si512(_mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi), c80)
            });
            let (codes, scales) = ob.split_at_mut(8 * 64);
            for (k, v) in transpose16x8(a).iter().enumerate() {
                // SAFETY: vector k is bytes 64k.. of the 512 code bytes (unaligned store).
                unsafe { _mm512_storeu_si512(codes.as_mut_ptr().add(64 * k).cast(), *v) };
            }
            let mut h = [0u16; GROUP_ROWS];
            for (r, h) in h.iter_mut().enumerate().take(nr) {
                *h = u16::from_le_bytes(xs[r][b].d);
            }
            // SAFETY: `h` is 32 readable bytes and `scales` 64 writable ones (unaligned).
            unsafe {
                let d = _mm512_cvtph_ps(_mm256_loadu_si256(h.as_ptr().cast()));
                _mm512_storeu_ps(scales.as_mut_ptr().cast(), d);
            }
        }
    }

    // the safe entries of both tiles
    crate::simd::group_tile_entries!(
        32;
        tile_entry => tile,
        tile_avx2_entry => tile_avx2,
        tile_avx_vnni_entry => tile_avx_vnni,
    );

    /// The group tile with AVX2 (no VNNI): eight rows per 256-bit register (each half of a
    /// group's vectors), up to four columns per pass. Per (row half, block, dword k) the codes
    /// lose their offset (`⊕ 0x80`) and |x| is formed once for the pass's columns; per column
    /// `vpsignb` gives y·sign(x) of the broadcast dword, `vpmaddubsw` the pair sums (at most
    /// 2·128·127 < 2^15: the activation quantizer's codes stay within ±127) and `vpmaddwd`
    /// against ones the exact 4-element sums, added into the
    /// block's integer accumulator. The float combine is the AVX-512 tile's: the reference's
    /// bits.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `group` holds `nb` expanded blocks and `panel` `nb`
    /// blocks of `C` columns.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile_avx2<const C: usize>(
        nb: usize,
        group: &[u8],
        panel: &[u8],
        out: &mut [[f32; 16]; C],
    ) {
        let c80 = _mm256_set1_epi8(0x80u8 as i8);
        let ones = _mm256_set1_epi16(1);
        let pblock = 40 * C;
        for half in 0..2 {
            for c0 in (0..C).step_by(4) {
                let cols = (C - c0).min(4);
                let mut s = [_mm256_setzero_ps(); 4];
                for b in 0..nb {
                    let gb = &group[b * GROUP_BLOCK..(b + 1) * GROUP_BLOCK];
                    let pb = &panel[b * pblock..(b + 1) * pblock];
                    // SAFETY: every offset passed is below 40·C − 3 (as in `tile`).
                    let word =
                        |o: usize| unsafe { pb.as_ptr().add(o).cast::<i32>().read_unaligned() };
                    let mut acc = [_mm256_setzero_si256(); 4];
                    for k in 0..8 {
                        // SAFETY: bytes 64k + 32·half .. + 32 of the 576-byte block.
                        let xu = unsafe {
                            _mm256_loadu_si256(gb.as_ptr().add(64 * k + 32 * half).cast())
                        };
                        let x = _mm256_xor_si256(xu, c80);
                        let ax = _mm256_abs_epi8(x); // |x| as unsigned (x = −128 → 128)
                        for (c, a) in acc.iter_mut().enumerate().take(cols) {
                            let y = _mm256_set1_epi32(word(32 * (c0 + c) + 4 * k));
                            let p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, x));
                            *a = _mm256_add_epi32(*a, _mm256_madd_epi16(p, ones));
                        }
                    }
                    // SAFETY: the sixteen f32 scales sit at bytes 512..576 of the block.
                    let dw = unsafe { _mm256_loadu_ps(gb.as_ptr().add(512 + 32 * half).cast()) };
                    for (c, (sc, a)) in s.iter_mut().zip(acc).enumerate().take(cols) {
                        let dy = f32::from_bits(word(32 * C + 4 * (c0 + c)) as u32);
                        let d = _mm256_mul_ps(dw, _mm256_set1_ps(dy));
                        *sc = _mm256_add_ps(*sc, _mm256_mul_ps(_mm256_cvtepi32_ps(a), d));
                    }
                }
                for (c, v) in s.iter().enumerate().take(cols) {
                    let o = &mut out[c0 + c][8 * half..8 * half + 8];
                    // SAFETY: `o` has room for 8 f32 (unaligned store).
                    unsafe { _mm256_storeu_ps(o.as_mut_ptr(), *v) };
                }
            }
        }
    }

    /// The group tile with AVX-VNNI (`vpdpbusd` on 256-bit registers, no AVX-512): the
    /// AVX-512 tile's steps on each half of a group (rows 0..8, then 8..16), up to four
    /// columns per pass. Per (row half, column, block) the accumulator starts from the panel's
    /// −128·Σy and takes eight `vpdpbusd` of the half's offset codes with the column's code
    /// dwords broadcast, in two chains (even and odd dwords) joined by one exact add: one
    /// vector operation per 32 multiply-adds of eight rows, against four without VNNI. The
    /// float combine is the other tiles': the reference's bits.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and AVX-VNNI; `group` holds `nb` expanded blocks and
    /// `panel` `nb` blocks of `C` columns.
    #[target_feature(enable = "avx2,fma,avxvnni")]
    unsafe fn tile_avx_vnni<const C: usize>(
        nb: usize,
        group: &[u8],
        panel: &[u8],
        out: &mut [[f32; 16]; C],
    ) {
        let pblock = 40 * C;
        for half in 0..2 {
            for c0 in (0..C).step_by(4) {
                let cols = (C - c0).min(4);
                let mut s = [_mm256_setzero_ps(); 4];
                for b in 0..nb {
                    let gb = &group[b * GROUP_BLOCK..(b + 1) * GROUP_BLOCK];
                    let pb = &panel[b * pblock..(b + 1) * pblock];
                    // SAFETY: every offset passed is below 40·C − 3 (as in `tile`).
                    let word =
                        |o: usize| unsafe { pb.as_ptr().add(o).cast::<i32>().read_unaligned() };
                    // SAFETY: bytes 64k + 32·half .. + 32 of the 576-byte block (unaligned).
                    let w: [__m256i; 8] = std::array::from_fn(|k| unsafe {
                        _mm256_loadu_si256(gb.as_ptr().add(64 * k + 32 * half).cast())
                    });
                    // SAFETY: the sixteen f32 scales sit at bytes 512..576 of the block.
                    let dw = unsafe { _mm256_loadu_ps(gb.as_ptr().add(512 + 32 * half).cast()) };
                    for (c, sc) in s.iter_mut().enumerate().take(cols) {
                        let y = 32 * (c0 + c);
                        let mut a0 = _mm256_set1_epi32(word(36 * C + 4 * (c0 + c)));
                        let mut a1 = _mm256_setzero_si256();
                        for k in 0..4 {
                            let (y0, y1) = (word(y + 8 * k), word(y + 8 * k + 4));
                            a0 = _mm256_dpbusd_avx_epi32(a0, w[2 * k], _mm256_set1_epi32(y0));
                            a1 = _mm256_dpbusd_avx_epi32(a1, w[2 * k + 1], _mm256_set1_epi32(y1));
                        }
                        let dy = f32::from_bits(word(32 * C + 4 * (c0 + c)) as u32);
                        let d = _mm256_mul_ps(dw, _mm256_set1_ps(dy));
                        let i = _mm256_cvtepi32_ps(_mm256_add_epi32(a0, a1));
                        *sc = _mm256_add_ps(*sc, _mm256_mul_ps(i, d));
                    }
                }
                for (c, v) in s.iter().enumerate().take(cols) {
                    let o = &mut out[c0 + c][8 * half..8 * half + 8];
                    // SAFETY: `o` has room for 8 f32 (unaligned store).
                    unsafe { _mm256_storeu_ps(o.as_mut_ptr(), *v) };
                }
            }
        }
    }

    /// The group tile for `C` columns (see the module docs). Each column's accumulation runs
    /// as two chains of four `vpdpbusd` (even and odd dwords), joined by one exact add.
    ///
    /// # Safety
    /// The CPU must have the enabled features; `group` holds `nb` expanded blocks and `panel`
    /// `nb` blocks of `C` columns.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn tile<const C: usize>(
        nb: usize,
        group: &[u8],
        panel: &[u8],
        out: &mut [[f32; 16]; C],
    ) {
        let mut s = [_mm512_setzero_ps(); C];
        let pblock = 40 * C;
        for b in 0..nb {
            let gb = &group[b * GROUP_BLOCK..(b + 1) * GROUP_BLOCK];
            let pb = &panel[b * pblock..(b + 1) * pblock];
            // SAFETY: `gb` is 576 readable bytes: eight 64-byte code vectors, then 16 f32.
            let (w, dw) = unsafe {
                (
                    std::array::from_fn::<__m512i, 8, _>(|k| {
                        _mm512_loadu_si512(gb.as_ptr().add(64 * k).cast())
                    }),
                    _mm512_loadu_ps(gb.as_ptr().add(512).cast()),
                )
            };
            debug_assert_eq!(pb.len(), 40 * C);
            // SAFETY: every offset passed is below 40·C − 3 (codes 32·c + 8k + 4 < 32·C,
            // scales 32·C + 4c, terms 36·C + 4c), inside `pb` (unaligned reads).
            let word = |o: usize| unsafe { pb.as_ptr().add(o).cast::<i32>().read_unaligned() };
            for (c, sc) in s.iter_mut().enumerate() {
                let y = 32 * c;
                let mut a0 = _mm512_set1_epi32(word(36 * C + 4 * c));
                let mut a1 = _mm512_setzero_si512();
                for k in 0..4 {
                    a0 = _mm512_dpbusd_epi32(a0, w[2 * k], _mm512_set1_epi32(word(y + 8 * k)));
                    a1 = _mm512_dpbusd_epi32(
                        a1,
                        w[2 * k + 1],
                        _mm512_set1_epi32(word(y + 8 * k + 4)),
                    );
                }
                let dy = f32::from_bits(word(32 * C + 4 * c) as u32);
                let d = _mm512_mul_ps(dw, _mm512_set1_ps(dy));
                let i = _mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1));
                *sc = _mm512_add_ps(*sc, _mm512_mul_ps(i, d));
            }
        }
        for (o, v) in out.iter_mut().zip(s) {
            // SAFETY: `o` has room for 16 f32 (unaligned store).
            unsafe { _mm512_storeu_ps(o.as_mut_ptr(), v) };
        }
    }
}
