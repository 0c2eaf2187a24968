//! The decode (multi-row) kernels' shared passes for the grid types whose super-blocks
//! reduce to one integer each: four rows by four super-blocks at a time, their sixteen sums
//! reduced together and their products formed in one register ([`products4x4`]), either
//! straight from the activation blocks (`grid_rows4!`, `rows4x4_impl!`) or against
//! activations prepared once per call (`prepared_rows!`). A child of `iq::avx512`, declared
//! with `#[macro_use]` so that its macros reach the kernels after it.

use super::*;

/// The reference's block products `f32(d)·dy·(inner·T)` of four rows by four super-blocks,
/// element k holding super-block k's with one row per lane: `t[k]` is the [`tree4`] of
/// super-block k's four rows' sums (128-bit lane l: the rows' partial sums of lane l),
/// `hd[4k + r]` row r's f16 scale, `dy[k]` the activation scale. One 4 × 4 transpose of
/// 128-bit lanes finishes the sixteen exact sums, and the products are formed in one
/// register in the reference's order `(d·dy)·t` (`inner` is 1 or a power of two, exact).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c")]
#[inline]
pub(in crate::simd) fn products4x4(
    t: &[__m512i; 4],
    hd: &[u16; 16],
    dy: &[f32; 4],
    inner: f32,
) -> [__m128; 4] {
    let u0 = _mm512_shuffle_i32x4::<0b01_00_01_00>(t[0], t[1]);
    let u1 = _mm512_shuffle_i32x4::<0b11_10_11_10>(t[0], t[1]);
    let u2 = _mm512_shuffle_i32x4::<0b01_00_01_00>(t[2], t[3]);
    let u3 = _mm512_shuffle_i32x4::<0b11_10_11_10>(t[2], t[3]);
    let (a, b) = (_mm512_add_epi32(u0, u1), _mm512_add_epi32(u2, u3));
    // 128-bit lane k: super-block k's four row sums
    let tt = _mm512_add_epi32(
        _mm512_shuffle_i32x4::<0b10_00_10_00>(a, b),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(a, b),
    );
    let f = _mm512_mul_ps(_mm512_cvtepi32_ps(tt), _mm512_set1_ps(inner));
    // SAFETY: `hd` is 32 bytes (unaligned load).
    let dx = _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(hd.as_ptr().cast()) });
    // SAFETY: `dy` is four f32 (unaligned load).
    let dy4 = unsafe { _mm_loadu_ps(dy.as_ptr()) };
    let spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    let dy = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(dy4));
    let p = _mm512_mul_ps(_mm512_mul_ps(dx, dy), f);
    [
        _mm512_castps512_ps128(p),
        _mm512_extractf32x4_ps::<1>(p),
        _mm512_extractf32x4_ps::<2>(p),
        _mm512_extractf32x4_ps::<3>(p),
    ]
}

/// The reference's block products `f32(d)·dy·(inner·T)` of four super-blocks of one row,
/// one per lane, from their sums spread over the 16 lanes of `z[k]` (exact reduction:
/// [`crate::simd::sums4`]); `inner` is 1 (no multiply) or a power of two (exact).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c")]
#[inline]
pub(in crate::simd) fn products4(
    z: &[__m512i; 4],
    hd: &[u16; 4],
    dy: &[f32; 4],
    inner: f32,
) -> __m128 {
    let t = _mm_cvtepi32_ps(sums4(z[0], z[1], z[2], z[3]));
    let t = if inner == 1.0 {
        t
    } else {
        _mm_mul_ps(t, _mm_set1_ps(inner))
    };
    block_products(hd, dy, t)
}

