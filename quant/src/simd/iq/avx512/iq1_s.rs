//! IQ1_S · Q8_K with AVX-512: the one-column kernel (gathers), the multi-column kernel and
//! the tile expander, the latter two shared with IQ1_S_X through [`Iq1Layout`]. The decode
//! kernel is in `iq1_rows`.

use super::*;

entry!(multi dot_iq1_s_avx512_multi_entry => dot_iq1_s_avx512_multi, dot_iq1_s_x_avx512_multi_entry => dot_iq1_s_x_avx512_multi);
entry!(dot_iq1_s_avx512_entry => dot_iq1_s_avx512);

/// IQ1_S's per-block bsum terms for one activation block: (Σ ls_g·B_g, Σ ±ls_g·B_g) with
/// B_g = bsum(2g) + bsum(2g+1), `ls8` the eight group scales and `sgn` ±1 per group (the delta
/// sign). Exact integer arithmetic in vectors instead of an eight-step scalar loop.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn iq1s_bsum_terms(ls8: __m256i, sgn: __m256i, y: &BlockQ8K) -> (i32, i32) {
    // SAFETY: the block's 32 bsum bytes (unaligned load).
    let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
    let lb = _mm256_mullo_epi32(ls8, _mm256_madd_epi16(bs, _mm256_set1_epi16(1)));
    // SAFETY: AVX2 is enabled for this function.
    unsafe {
        (
            crate::simd::hsum_i32(lb),
            crate::simd::hsum_i32(_mm256_sign_epi32(lb, sgn)),
        )
    }
}

/// IQ1_S group scales 2·((h >> 12) & 7) + 1 and delta signs (±1 from bit 15) of a block's
/// eight `qh` words.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn iq1s_scales_signs(qh: __m128i) -> (__m256i, __m256i) {
    let h = _mm256_cvtepu16_epi32(qh);
    let ls = _mm256_add_epi32(
        _mm256_slli_epi32(
            _mm256_and_si256(_mm256_srli_epi32(h, 12), _mm256_set1_epi32(7)),
            1,
        ),
        _mm256_set1_epi32(1),
    );
    let sgn = _mm256_sub_epi32(
        _mm256_set1_epi32(1),
        _mm256_slli_epi32(_mm256_srli_epi32(h, 15), 1),
    );
    (ls, sgn)
}

/// `vpermw` control per quarter p: 16-bit lane i (pair sums of elements 2i, 2i+1) takes the
/// scale of group 2p + i/16 — word 4g of IQ2_XXS's per-qword scales, word 2g of IQ1_S's
/// per-dword scales (the tile expanders' offset corrections).
pub(super) static PICK16: [[[u16; 32]; 4]; 2] = {
    let mut t = [[[0u16; 32]; 4]; 2];
    let mut p = 0;
    while p < 4 {
        let mut i = 0;
        while i < 32 {
            let g = 2 * p + i / 16;
            t[0][p][i] = (4 * g) as u16;
            t[1][p][i] = (2 * g) as u16;
            i += 1;
        }
        p += 1;
    }
    t
};

/// `vpmultishiftqb` control on a qword holding four `qh` words: byte 1 of dword i (grid
/// index i of those four groups, sub-group k = i mod 4 of group i/4) takes bits
/// 16·(i/4) + 3k.. — that sub-group's three high index bits land at bits 8–10.
pub(super) static HI_BITS: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 16 {
        t[4 * i + 1] = (16 * (i / 4) + 3 * (i % 4)) as u8;
        i += 1;
    }
    t
};

/// `vpshufb` control: 128-bit lane l's word w takes word 4·(l mod 2) + w/2 of its lane, so
/// lanes 0–1 (and 2–3) hold groups 0..8's words twice each, matching the 16 `bsums` pairs.
pub(super) static PAIR_SCALES: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut b = 0;
    while b < 64 {
        let (l, w) = (b / 16, (b % 16) / 2);
        t[b] = (2 * (4 * (l % 2) + w / 2) + b % 2) as u8;
        b += 1;
    }
    t
};

