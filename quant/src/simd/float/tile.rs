//! Register-tiled GEMM for the float weight types (F32, F16, BF16 against activations of the
//! same type) for prompt chunks (AVX-512F): four weight rows × four activation columns per
//! call, sixteen f32 lanes per register. On AVX2 CPUs the same call runs `avx2`'s kernel for
//! F16 and BF16: eight lanes, four rows × two columns per pass (sixteen 256-bit registers),
//! the tail of a row converted into a zero-padded register; its bound has n/8 for n/16
//! below. The table does not hand out its F32 form: on the tiny Q2_0 fixture the F32 HC
//! mixes' changed rounding flipped a near-tied routing choice, and the prompt-chunk logits
//! moved 0.16 from the decode path's (`session::tests::eval_all_and_eval_batch_agree`); the
//! F32 matmuls are 0.9 ms of an iq2 pp512 token.
//!
//! Each element pair is converted to f32 exactly (F16 by `vcvtph2ps`, BF16 by a 16-bit
//! shift) and multiplied-accumulated with one FMA per (row, column, 16 elements); the weight
//! registers are reused for four columns and the activation registers for four rows. The
//! sixteen lane sums are added in f64 at the end.
//!
//! **Not bit-identical** to the reference, which rounds each product to f32 and accumulates
//! in f64: here the accumulation is in f32 (as in ggml's own SIMD float dots), so a result
//! can differ by up to about (n/16 + 4)·2⁻²⁴·Σ|w·a|; the tests assert that bound. Only
//! prompt chunks use it; decode keeps the single-column kernel.
//!
//! BF16 on a CPU with AVX512-BF16 skips the conversions: `vdpbf16ps` multiplies 32 element
//! pairs per (row, column) and adds each lane's two products to its f32 sum one after the
//! other (each bf16 product is exact in f32, so that is two roundings per 32 elements per
//! lane: the same n/16 roundings as the FMA form, within the same bound). It treats bf16
//! subnormals (|v| < 2⁻¹²⁶) as zero and flushes subnormal sums; those terms are below
//! 2⁻¹²⁶·|other factor| each.

/// Most weight rows in one tile call.
pub const TILE_ROWS: usize = 4;

/// Most activation columns in one tile call.
pub const TILE_COLS: usize = 4;

/// f32 lanes per accumulator of the tile kernels at `level` (16 with AVX-512, 8 with AVX2):
/// the `L` of the error bound (n/L + 4)·2⁻²⁴·Σ|w·a|.
pub fn lanes(level: crate::simd::CpuLevel) -> usize {
    if level >= crate::simd::CpuLevel::Avx512 {
        16
    } else {
        8
    }
}

/// The shapes every float tile checks before its kernel runs: row and column counts, output
/// length, and `n` elements of `size` bytes in every row.
#[cfg(target_arch = "x86_64")]
fn check(n: usize, size: usize, rows: &[&[u8]], acts: &[&[u8]], out: &[f32]) {
    assert!((1..=TILE_ROWS).contains(&rows.len()), "tile rows");
    assert!((1..=TILE_COLS).contains(&acts.len()), "tile columns");
    assert_eq!(out.len(), rows.len() * acts.len(), "tile output length");
    assert!(
        rows.iter().chain(acts).all(|r| r.len() == n * size),
        "row length"
    );
}