/// Gives a one-column kernel's constants struct `$dot` (whose `sums(x, y)`, or `$sums`, is
/// one super-block's integer sum T spread over 16 lanes, and whose f16 scale is `$block`'s
/// `d`, or `$d_bits`) a `rows4x4`: four rows by four super-blocks of products
/// ([`products4x4`], `$inner`·T); with `prepared`, a `rows4x4_prepared` whose sums take a
/// prepared activation block (`$act`). A macro so that each expansion is its own
/// `#[target_feature]` function (loops, not closures: a closure here is not inlined and
/// passes its vectors in memory). The `group` arm gives it the one-column kernels' `group`
/// from the same `sums`.
macro_rules! rows4x4_impl {
    ($dot:ty, $block:ty, $inner:expr) => {
        rows4x4_impl!($dot, $block, $inner, sums, |x| u16::from_le_bytes(x.d));
    };
    (group $dot:ty, $block:ty, $inner:expr) => {
        impl $dot {
            /// The block products `f32(d)·dy·(inner·T)` of four super-blocks of `xs · ys`,
            /// one per lane, from `sums` (the one-column kernels' step, `grid_one!`): their
            /// sums reduced by one unpack tree, then the reference's float operations.
            #[target_feature(
                enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
            )]
            #[inline]
            unsafe fn group(&self, xs: &[$block; 4], ys: &[BlockQ8K; 4]) -> __m128 {
                let mut z = [_mm512_setzero_si512(); 4];
                for (k, zk) in z.iter_mut().enumerate() {
                    // SAFETY: same features as this function.
                    *zk = unsafe { self.sums(&xs[k], &ys[k]) };
                }
                let hd = xs.each_ref().map(|x| u16::from_le_bytes(x.d));
                let dy = ys.each_ref().map(|y| y.d());
                products4(&z, &hd, &dy, $inner)
            }
        }
    };
    ($dot:ty, $block:ty, $inner:expr, $sums:ident, |$x:ident| $d_bits:expr) => {
        impl $dot {
            /// Four rows by four super-blocks of block products (see [`products4x4`]).
            #[target_feature(
                enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
            )]
            unsafe fn rows4x4(&self, xs: &[&[$block; 4]; 4], ys: &[BlockQ8K; 4]) -> [__m128; 4] {
                rows4x4_impl!(@body xs, ys, $inner, |w, k| self.$sums(&w[k], &ys[k]), |$x| $d_bits)
            }
        }
    };
    (prepared $dot:ty, $block:ty, $act:ty, $inner:expr, $sums:ident, |$x:ident| $d_bits:expr) => {
        impl $dot {
            /// Four rows by four super-blocks of block products against prepared
            /// activations (see [`products4x4`], `prepared_rows!`).
            #[target_feature(
                enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
            )]
            unsafe fn rows4x4_prepared(
                &self,
                xs: &[&[$block; 4]; 4],
                ys: &[BlockQ8K; 4],
                acts: &[$act; 4],
            ) -> [__m128; 4] {
                rows4x4_impl!(@body xs, ys, $inner, |w, k| self.$sums(&w[k], &acts[k]), |$x| $d_bits)
            }
        }
    };
    // the shared body: `$sum` is super-block `$k` of row `$w`'s sums
    (@body $xs:ident, $ys:ident, $inner:expr, |$w:ident, $k:ident| $sum:expr, |$x:ident| $d_bits:expr) => {{
        let mut t = [_mm512_setzero_si512(); 4];
        for ($k, tk) in t.iter_mut().enumerate() {
            let mut z = [_mm512_setzero_si512(); 4];
            for (zr, $w) in z.iter_mut().zip($xs) {
                // SAFETY: the expanding function has the features of the sums function.
                *zr = unsafe { $sum };
            }
            *tk = tree4(z[0], z[1], z[2], z[3]);
        }
        let hd: [u16; 16] = std::array::from_fn(|i| {
            let $x = &$xs[i % 4][i / 4];
            $d_bits
        });
        let dy = [$ys[0].d(), $ys[1].d(), $ys[2].d(), $ys[3].d()];
        products4x4(&t, &hd, &dy, $inner)
    }};
}