/// IQ1_S · Q8_K with AVX-512, one column (decode's matvec). Per super-block: the levels of
/// [`Iq1Unpack::levels`], Σ l·y per four elements by `vpdpbusd`, times the group scale by
/// [`scale_pairs`] (the scales formed in every lane from one lane-broadcast of `qh`); the −1 of
/// the level offset and the delta term come from one `vpmaddwd` of the `bsums` against
/// [−ls | ls·sign]. Four super-blocks' two sums (Σ ls·Σv·y, Σ ls·sign·B) are reduced
/// together by an unpack tree, and their float combines run in four lanes, then are added
/// in block order: the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(super) unsafe fn dot_iq1_s_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { Iq1Dot::new() };
    grid_one!(k, BlockIQ1S, w, a)
}

/// The constants of the one-column IQ1_S kernels, in registers.
pub(super) struct Iq1Dot {
    un: Iq1Unpack,
    pairs4: [__m512i; 2],
    pairs: __m512i,
}

impl Iq1Dot {
    /// Loads the constants.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn new() -> Self {
        Iq1Dot {
            // SAFETY: same features as this function.
            un: unsafe { Iq1Unpack::new() },
            pairs4: tables64(&IQ1_PAIRS),
            pairs: table64(&PAIR_SCALES),
        }
    }

    /// The products `f32(d)·dy·(Σ + Σ₁/8)` of four super-blocks of `xs · ys`, one per lane,
    /// the reference's way (see [`dot_iq1_s_avx512`]).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn group(&self, xs: &[BlockIQ1S; 4], ys: &[BlockQ8K; 4]) -> __m128 {
        let mut z = [_mm512_setzero_si512(); 4];
        let mut hd = [0u16; 4];
        let mut dy = [0f32; 4];
        for (k, zk) in z.iter_mut().enumerate() {
            let (x, y) = (&xs[k], &ys[k]);
            hd[k] = u16::from_le_bytes(x.d);
            dy[k] = y.d();
            // SAFETY: same features as this function.
            let lvs = unsafe { self.un.levels(x) };
            // SAFETY: 16 `qh` bytes (unaligned load).
            let qh = unsafe { _mm512_castsi128_si512(_mm_loadu_si128(x.qh.as_ptr().cast())) };
            // SAFETY: same features as this function.
            *zk = unsafe { self.sums(&lvs, _mm512_shuffle_i32x4::<0>(qh, qh), y) };
        }
        // SAFETY: same features as this function.
        unsafe { Self::finish(&z, &hd, &dy) }
    }

    /// One super-block's two integer sums against `y`, lanes 0–7 Σ ls·Σ l·y (in four
    /// partial pairs) and lanes 8–15 the bsum terms (see [`fold_pairs`]): `lvs` its level
    /// codes per quarter, `rq` its eight group words (scale at bits 12–14, delta sign at bit
    /// 15, as in IQ1_S's `qh`) in every 128-bit lane.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn sums(&self, lvs: &[__m512i; 4], rq: __m512i, y: &BlockQ8K) -> __m512i {
        // SAFETY: 256 activation bytes, 32 `bsums` bytes (unaligned).
        let (yq, bs) = unsafe {
            (
                y.qs.as_ptr(),
                _mm512_castsi256_si512(_mm256_loadu_si256(y.bsums.as_ptr().cast())),
            )
        };
        let bs = _mm512_shuffle_i64x2::<0b01_00_01_00>(bs, bs);
        // every 128-bit lane: the eight scales 2·((h >> 12) & 7) + 1 = ((h >> 11) & 0xE) | 1
        let ls = _mm512_ternarylogic_epi32::<0xEA>(
            _mm512_srli_epi16(rq, 11),
            _mm512_set1_epi16(0xE),
            _mm512_set1_epi16(1),
        );
        let sg = _mm512_srai_epi16(rq, 15);
        let lsg = _mm512_sub_epi16(_mm512_xor_si512(ls, sg), sg);
        let z = _mm512_setzero_si512();
        let d: [__m512i; 4] = std::array::from_fn(|p| {
            // SAFETY: quarter p is activation bytes 64p..64p+64 (unaligned load).
            let yv = unsafe { _mm512_loadu_si512(yq.add(64 * p).cast()) };
            _mm512_dpbusd_epi32(z, lvs[p], yv)
        });
        let sc = self.pairs4.map(|t| _mm512_permutexvar_epi16(t, ls));
        let acc = scale_pairs(z, &d, &sc);
        // lanes 0–1: −ls·B per group, lanes 2–3: ls·sign·B
        let m = _mm512_shuffle_epi8(
            _mm512_mask_blend_epi32(0xFF00, _mm512_sub_epi16(_mm512_setzero_si512(), ls), lsg),
            self.pairs,
        );
        let corr = _mm512_madd_epi16(bs, m);
        let folded = _mm512_add_epi32(acc, _mm512_shuffle_i64x2::<0b01_00_11_10>(acc, acc));
        _mm512_mask_add_epi32(corr, 0x00FF, corr, folded)
    }

    /// The float products of four super-blocks from their [`Self::sums`] `z`, f16 scales
    /// `hd` and activation scales `dy`, one per lane: the reference's operations.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn finish(z: &[__m512i; 4], hd: &[u16; 4], dy: &[f32; 4]) -> __m128 {
        let (sumi, sumi1) = fold_pairs(tree4(z[0], z[1], z[2], z[3]));
        let t = _mm_add_ps(
            _mm_cvtepi32_ps(sumi),
            _mm_mul_ps(_mm_set1_ps(0.125), _mm_cvtepi32_ps(sumi1)),
        );
        block_products(hd, dy, t)
    }
}