/// A tile kernel: `out[r * cols + c] ≈ dot(n, rows[r], acts[c])` for up to [`TILE_ROWS`]
/// rows and [`TILE_COLS`] columns of `n` elements (see the module docs for the error bound).
pub type TileFn = fn(n: usize, rows: &[&[u8]], acts: &[&[u8]], out: &mut [f32]);

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::arch::x86_64::*;

    /// Element formats (the `K` parameter of the kernel).
    const F32: u8 = 0;
    const F16: u8 = 1;
    const BF16: u8 = 2;

    macro_rules! entries {
        ($($name:ident => $k:expr, $size:expr;)*) => {$(
            /// Safe entry: checks the shapes, then runs the kernel for the tile's shape.
            pub(crate) fn $name(n: usize, rows: &[&[u8]], acts: &[&[u8]], out: &mut [f32]) {
                run::<{ $k }>(n, $size, rows, acts, out)
            }
        )*};
    }
    entries! {
        tile_f32_entry => F32, 4;
        tile_f16_entry => F16, 2;
        tile_bf16_entry => BF16, 2;
    }

    /// Safe entry of the AVX512-BF16 kernel (`float_tile_fn` checks the feature).
    pub(crate) fn tile_bf16_dp_entry(n: usize, rows: &[&[u8]], acts: &[&[u8]], out: &mut [f32]) {
        run::<{ BF16_DP }>(n, 2, rows, acts, out)
    }

    /// BF16 by `vdpbf16ps` (the `K` of [`run`] and [`shape`]; [`tile_bf16_dp`] runs it).
    const BF16_DP: u8 = 3;

    fn run<const K: u8>(n: usize, size: usize, rows: &[&[u8]], acts: &[&[u8]], out: &mut [f32]) {
        super::check(n, size, rows, acts, out);
        let cols = acts.len();
        macro_rules! go {
            ($($r:literal),*) => {
                match (rows.len(), cols) {
                    $(
                        ($r, 1) => shape::<K, $r, 1>(n, rows, acts, out),
                        ($r, 2) => shape::<K, $r, 2>(n, rows, acts, out),
                        ($r, 3) => shape::<K, $r, 3>(n, rows, acts, out),
                        ($r, _) => shape::<K, $r, 4>(n, rows, acts, out),
                    )*
                    _ => unreachable!("rows checked above"),
                }
            };
        }
        go!(1, 2, 3, 4)
    }

    fn shape<const K: u8, const R: usize, const C: usize>(
        n: usize,
        rows: &[&[u8]],
        acts: &[&[u8]],
        out: &mut [f32],
    ) {
        let xs: &[&[u8]; R] = rows.try_into().expect("row count checked by `run`");
        let ys: &[&[u8]; C] = acts.try_into().expect("column count checked by `run`");
        // SAFETY: `table::kernels` hands the entries out only after checking the features the
        // kernel is compiled for; every row holds `n` elements (checked by `run`).
        let s = unsafe {
            if K == BF16_DP {
                tile_bf16_dp::<R, C>(n, xs, ys)
            } else {
                tile::<K, R, C>(n, xs, ys)
            }
        };
        for r in 0..R {
            for c in 0..C {
                out[r * C + c] = s[r][c];
            }
        }
    }

    /// Sixteen elements from element `i` of `b` as f32 (`m` masks a tail; exact).
    ///
    /// # Safety
    /// The features of [`tile`]; the elements selected by `m` are inside `b`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
    #[inline]
    unsafe fn load<const K: u8>(b: &[u8], i: usize, m: u16) -> __m512 {
        let at = |size: usize| b.as_ptr().wrapping_add(size * i);
        match K {
            // SAFETY: the masked load touches only the selected elements, in bounds (caller).
            F32 => unsafe { _mm512_maskz_loadu_ps(m, at(4).cast()) },
            F16 => {
                // SAFETY: as above.
                let h = unsafe { _mm256_maskz_loadu_epi16(m, at(2).cast()) };
                _mm512_cvtph_ps(h)
            }
            _ => {
                // SAFETY: as above.
                let h = unsafe { _mm256_maskz_loadu_epi16(m, at(2).cast()) };
                _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
            }
        }
    }

    /// The tile's sums for BF16 by `vdpbf16ps`, 32 elements per (row, column) and step, the
    /// tail zero-filled by masked loads (a zero pair adds nothing); the lane sums reduced in
    /// f64 as in [`tile`].
    ///
    /// # Safety
    /// The CPU must have the enabled features; every row holds `n` BF16 elements.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512bf16")]
    unsafe fn tile_bf16_dp<const R: usize, const C: usize>(
        n: usize,
        xs: &[&[u8]; R],
        ys: &[&[u8]; C],
    ) -> [[f32; C]; R] {
        let mut acc = [[_mm512_setzero_ps(); C]; R];
        let mut i = 0;
        while i < n {
            let m = if n - i >= 32 {
                u32::MAX
            } else {
                (1u32 << (n - i)) - 1
            };
            let load = |b: &[u8]| {
                // SAFETY: the mask selects elements i..min(i + 32, n), inside every row; a
                // masked load touches only the selected elements.
                let v =
                    unsafe { _mm512_maskz_loadu_epi16(m, b.as_ptr().wrapping_add(2 * i).cast()) };
                // SAFETY: both are 512-bit vectors of plain bits (32 × 16-bit lanes).
                unsafe { std::mem::transmute::<__m512i, __m512bh>(v) }
            };
            let w: [__m512bh; R] = std::array::from_fn(|r| load(xs[r]));
            for c in 0..C {
                let a = load(ys[c]);
                for r in 0..R {
                    acc[r][c] = _mm512_dpbf16_ps(acc[r][c], w[r], a);
                }
            }
            i += 32;
        }
        reduce(&acc)
    }

    /// Each accumulator's sixteen lanes added in f64, rounded once to f32.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn reduce<const R: usize, const C: usize>(acc: &[[__m512; C]; R]) -> [[f32; C]; R] {
        let mut out = [[0f32; C]; R];
        for r in 0..R {
            for c in 0..C {
                let v = acc[r][c];
                let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
                let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(
                    _mm512_castps_pd(v),
                )));
                out[r][c] = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)) as f32;
            }
        }
        out
    }

    /// The tile's sums: `R` rows × `C` columns (see the module docs).
    ///
    /// # Safety
    /// The CPU must have the enabled features; every row holds `n` elements of format `K`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c,fma")]
    unsafe fn tile<const K: u8, const R: usize, const C: usize>(
        n: usize,
        xs: &[&[u8]; R],
        ys: &[&[u8]; C],
    ) -> [[f32; C]; R] {
        let mut acc = [[_mm512_setzero_ps(); C]; R];
        let mut i = 0;
        while i < n {
            let m = if n - i >= 16 {
                u16::MAX
            } else {
                (1u16 << (n - i)) - 1
            };
            // SAFETY: the mask selects elements i..min(i + 16, n), inside every row.
            let w: [__m512; R] = std::array::from_fn(|r| unsafe { load::<K>(xs[r], i, m) });
            for c in 0..C {
                // SAFETY: as above.
                let a = unsafe { load::<K>(ys[c], i, m) };
                for r in 0..R {
                    acc[r][c] = _mm512_fmadd_ps(w[r], a, acc[r][c]);
                }
            }
            i += 16;
        }
        reduce(&acc)
    }
}