/// The body of the multi-row kernels whose super-blocks reduce to one integer each: four
/// rows per pass, four super-blocks at a time by `$k.rows4x4` (copies padded with zero
/// blocks for the last 1–3, whose products are not added), each row prefetched
/// [`crate::simd::PREFETCH_DISTANCE`] bytes ahead; the products added in block order and
/// each row's sum times `$scale` into `$out`. A short pass repeats its first row in the
/// other lanes and does not store them.
macro_rules! grid_rows4 {
    ($k:ident, $block:ty, $rows:ident, $a:ident, $out:ident, $scale:expr) => {
        let ys = view::<BlockQ8K>($a);
        let pd = crate::simd::PREFETCH_DISTANCE;
        for (rows, out) in $rows.chunks(4).zip($out.chunks_mut(4)) {
            let (mut xs, nb) = crate::simd::row_views::<$block>(rows, ys.len());
            for r in rows.len()..4 {
                xs[r] = xs[0];
            }
            let mut s = _mm_setzero_ps();
            for c in (0..nb).step_by(4) {
                let cnt = (nb - c).min(4);
                for x in &xs[..rows.len()] {
                    crate::simd::prefetch_ahead(
                        x[c..].as_ptr().cast(),
                        4 * size_of::<$block>(),
                        pd,
                    );
                }
                let v = if cnt == 4 {
                    let xq = xs.map(|x| <&[$block; 4]>::try_from(&x[c..c + 4]).unwrap());
                    let yq: &[BlockQ8K; 4] = ys[c..c + 4].try_into().unwrap();
                    // SAFETY: the kernel expanding this has the features of `rows4x4`.
                    unsafe { $k.rows4x4(&xq, yq) }
                } else {
                    let xp = xs.map(|x| {
                        let mut t = [<$block as bytemuck::Zeroable>::zeroed(); 4];
                        t[..cnt].copy_from_slice(&x[c..nb]);
                        t
                    });
                    let mut yp = [<BlockQ8K as bytemuck::Zeroable>::zeroed(); 4];
                    yp[..cnt].copy_from_slice(&ys[c..nb]);
                    // SAFETY: as above.
                    unsafe { $k.rows4x4(&xp.each_ref(), &yp) }
                };
                for vk in &v[..cnt] {
                    s = _mm_add_ps(s, *vk);
                }
            }
            let mut o = [0f32; 4];
            // SAFETY: `o` holds four f32 (unaligned store).
            unsafe { _mm_storeu_ps(o.as_mut_ptr(), _mm_mul_ps(_mm_set1_ps($scale), s)) };
            out.copy_from_slice(&o[..out.len()]);
        }
    };
}

