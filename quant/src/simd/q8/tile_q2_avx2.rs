//! Register-tiled Q2_0 · Q8_0 GEMM for prompt chunks on AVX2 CPUs, on the packed Q8_0
//! activation panel of [`crate::simd::q8::tile`]: up to four weight rows × eight columns per
//! call, every output with the scalar reference's bits.
//!
//! Each 64-element weight block's 2-bit codes c (0..3, value c − 1) are cut into bytes in
//! element order once per row and block: each 32-element half's eight code bytes are copied
//! four times (`vpshufb`), the bytes whose code sits in the high nibble take it from a copy
//! shifted right by four (`vpblendvb`), a mask keeps the code's two bits where they are and a
//! sixteen-entry `vpshufb` table maps them to 0..3. Codes are unsigned, so `vpmaddubsw`
//! multiplies them by the panel's activation codes directly (|pair| ≤ 2·3·128, no i16
//! saturation) and `vpmaddwd` by ones gives eight 4-element lane sums Σ c·y; adding the
//! panel's −128·Σ₄y shifted right by seven (exact: −Σ₄y) leaves Σ (c − 1)·y per lane.
//!
//! The reference combines each half's integer sum as a scalar — `s += d·(dy₀·Σ₀ + dy₁·Σ₁)`
//! — so a tile's eight (row, column) lane vectors of one column pair and half are reduced
//! together (a `vphaddd` tree, eight sums in one vector, lane 2·row + column) and the float
//! combine runs on eight (row, column) outputs at once with the reference's separate
//! roundings (no FMA) and block order. The AVX-512 tile ([`super::tile_q2`]) forms the same
//! integers with `vpdpbusd` on 512-bit registers; on AVX2 CPUs with AVX-VNNI
//! (`tile_avx_vnni_entry`) one `vpdpbusd` from −Σ₄y replaces the `vpmaddubsw`, `vpmaddwd` and
//! add of each lane vector (the same kernel body, `tile_fn!`).

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use crate::simd::q8::tile::{PAIR_BLOCK, TILE_COLS};
    use crate::simd::{f16c, hsum_i32x8, store_tile, tile_shapes};
    use std::arch::x86_64::*;

    /// Safe entries (AVX2; AVX-VNNI): check the shapes, then run the kernel for the tile's
    /// row and pair count.
    macro_rules! tile_entry_fn {
        ($name:ident, $tile:ident) => {
            pub(crate) fn $name(
                n: usize,
                rows: &[&[u8]],
                panel: &[u8],
                cols: usize,
                out: &mut [f32],
            ) {
                let nb =
                    crate::simd::q8::tile_q2::x86::check_shapes::<false>(n, rows, panel, cols, out);
                macro_rules! go {
                    ($r:literal, $p:literal) => {{
                        let xs: &[&[u8]; $r] = rows.try_into().expect("row count checked above");
                        // SAFETY: `table::kernels` hands this entry out only after checking
                        // the features; the shapes are checked above (every block and
                        // pair-block index is in bounds).
                        let s = unsafe { $tile::<$r, $p>(nb, xs, panel) };
                        store_tile(&s, $r, cols, 1.0, out);
                    }};
                }
                tile_shapes!(rows.len(), cols.div_ceil(2), go)
            }
        };
    }
    tile_entry_fn!(tile_entry, tile);
    tile_entry_fn!(tile_avx_vnni_entry, tile_avx_vnni);

    /// The codes of one 64-element Q2_0 block as unsigned bytes 0..3 in element order, one
    /// register per 32-element half (see the module docs), and the block's scale as f32.
    ///
    /// # Panics
    /// If `row` does not hold block `i`.
    #[target_feature(enable = "avx2,f16c")]
    #[inline]
    fn unpack(row: &[u8], i: usize) -> ([__m256i; 2], f32) {
        let b = &row[18 * i..18 * i + 18];
        // SAFETY: the block's 16 code bytes follow its scale (unaligned load).
        let q = unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(b[2..].as_ptr().cast())) };
        // byte j of half h: code byte 8h + j/4, whose bits 2(j % 4).. hold element j's code
        let spread = |h: i8| {
            let s = |j: i8| 8 * h + j / 4;
            _mm256_setr_epi8(
                s(0),
                s(1),
                s(2),
                s(3),
                s(4),
                s(5),
                s(6),
                s(7),
                s(8),
                s(9),
                s(10),
                s(11),
                s(12),
                s(13),
                s(14),
                s(15),
                s(16),
                s(17),
                s(18),
                s(19),
                s(20),
                s(21),
                s(22),
                s(23),
                s(24),
                s(25),
                s(26),
                s(27),
                s(28),
                s(29),
                s(30),
                s(31),
            )
        };
        // bytes j % 4 ∈ {2, 3} take the copy shifted right by four
        let high = _mm256_set1_epi32(0x8080_0000_u32 as i32);
        let keep = _mm256_set1_epi32(0x0c03_0c03);
        // code bits as masked (c, 4c for j % 4 odd) → c
        let table = _mm256_setr_epi8(
            0, 1, 2, 3, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 1, 2, 3, 1, 0, 0, 0, 2, 0, 0, 0, 3,
            0, 0, 0,
        );
        let half = |h: i8| {
            let t = _mm256_shuffle_epi8(q, spread(h));
            let t = _mm256_blendv_epi8(t, _mm256_srli_epi16(t, 4), high);
            _mm256_shuffle_epi8(table, _mm256_and_si256(t, keep))
        };
        ([half(0), half(1)], f16c!([b[0], b[1]]))
    }

    /// The tile's sums `[column][row]` for `R` rows × `P` column pairs (see the module docs),
    /// as `$name` compiled with `$features`, each (row, column, half) lane vector formed by
    /// `$lane` from the codes `$c`, the column's activation codes `$y` and its −Σ₄y `$neg`.
    macro_rules! tile_fn {
        ($name:ident, $features:literal, |$c:ident, $y:ident, $neg:ident| $lane:expr) => {
            /// The tile's sums `[column][row]` for `R` rows × `P` column pairs (see the module docs).
            ///
            /// # Safety
            /// The CPU must have the enabled features; every row holds `nb` Q2_0 blocks and `panel`
            /// `2·nb·P` pair-blocks.
            #[target_feature(enable = $features)]
            unsafe fn $name<const R: usize, const P: usize>(
                nb: usize,
                xs: &[&[u8]; R],
                panel: &[u8],
            ) -> [[f32; 4]; TILE_COLS] {
                let zero = _mm256_setzero_si256();
                // lane 2r + c of s[p]: row r, column 2p + c
                let mut s = [_mm256_setzero_ps(); 4];
                for i in 0..nb {
                    let mut codes = [[zero; 2]; R];
                    let mut dxs = [0f32; 4];
                    for r in 0..R {
                        (codes[r], dxs[r]) = unpack(xs[r], i);
                    }
                    // (dx0, dx0, dx1, dx1, …): lane 2r + c takes row r's scale
                    let dx = _mm256_setr_ps(
                        dxs[0], dxs[0], dxs[1], dxs[1], dxs[2], dxs[2], dxs[3], dxs[3],
                    );
                    for (p, sp) in s.iter_mut().enumerate().take(P) {
                        let mut isum = [zero; 2];
                        let mut dy = [_mm256_setzero_ps(); 2];
                        for h in 0..2 {
                            let pb = (2 * i + h) * P + p;
                            let at = &panel[pb * PAIR_BLOCK..(pb + 1) * PAIR_BLOCK];
                            // SAFETY: the pair-block's two columns' 32 code bytes at 0 and 32, their
                            // eight-lane scales at 64 and 96 and their −128·Σ₄y at 128 and 160 are
                            // readable (unaligned loads).
                            let (y, neg, d) = unsafe {
                                let p = at.as_ptr();
                                (
                                    [
                                        _mm256_loadu_si256(p.cast()),
                                        _mm256_loadu_si256(p.add(32).cast()),
                                    ],
                                    [
                                        _mm256_srai_epi32::<7>(_mm256_loadu_si256(
                                            p.add(128).cast(),
                                        )),
                                        _mm256_srai_epi32::<7>(_mm256_loadu_si256(
                                            p.add(160).cast(),
                                        )),
                                    ],
                                    [
                                        _mm256_loadu_ps(p.add(64).cast()),
                                        _mm256_loadu_ps(p.add(96).cast()),
                                    ],
                                )
                            };
                            let lanes: [__m256i; 8] = std::array::from_fn(|l| {
                                let (r, c) = (l / 2, l % 2);
                                if r < R {
                                    let ($c, $y, $neg) = (codes[r][h], y[c], neg[c]);
                                    $lane
                                } else {
                                    zero
                                }
                            });
                            isum[h] = hsum_i32x8(&lanes);
                            // (dy of column 0, of column 1, …) for lanes 2r + c
                            dy[h] = _mm256_blend_ps::<0b1010_1010>(d[0], d[1]);
                        }
                        let inner = _mm256_add_ps(
                            _mm256_mul_ps(dy[0], _mm256_cvtepi32_ps(isum[0])),
                            _mm256_mul_ps(dy[1], _mm256_cvtepi32_ps(isum[1])),
                        );
                        *sp = _mm256_add_ps(*sp, _mm256_mul_ps(dx, inner));
                    }
                }
                let mut out = [[0f32; 4]; TILE_COLS];
                for (p, v) in s.iter().enumerate().take(P) {
                    let mut l = [0f32; 8];
                    // SAFETY: `l` has room for 8 f32.
                    unsafe { _mm256_storeu_ps(l.as_mut_ptr(), *v) };
                    for r in 0..R {
                        out[2 * p][r] = l[2 * r];
                        out[2 * p + 1][r] = l[2 * r + 1];
                    }
                }
                out
            }
        };
    }
    tile_fn!(tile, "avx2,fma,f16c", |c, y, neg| {
        let p16 = _mm256_maddubs_epi16(c, y);
        _mm256_add_epi32(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)), neg)
    });
    tile_fn!(tile_avx_vnni, "avx2,fma,f16c,avxvnni", |c, y, neg| {
        _mm256_dpbusd_avx_epi32(neg, c, y)
    });
}