/// The AVX2 float tiles (see the module docs).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use super::TILE_ROWS;
    use crate::scalar::le_f16;
    use std::arch::x86_64::*;

    const F32: u8 = 0;
    const F16: u8 = 1;
    const BF16: u8 = 2;

    macro_rules! entries {
        ($($name:ident => $k:expr, $size:expr;)*) => {$(
            /// Safe entry: checks the shapes, then runs the kernel.
            pub(crate) fn $name(n: usize, rows: &[&[u8]], acts: &[&[u8]], out: &mut [f32]) {
                super::check(n, $size, rows, acts, out);
                // SAFETY: `table::kernels` hands the entries out only after checking AVX2,
                // FMA and F16C; every row holds `n` elements (checked above).
                unsafe { tile::<{ $k }>(n, rows, acts, out) }
            }
        )*};
    }
    entries! {
        tile_f32_entry => F32, 4;
        tile_f16_entry => F16, 2;
        tile_bf16_entry => BF16, 2;
    }

    /// Eight elements from element `i` of `b` as f32 (exact); `i + 8 ≤` the row's elements.
    ///
    /// # Safety
    /// The features of [`tile`]; elements `i..i + 8` are inside `b`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn load<const K: u8>(b: &[u8], i: usize) -> __m256 {
        match K {
            // SAFETY: 32 bytes at 4i, inside `b` (the caller's contract; unaligned load).
            F32 => unsafe { _mm256_loadu_ps(b.as_ptr().add(4 * i).cast()) },
            F16 => {
                // SAFETY: 16 bytes at 2i, inside `b`.
                let h = unsafe { _mm_loadu_si128(b.as_ptr().add(2 * i).cast()) };
                _mm256_cvtph_ps(h)
            }
            _ => {
                // SAFETY: as for F16.
                let h = unsafe { _mm_loadu_si128(b.as_ptr().add(2 * i).cast()) };
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
            }
        }
    }

    /// Element `i` of `b` as f32 (exact).
    fn scalar<const K: u8>(b: &[u8], i: usize) -> f32 {
        match K {
            F32 => f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().expect("4 bytes")),
            F16 => le_f16([b[2 * i], b[2 * i + 1]]),
            _ => f32::from_bits(u32::from(u16::from_le_bytes([b[2 * i], b[2 * i + 1]])) << 16),
        }
    }

    /// The last `n mod 8` elements of `b` (from element `i`) as f32, zero-padded to eight.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn tail<const K: u8>(b: &[u8], i: usize, n: usize) -> __m256 {
        let mut t = [0f32; 8];
        for (k, v) in t.iter_mut().enumerate().take(n - i) {
            *v = scalar::<K>(b, i + k);
        }
        // SAFETY: `t` is 32 readable bytes (unaligned load).
        unsafe { _mm256_loadu_ps(t.as_ptr()) }
    }

    /// `out[r·C + c]` for every row and column: four rows × two columns per pass over the
    /// elements, eight f32 lanes per accumulator, each accumulator's lanes added in f64.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; every row holds `n` elements of format `K`.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn tile<const K: u8>(n: usize, rows: &[&[u8]], acts: &[&[u8]], out: &mut [f32]) {
        let (nr, nc) = (rows.len(), acts.len());
        let whole = n - n % 8;
        for c0 in (0..nc).step_by(2) {
            let cs = [acts[c0], acts[(c0 + 1).min(nc - 1)]];
            let mut acc = [[_mm256_setzero_ps(); 2]; TILE_ROWS];
            let step =
                |acc: &mut [[__m256; 2]; TILE_ROWS], w: [__m256; TILE_ROWS], a: [__m256; 2]| {
                    for (acc, w) in acc.iter_mut().zip(w).take(nr) {
                        for (acc, a) in acc.iter_mut().zip(a) {
                            *acc = _mm256_fmadd_ps(w, a, *acc);
                        }
                    }
                };
            for i in (0..whole).step_by(8) {
                // SAFETY: i + 8 ≤ n: elements i..i + 8 are inside every row.
                let w = std::array::from_fn(|r| unsafe { load::<K>(rows[r.min(nr - 1)], i) });
                // SAFETY: as above.
                let a = std::array::from_fn(|c| unsafe { load::<K>(cs[c], i) });
                step(&mut acc, w, a);
            }
            if whole < n {
                let w = std::array::from_fn(|r| tail::<K>(rows[r.min(nr - 1)], whole, n));
                let a = std::array::from_fn(|c| tail::<K>(cs[c], whole, n));
                step(&mut acc, w, a);
            }
            for (r, acc) in acc.iter().enumerate().take(nr) {
                for (c, v) in acc.iter().enumerate().take(nc - c0) {
                    let mut l = [0f32; 8];
                    // SAFETY: `l` has room for 8 f32.
                    unsafe { _mm256_storeu_ps(l.as_mut_ptr(), *v) };
                    out[r * nc + c0 + c] = l.iter().map(|&x| f64::from(x)).sum::<f64>() as f32;
                }
            }
        }
    }
}