/// The body of the multi-row kernels that prepare their activation side once per call
/// (IQ1_M_X, IQ1_S_X, IQ2_XXS): per batch of up to [`crate::simd::DOT_BATCH`] rows and
/// segment of `$seg` super-blocks, `$prep` (a `&[BlockQ8K]` → `$act` closure) for every
/// `$per` activation blocks (1, or 2 for kernels that work on pairs of super-blocks; the
/// segment's last act may get one block), then four-row passes of four super-blocks at a
/// time through `$k.rows4x4_prepared` (copies padded with zero blocks and `$none` for the
/// last 1–3, whose products are not added), each row prefetched
/// [`crate::simd::PREFETCH_DISTANCE`] bytes ahead; the products added in block order. A
/// short pass repeats its first row in the other lanes and does not store them; each row's
/// sum is multiplied by `$scale` (exact: 1 or a power of two). A macro so that it expands
/// inside each `#[target_feature]` kernel.
macro_rules! prepared_rows {
    ($k:ident, $block:ty, $act:ty, $seg:expr, $per:expr, $prep:expr, $none:expr, $rows:ident, $a:ident, $out:ident, $scale:expr) => {
        const BATCH: usize = crate::simd::DOT_BATCH;
        const PER: usize = $per;
        const { assert!(PER == 1 || PER == 2) };
        const { assert!($seg % 4 == 0) };
        let ys = view::<BlockQ8K>($a);
        let pd = crate::simd::PREFETCH_DISTANCE;
        let mut acts = [const { std::mem::MaybeUninit::<$act>::uninit() }; $seg / PER];
        for (rows, out) in $rows.chunks(BATCH).zip($out.chunks_mut(BATCH)) {
            let mut xs: [&[$block]; BATCH] = [&[]; BATCH];
            let mut nb = ys.len();
            for (x, w) in xs.iter_mut().zip(rows) {
                *x = view::<$block>(w);
                nb = nb.min(x.len());
            }
            let nr = rows.len();
            let mut s = [_mm_setzero_ps(); BATCH / 4];
            for seg in (0..nb).step_by($seg) {
                let segn = (nb - seg).min($seg);
                let nact = segn.div_ceil(PER);
                for (act, y) in acts[..nact].iter_mut().zip(ys[seg..seg + segn].chunks(PER)) {
                    act.write(($prep)(y));
                }
                let written = acts.as_ptr().cast::<$act>();
                // SAFETY: the first `nact` entries were written just above.
                let acts = unsafe { std::slice::from_raw_parts(written, nact) };
                for (r, sp) in (0..nr).step_by(4).zip(s.iter_mut()) {
                    // the pass's rows (a short pass repeats its first; not stored)
                    let x4: [&[$block]; 4] =
                        std::array::from_fn(|j| xs[if r + j < nr { r + j } else { r }]);
                    for c in (0..segn).step_by(4) {
                        let cnt = (segn - c).min(4);
                        let b = seg + c;
                        for x in &x4[..(nr - r).min(4)] {
                            crate::simd::prefetch_ahead(
                                x[b..].as_ptr().cast(),
                                4 * size_of::<$block>(),
                                pd,
                            );
                        }
                        let v = if cnt == 4 {
                            let xq = x4.map(|x| <&[$block; 4]>::try_from(&x[b..b + 4]).unwrap());
                            let yq = ys[b..b + 4].try_into().unwrap();
                            let aq = acts[c / PER..(c + 4) / PER].try_into().unwrap();
                            // SAFETY: the kernel expanding this has `rows4x4_prepared`'s features.
                            unsafe { $k.rows4x4_prepared(&xq, yq, aq) }
                        } else {
                            // the last 1–3 super-blocks: copies padded with zero blocks (their
                            // products are not added)
                            let xp = x4.map(|x| {
                                let mut t = [<$block as bytemuck::Zeroable>::zeroed(); 4];
                                t[..cnt].copy_from_slice(&x[b..b + cnt]);
                                t
                            });
                            let mut yp = [<BlockQ8K as bytemuck::Zeroable>::zeroed(); 4];
                            yp[..cnt].copy_from_slice(&ys[b..b + cnt]);
                            let mut ap = [$none; 4 / PER];
                            let na = cnt.div_ceil(PER);
                            ap[..na].copy_from_slice(&acts[c / PER..c / PER + na]);
                            // SAFETY: the kernel expanding this has `rows4x4_prepared`'s features.
                            unsafe { $k.rows4x4_prepared(&xp.each_ref(), &yp, &ap) }
                        };
                        for vk in &v[..cnt] {
                            *sp = _mm_add_ps(*sp, *vk);
                        }
                    }
                }
            }
            for (o, sp) in out.chunks_mut(4).zip(&s) {
                let mut v = [0f32; 4];
                // SAFETY: `v` holds four f32 (unaligned store).
                unsafe { _mm_storeu_ps(v.as_mut_ptr(), _mm_mul_ps(_mm_set1_ps($scale), *sp)) };
                o.copy_from_slice(&v[..o.len()]);
            }
        }
    };
}