/// The reference's `f32(d)·dy·t` of four super-blocks, one per lane: `hd` their f16
/// scales, `dy` their activation scales, `t` their integer parts as f32.
#[target_feature(enable = "avx2,f16c")]
#[inline]
pub(super) fn block_products(hd: &[u16; 4], dy: &[f32; 4], t: __m128) -> __m128 {
    let hq = hd.iter().rev().fold(0u64, |q, &h| q << 16 | u64::from(h));
    let dx = _mm_cvtph_ps(_mm_cvtsi64_si128(hq as i64));
    // SAFETY: `dy` holds four f32 (unaligned load).
    _mm_mul_ps(_mm_mul_ps(dx, unsafe { _mm_loadu_ps(dy.as_ptr()) }), t)
}

/// The reference's `s += v` for the first `cnt` lanes of `v`, in lane (block) order.
#[target_feature(enable = "sse")]
#[inline]
pub(super) fn add_lanes(s: &mut f32, v: __m128, cnt: usize) {
    let mut vals = [0f32; 4];
    // SAFETY: `vals` holds four f32 (unaligned store).
    unsafe { _mm_storeu_ps(vals.as_mut_ptr(), v) };
    for vk in &vals[..cnt] {
        *s += vk;
    }
}

/// IQ1_S · Q8_K against up to eight activation columns per pass. Per super-block the 32
/// 11-bit grid indices are formed in vector registers and each quarter's eight grid rows of
/// level codes gathered from [`IQ1S_LEVELS`] (`vpgatherdq`, [`Iq1Unpack::block`]); per column Σ (l − 1)·y =
/// Σ l·y − Σ y uses the activation block sums. Exact integer arithmetic and the reference's
/// float combine: each column gets the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(super) unsafe fn dot_iq1_s_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { iq1_multi::<BlockIQ1S>(n, w, acts, out) }
}

/// IQ1_S_X · Q8_K against up to eight activation columns per pass:
/// [`dot_iq1_s_avx512_multi`] with the level codes unpacked by shifts
/// ([`Iq1Unpack::block_x`]) instead of gathered.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(super) unsafe fn dot_iq1_s_x_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { iq1_multi::<BlockIQ1SX>(n, w, acts, out) }
}

