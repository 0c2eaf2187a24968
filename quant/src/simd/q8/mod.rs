//! The weight types dotted with Q8_0 activations: Q8_0, Q2_0 (and its load-time layout
//! Q2_0_X) and MXFP4. AVX2 one-row and multi-row kernels (`avx2`); Q2_0's AVX2 and AVX-VNNI
//! multi-row kernels (`q2_0_avx2`); AVX-512 kernels per type (`q8_0`, `q2_0`, `mxfp4`); the
//! prompt-chunk tiles: Q8_0's sixteen-row groups (`tile_x16`) and Q2_0 / Q2_0_X's tiles on
//! packed Q8_0 activation panels (`tile` the panel, `tile_q2`, `tile_q2_avx2`); and the
//! activation quantizers (`quantize`, Q8_0 and Q8_K with AVX-512 or AVX2, the scalar
//! quantizers' bytes).

/// The segment loop of the Q2_0 decode kernels (`q2_0::q2_rows`, AVX-512;
/// `q2_0_avx2::q2_rows`, AVX2): per batch of up to `$batch` rows (`$rows` against activation
/// row `$a`, results into `$out`) and segment of up to `$seg` groups of eight blocks, the
/// activation side of each group prepared once into `$acts` (`$prepare`, with `$yc` its
/// sixteen Q8_0 blocks, zero-padded past the row's end), then four-row passes: per group
/// `$pass`, with `$p` the four rows' pointers to its eight blocks (144 bytes each: copies
/// padded with zero blocks for the last 1–7, each row otherwise prefetched
/// [`crate::simd::PREFETCH_DISTANCE`] bytes ahead), `$act` its prepared side, `$cnt` its
/// block count and `$sp` the pass's four running sums (lane j: row j; a short pass repeats its
/// last row and does not store the other lanes). A macro so that it expands inside each
/// kernel's target features.
#[cfg(target_arch = "x86_64")]
macro_rules! q2_segments {
    ($rows:ident, $a:ident, $out:ident, $batch:expr, $seg:expr, $acts:ident,
     |$yc:ident| $prepare:expr,
     |$sp:ident, $p:ident, $act:ident, $cnt:ident| $pass:expr) => {{
        let ys = view::<BlockQ8_0>($a);
        let pd = crate::simd::PREFETCH_DISTANCE;
        for (rows, out) in $rows.chunks($batch).zip($out.chunks_mut($batch)) {
            let mut xs: [&[BlockQ2_0]; $batch] = [&[]; $batch];
            let mut nb = ys.len() / 2;
            for (x, w) in xs.iter_mut().zip(rows) {
                *x = view::<BlockQ2_0>(w);
                nb = nb.min(x.len());
            }
            let nr = rows.len();
            let (full, rem) = (nb / 8, nb % 8);
            let row = |r: usize| xs[r.min(nr - 1)];
            // SAFETY: all-zero bits are a valid `__m128`.
            let mut s = [unsafe { std::mem::zeroed::<__m128>() }; $batch / 4];
            let groups = nb.div_ceil(8);
            for seg in (0..groups).step_by($seg) {
                let segn = (groups - seg).min($seg);
                for (i, act) in $acts[..segn].iter_mut().enumerate() {
                    let b = 8 * (seg + i);
                    let mut py = [BlockQ8_0::zeroed(); 16];
                    let $yc: &[BlockQ8_0; 16] = match ys.get(2 * b..2 * b + 16) {
                        Some(yc) if b + 8 <= nb => yc.try_into().unwrap(),
                        _ => {
                            py[..2 * (nb - b)].copy_from_slice(&ys[2 * b..2 * nb]);
                            &py
                        }
                    };
                    *act = $prepare;
                }
                for (r, $sp) in (0..nr).step_by(4).zip(s.iter_mut()) {
                    for (i, $act) in $acts[..segn].iter().enumerate() {
                        let g = seg + i;
                        let $cnt = if g < full { 8 } else { rem };
                        let pad: [[BlockQ2_0; 8]; 4];
                        let $p: [*const u8; 4] = if $cnt == 8 {
                            std::array::from_fn(|j| {
                                let x = &row(r + j)[8 * g..8 * g + 8];
                                crate::simd::prefetch_ahead(x.as_ptr().cast(), 144, pd);
                                x.as_ptr().cast()
                            })
                        } else {
                            pad = std::array::from_fn(|j| {
                                let mut t = [BlockQ2_0::zeroed(); 8];
                                t[..rem].copy_from_slice(&row(r + j)[8 * full..nb]);
                                t
                            });
                            pad.each_ref().map(|t| t.as_ptr().cast())
                        };
                        $pass;
                    }
                }
            }
            for (o, sp) in out.chunks_mut(4).zip(&s) {
                let mut v = [0f32; 4];
                // SAFETY: `v` holds four f32 (unaligned store).
                unsafe { _mm_storeu_ps(v.as_mut_ptr(), *sp) };
                o.copy_from_slice(&v[..o.len()]);
            }
        }
    }};
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;
#[cfg(target_arch = "x86_64")]
mod fp4_row;
#[cfg(target_arch = "x86_64")]
pub(super) mod mxfp4;
#[cfg(target_arch = "x86_64")]
pub(super) mod q2_0;
#[cfg(target_arch = "x86_64")]
pub(super) mod q2_0_avx2;
#[cfg(target_arch = "x86_64")]
pub(super) mod q8_0;
#[cfg(target_arch = "x86_64")]
pub(crate) mod quantize;
pub mod tile;
pub(super) mod tile_q2;
pub(super) mod tile_q2_avx2;
pub mod tile_x16;