/// The body of the IQ1 multi-column kernels, for either layout.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
#[inline]
pub(super) unsafe fn iq1_multi<B: Iq1Layout>(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let ld = |p: *const u8| {
        // SAFETY: every pointer passed is into a slice of at least 64 bytes; unaligned loads.
        unsafe { _mm512_loadu_si512(p.cast()) }
    };
    // SAFETY: same features as this function.
    let un = unsafe { Iq1Unpack::new() };
    let pick = tables64(&IQ1_DWORD_PAIRS);
    let xs = view::<B>(w);
    for r in crate::simd::column_split(acts.len(), COLS) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let mut ys: [&[BlockQ8K]; COLS] = [&[]; COLS];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8K>(a);
        }
        let ys = &ys[..acts.len()];
        let mut s = [0f32; COLS];
        for (bi, x) in xs.iter().enumerate() {
            // SAFETY: same features as this function.
            let Iq1Block { lvs, ls32, qh } = unsafe { un.unpack(x) };
            let lsv = pick.map(|t| _mm512_permutexvar_epi16(t, ls32));
            let dx = f16c!(x.d());
            // SAFETY: the features of this function cover the helper.
            let (ls8, sgn) = unsafe { iq1s_scales_signs(qh) };
            for (c, y) in ys.iter().enumerate() {
                let y = &y[bi];
                let z = _mm512_setzero_si512();
                let d: [__m512i; 4] = std::array::from_fn(|p| {
                    _mm512_dpbusd_epi32(z, lvs[p], ld(y.qs[64 * p..].as_ptr().cast()))
                });
                let acc = scale_pairs(z, &d, &lsv);
                // SAFETY: the features of this function cover the helper.
                let (lb, slb) = unsafe { iq1s_bsum_terms(ls8, sgn, y) };
                // − Σ ls·B is the −1 of the level offset
                let (sumi, sumi1) = (_mm512_reduce_add_epi32(acc) - lb, slb);
                s[c] += dx * y.d() * (sumi as f32 + 0.125 * sumi1 as f32);
            }
        }
        out.copy_from_slice(&s[..out.len()]);
    }
}

/// The IQ1_S unpacking constants, held in registers for a whole row.
pub(super) struct Iq1Unpack {
    hi_bits: __m512i,
    rq_ctrl: __m512i,
}

/// The two IQ1_S layouts ([`BlockIQ1S`] and its repacked [`BlockIQ1SX`]) the multi-column
/// kernel and the tile expander share.
pub(super) trait Iq1Layout: bytemuck::Pod {
    /// `true` for IQ1_S_X.
    const REPACKED: bool;
    /// The f16 super-block scale.
    fn d(&self) -> [u8; 2];
}

impl Iq1Layout for BlockIQ1S {
    const REPACKED: bool = false;
    fn d(&self) -> [u8; 2] {
        self.d
    }
}

impl Iq1Layout for BlockIQ1SX {
    const REPACKED: bool = true;
    fn d(&self) -> [u8; 2] {
        self.d
    }
}

/// `vpmultishiftqb` control that moves IQ1_S_X's group nibbles (nibble g at bit 4g of `sc`,
/// broadcast to every dword) to bits 12–15 of 16-bit lane g of every 128-bit lane: the high
/// byte of word g takes bits 4g − 4 .. 4g + 4 (rotating, so word 0 takes bits 60..64 and
/// 0..4); the low bytes are unused.
pub(super) static RQ_CTRL: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 32 {
        t[2 * i + 1] = ((4 * (i % 8) + 60) % 64) as u8;
        i += 1;
    }
    t
};

/// One unpacked IQ1_S super-block: the level codes l = v + 1 (0..2) of each 64-element
/// quarter in element order, the eight group scales `2·((h >> 12) & 7) + 1` as the low
/// 256 bits of `ls32` (one per dword) and the raw `qh` words.
pub(super) struct Iq1Block {
    pub lvs: [__m512i; 4],
    pub ls32: __m512i,
    pub qh: __m128i,
}

impl Iq1Unpack {
    /// Loads the constants.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn new() -> Self {
        // SAFETY: HI_BITS has 64 bytes (unaligned load).
        let hi_bits = unsafe { _mm512_loadu_si512(HI_BITS.as_ptr().cast()) };
        // SAFETY: RQ_CTRL has 64 bytes (unaligned load).
        let rq_ctrl = unsafe { _mm512_loadu_si512(RQ_CTRL.as_ptr().cast()) };
        Iq1Unpack { hi_bits, rq_ctrl }
    }

    /// The level codes of one super-block's four quarters (exact): the 32 11-bit grid
    /// indices are formed in two registers (`vpmovzxbd` of the `qs` bytes, `vpmultishiftqb`
    /// of the broadcast `qh` words for bits 8–10) and each quarter's eight grid rows are
    /// one `vpgatherdq` from [`IQ1S_LEVELS`].
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn levels(&self, x: &BlockIQ1S) -> [__m512i; 4] {
        let q = x.qs.as_ptr();
        let h = x.qh.as_ptr();
        // SAFETY: 32 `qs` bytes and 16 `qh` bytes per block (unaligned loads of 16 and 8).
        let (q0, q1, qh) = unsafe {
            (
                _mm512_cvtepu8_epi32(_mm_loadu_si128(q.cast())),
                _mm512_cvtepu8_epi32(_mm_loadu_si128(q.add(16).cast())),
                _mm512_castsi128_si512(_mm_loadu_si128(h.cast())),
            )
        };
        let h0 = _mm512_permutexvar_epi64(_mm512_setzero_si512(), qh);
        let h1 = _mm512_permutexvar_epi64(_mm512_set1_epi64(1), qh);
        // index = qs | (hi & 0x700)
        let c700 = _mm512_set1_epi32(0x700);
        let i0 = _mm512_ternarylogic_epi32::<0xF8>(
            q0,
            _mm512_multishift_epi64_epi8(self.hi_bits, h0),
            c700,
        );
        let i1 = _mm512_ternarylogic_epi32::<0xF8>(
            q1,
            _mm512_multishift_epi64_epi8(self.hi_bits, h1),
            c700,
        );
        let base = IQ1S_LEVELS.as_ptr().cast::<u8>();
        // SAFETY: every index is < 2048, the table's length, and each read is 8 bytes at
        // 8·index.
        unsafe {
            [
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(i0), base.cast()),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(i0), base.cast()),
                _mm512_i32gather_epi64::<8>(_mm512_castsi512_si256(i1), base.cast()),
                _mm512_i32gather_epi64::<8>(_mm512_extracti64x4_epi64::<1>(i1), base.cast()),
            ]
        }
    }

    /// Unpacks one super-block (exact): [`Self::levels`] and the group scales.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn block(&self, x: &BlockIQ1S) -> Iq1Block {
        // SAFETY: same features as this function.
        let lvs = unsafe { self.levels(x) };
        // SAFETY: 16 `qh` bytes per block (unaligned load).
        let qh = unsafe { _mm_loadu_si128(x.qh.as_ptr().cast()) };
        // SAFETY: same features as this function.
        unsafe { Self::with_scales(lvs, qh) }
    }

    /// The level codes of an IQ1_S_X block's four quarters (three operations each,
    /// [`iq1sx_codes`]) and its eight group words in every 128-bit lane, each with the
    /// group's scale at bits 12–14 and its delta sign at bit 15 (where IQ1_S's `qh` words
    /// hold them; the low bits are other groups' nibbles, which no user of the words reads).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn levels_x(&self, x: &BlockIQ1SX) -> ([__m512i; 4], __m512i) {
        // SAFETY: same features as this function.
        let lvs = unsafe { iq1sx_codes(x) };
        let sc = _mm512_set1_epi32(i32::from_le_bytes(x.sc));
        (lvs, _mm512_multishift_epi64_epi8(self.rq_ctrl, sc))
    }

    /// Unpacks one IQ1_S_X super-block (exact): what [`Self::block`] gives for the IQ1_S
    /// block it was repacked from, but `qh`'s index bits.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn block_x(&self, x: &BlockIQ1SX) -> Iq1Block {
        // SAFETY: same features as this function.
        let (lvs, rq) = unsafe { self.levels_x(x) };
        // SAFETY: same features as this function.
        unsafe { Self::with_scales(lvs, _mm512_castsi512_si128(rq)) }
    }

    /// [`Self::block`] or [`Self::block_x`], by layout.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    pub(super) unsafe fn unpack<B: Iq1Layout>(&self, x: &B) -> Iq1Block {
        // `cast_ref` is to the block's own type (the branch not taken is removed at compile
        // time)
        if B::REPACKED {
            // SAFETY: same features as this function.
            unsafe { self.block_x(bytemuck::cast_ref(x)) }
        } else {
            // SAFETY: same features as this function.
            unsafe { self.block(bytemuck::cast_ref(x)) }
        }
    }

    /// An [`Iq1Block`] from its level codes and group words (`qh`, IQ1_S's layout).
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c"
    )]
    #[inline]
    unsafe fn with_scales(lvs: [__m512i; 4], qh: __m128i) -> Iq1Block {
        let ls32 = _mm512_castsi256_si512(_mm256_add_epi32(
            _mm256_slli_epi32(
                _mm256_and_si256(
                    _mm256_srli_epi32(_mm256_cvtepu16_epi32(qh), 12),
                    _mm256_set1_epi32(7),
                ),
                1,
            ),
            _mm256_set1_epi32(1),
        ));
        Iq1Block { lvs, ls32, qh }
    }
}

/// Expands an IQ1_S row into the tile layout of [`super::tile_grid`] (values −1/0/+1, group
/// scales, f32 scale, offset correction, and the delta term's ls·sign per group), byte for
/// byte what the scalar `expand_iq1_s` writes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(in crate::simd) unsafe fn expand_iq1_s_avx512(w: &[u8], out: &mut [u8]) {
    // SAFETY: same features as this function.
    unsafe { expand_iq1::<BlockIQ1S>(w, out) }
}

/// Expands an IQ1_S_X row into the tile layout, byte for byte what the scalar
/// `expand_iq1_s_x` writes (and `expand_iq1_s` for the IQ1_S row it came from).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
pub(in crate::simd) unsafe fn expand_iq1_s_x_avx512(w: &[u8], out: &mut [u8]) {
    // SAFETY: same features as this function.
    unsafe { expand_iq1::<BlockIQ1SX>(w, out) }
}

/// The body of the IQ1 expanders, for either layout.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512bitalg,avx512vnni,gfni,f16c")]
#[inline]
pub(in crate::simd) unsafe fn expand_iq1<B: Iq1Layout>(w: &[u8], out: &mut [u8]) {
    use crate::simd::iq::tile::EXPANDED_SB;
    // SAFETY: same features as this function.
    let un = unsafe { Iq1Unpack::new() };
    let pick: [__m512i; 4] = std::array::from_fn(|p| {
        // SAFETY: each PICK16 row is 64 readable bytes (unaligned load).
        unsafe { _mm512_loadu_si512(PICK16[1][p].as_ptr().cast()) }
    });
    let ones = _mm512_set1_epi8(1);
    for (x, o) in view::<B>(w).iter().zip(out.chunks_exact_mut(EXPANDED_SB)) {
        // SAFETY: same features as this function.
        let Iq1Block { lvs, ls32, qh } = unsafe { un.unpack(x) };
        let mut corr = _mm512_setzero_si512();
        for p in 0..4 {
            let v = _mm512_sub_epi8(lvs[p], ones);
            let lsv = _mm512_permutexvar_epi16(pick[p], ls32);
            corr = crate::simd::dpwssd(corr, _mm512_maddubs_epi16(ones, v), lsv);
            // SAFETY: `o` is EXPANDED_SB (≥ 256) bytes; quarter p is bytes 64p..64p+64.
            unsafe { _mm512_storeu_si512(o[64 * p..].as_mut_ptr().cast(), v) };
        }
        // SAFETY: the features of this function cover the helper.
        let (ls8, sgn) = unsafe { iq1s_scales_signs(qh) };
        let ls16 = _mm256_cvtepi32_epi16(ls8);
        let lsg16 = _mm256_cvtepi32_epi16(_mm256_sign_epi32(ls8, sgn));
        store_expanded_tail(o, ls16, lsg16, f16c!(x.d()), corr);
    }
}
