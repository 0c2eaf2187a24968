//! The kernel table: which kernel serves a weight type on a CPU, in one place.
//!
//! A CPU is summed up by one [`CpuLevel`], detected once ([`CpuLevel::detect`]). The table
//! has one [`Row`] per (type, level) where that level brings a kernel, with four
//! columns:
//! - **dot**: one weight row · one activation row (the fallback of every op);
//! - **rows**: several weight rows · one activation row (decode matvecs, [`super::RowsDotFn`]);
//! - **multi**: one weight row · several activation rows (prompt chunks and MoE experts with a
//!   few tokens, [`super::MultiDotFn`]);
//! - **tile**: a register-tiled GEMM for prompt chunks ([`Tile`]);
//! - **split**: MXFP4 only, the rows and multi kernels on rows in the official FP4 layout,
//!   codes and scales apart (an official checkpoint's experts used in place,
//!   [`super::SplitFp4`]); where a level has none, callers convert rows to MXFP4 first.
//!
//! A level inherits every column it leaves empty from the levels below it (the AVX2-VNNI rows
//! only where the CPU has AVX-VNNI: [`CpuLevel::includes`]), down to the scalar
//! reference of the type table (`DType::info().vec_dot`), so [`kernels`] resolves a type at a
//! level by walking its rows upwards. Callers resolve once (the executor does it per plan
//! node when the plan is built) and keep the function pointers; nothing here allocates or
//! reads the environment.
//!
//! Every kernel of the table returns its scalar reference's bits (the float types: within
//! the documented reordering bound); `quant/tests/simd.rs` checks every kernel the table
//! lists at the levels the CPU running it has, and pins the table's size.

use super::float::tile as tile_float;
use super::iq::{amx as tile_amx, group as iq_group, tile as tile_grid};
use super::q8::tile as tile_q8;
use super::q8::tile_x16;
use crate::{DType, DotFn};
use std::sync::OnceLock;

/// What a CPU can run, in increasing order: every level includes the ones below it, but
/// [`CpuLevel::Avx2Vnni`], which the AVX-512 levels include only where the CPU has AVX-VNNI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CpuLevel {
    /// No SIMD kernel: the scalar references only.
    Scalar,
    /// AVX2, FMA and F16C.
    Avx2,
    /// AVX-VNNI on top of AVX2 (`vpdpbusd` and `vpdpwssd` on 256-bit registers: Intel's
    /// client cores since Alder Lake, its E-core Xeons, AMD Zen 5). The one level outside the
    /// linear order: many AVX-512 CPUs (Skylake-X to Ice Lake, Zen 4) lack it, so its rows
    /// apply at a level only where the CPU has AVX-VNNI ([`CpuLevel::includes`]).
    Avx2Vnni,
    /// AVX-512 F, BW, VL and DQ: the float kernels and tiles and the attention tiles (the
    /// activation quantizers pick their AVX-512 or AVX2 form by the detected CPU:
    /// `q8::quantize`).
    Avx512,
    /// AVX-512 VBMI, BITALG, VNNI and GFNI on top: every quantized kernel and tile.
    Avx512Vnni,
    /// AVX512-BF16 on top: the BF16 tile multiplies with `vdpbf16ps`.
    Avx512Bf16,
    /// AMX-TILE and AMX-INT8, with the operating system's permission: the AMX GEMM of the
    /// grid-type MoE experts (tested and benchmarked against the group tile, which
    /// MUL_MAT_ID runs: it measured faster on an AMX host).
    Amx,
}

impl CpuLevel {
    /// Every level, lowest first.
    pub const ALL: [CpuLevel; 7] = [
        CpuLevel::Scalar,
        CpuLevel::Avx2,
        CpuLevel::Avx2Vnni,
        CpuLevel::Avx512,
        CpuLevel::Avx512Vnni,
        CpuLevel::Avx512Bf16,
        CpuLevel::Amx,
    ];

    /// The highest level this CPU (and, for AMX, this process) supports. Detected once.
    pub fn detect() -> CpuLevel {
        static LEVEL: OnceLock<CpuLevel> = OnceLock::new();
        *LEVEL.get_or_init(detect_level)
    }

    /// The levels up to and including this one that it includes ([`CpuLevel::includes`]),
    /// lowest first.
    pub fn up_to(self) -> impl Iterator<Item = CpuLevel> {
        CpuLevel::ALL.into_iter().filter(move |&l| self.includes(l))
    }

    /// True when a CPU at this level runs the kernels of level `row`: `row` is at or below
    /// this level and, for [`CpuLevel::Avx2Vnni`], the CPU has AVX-VNNI (an AVX-512 level
    /// does not imply it).
    pub fn includes(self, row: CpuLevel) -> bool {
        row <= self && (row != CpuLevel::Avx2Vnni || has_avx_vnni())
    }

    /// The level's name as fathom prints it (`scalar`, `avx2`, `avx2-vnni`, `avx512`,
    /// `avx512-vnni`, `avx512-bf16`, `amx`).
    pub fn name(self) -> &'static str {
        match self {
            CpuLevel::Scalar => "scalar",
            CpuLevel::Avx2 => "avx2",
            CpuLevel::Avx2Vnni => "avx2-vnni",
            CpuLevel::Avx512 => "avx512",
            CpuLevel::Avx512Vnni => "avx512-vnni",
            CpuLevel::Avx512Bf16 => "avx512-bf16",
            CpuLevel::Amx => "amx",
        }
    }
}

impl std::fmt::Display for CpuLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(target_arch = "x86_64")]
fn detect_level() -> CpuLevel {
    use std::arch::is_x86_feature_detected as has;
    if !(has!("avx2") && has!("fma") && has!("f16c")) {
        return CpuLevel::Scalar;
    }
    if !(has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq")) {
        return if has_avx_vnni() {
            CpuLevel::Avx2Vnni
        } else {
            CpuLevel::Avx2
        };
    }
    if !(has!("avx512vbmi") && has!("avx512bitalg") && has!("avx512vnni") && has!("gfni")) {
        return CpuLevel::Avx512;
    }
    if !has!("avx512bf16") {
        return CpuLevel::Avx512Vnni;
    }
    if !tile_amx::amx_allowed() {
        return CpuLevel::Avx512Bf16;
    }
    CpuLevel::Amx
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_level() -> CpuLevel {
    CpuLevel::Scalar
}

/// True when the CPU has AVX2 and AVX-VNNI (the VEX-encoded `vpdpbusd`, `vpdpwssd`).
fn has_avx_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("avxvnni")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A kernel of the table with the name tools and tests print (`avx2`, `avx512`,
/// `avx512-pairs`, …; the level's name unless a type has several ways of doing one job).
#[derive(Clone, Copy, Debug)]
pub struct Kernel<F> {
    /// The name.
    pub name: &'static str,
    /// The function.
    pub f: F,
}

/// A prompt-chunk GEMM, by the activation layout it works on.
#[derive(Clone, Copy, Debug)]
pub enum Tile {
    /// Four weight rows × eight Q8_0 activation columns packed into panels
    /// ([`tile_q8::pack_q8_0_panel`]): Q2_0 and Q2_0_X weights.
    Panel(tile_q8::TileFn),
    /// Sixteen Q8_0 weight rows expanded into a group ([`tile_x16::expand_group_ref`]'s
    /// bytes) × up to eight columns of a panel ([`tile_x16::pack_panel`]), rows in a
    /// register's lanes.
    Q8Group {
        /// The tile.
        tile: tile_x16::GroupTileFn,
        /// The group expander.
        expand: tile_x16::GroupExpandFn,
    },
    /// Four weight rows × four activation columns of the weight's own float type.
    Float(tile_float::TileFn),
    /// Grid-type MoE experts (IQ2_XXS, IQ1_S and their repacked forms): rows expanded once
    /// ([`tile_grid`]) into a VNNI register tile, and the AMX tile where there is AMX.
    /// MUL_MAT_ID runs the sixteen-row group tile; the four-row and AMX tiles are tested and
    /// are the points of comparison of the `gemm` benches (the AMX split starts from the
    /// four-row tile's expanded rows).
    Grid {
        /// The four-row VNNI tile on expanded rows.
        tile: tile_grid::TileFn,
        /// The row expander.
        expand: tile_grid::ExpandFn,
        /// The sixteen-row group tile, which MUL_MAT_ID runs.
        group: GridGroup,
        /// The AMX tile, on CPUs with AMX. MUL_MAT_ID does not run it: on the AMX host
        /// measured (2026-12-07, a KVM guest) the group tile took a prompt chunk's experts
        /// 1.2–1.6× faster (docs/kernels.md, "AMX tiles for the grid experts").
        amx: Option<AmxTile>,
    },
    /// Grid experts by the sixteen-row group tile alone: IQ2_XXS with AVX-VNNI (no four-row
    /// tile, no AMX), IQ1_M (and IQ1_M_X) with AVX-VNNI or AVX-512 VNNI (its scales cover 16
    /// elements, which the four-row tile's layout has no room for).
    GridGroup(GridGroup),
}

/// The group GEMM of IQ2_XXS or IQ1_M experts ([`iq_group`]): weight rows expanded sixteen at
/// a time into a group, rows in a register's lanes.
#[derive(Clone, Copy, Debug)]
pub struct GridGroup {
    /// The tile kernel.
    pub tile: iq_group::GroupTileFn,
    /// Sixteen weight rows → a group.
    pub expand: iq_group::GroupExpandFn,
    /// Scale groups a super-block of the layout ([`iq_group::SCALES_32`],
    /// [`iq_group::SCALES_16`]): the group's and the panels' sizes.
    pub scales: usize,
}

/// The AMX GEMM of a grid type ([`tile_amx`]).
#[derive(Clone, Copy, Debug)]
pub struct AmxTile {
    /// The tile kernel.
    pub tile: tile_amx::AmxTileFn,
    /// Which grid family.
    pub kind: tile_amx::GridKind,
    /// Grid-expanded row → AMX-expanded row.
    pub split: tile_amx::SplitFn,
    /// Weight row → AMX-expanded row in one pass, for the repacked forms.
    pub direct: Option<tile_amx::AmxExpandFn>,
}

/// One row of the table: the kernels `level` brings for `dtype` (`None`: inherited).
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// The weight type.
    pub dtype: DType,
    /// The level.
    pub level: CpuLevel,
    /// One row · one column.
    pub dot: Option<Kernel<DotFn>>,
    /// Several rows · one column.
    pub rows: Option<Kernel<super::RowsDotFn>>,
    /// One row · several columns.
    pub multi: Option<Kernel<super::MultiDotFn>>,
    /// The prompt-chunk GEMM.
    pub tile: Option<Kernel<Tile>>,
    /// The kernels of rows in the official FP4 layout (MXFP4).
    pub split: Option<Kernel<super::SplitFp4>>,
}

impl Row {
    const fn new(dtype: DType, level: CpuLevel) -> Row {
        Row {
            dtype,
            level,
            dot: None,
            rows: None,
            multi: None,
            tile: None,
            split: None,
        }
    }
    const fn dot(mut self, name: &'static str, f: DotFn) -> Row {
        self.dot = Some(Kernel { name, f });
        self
    }
    const fn rows(mut self, name: &'static str, f: super::RowsDotFn) -> Row {
        self.rows = Some(Kernel { name, f });
        self
    }
    const fn multi(mut self, name: &'static str, f: super::MultiDotFn) -> Row {
        self.multi = Some(Kernel { name, f });
        self
    }
    const fn tile(mut self, name: &'static str, f: Tile) -> Row {
        self.tile = Some(Kernel { name, f });
        self
    }
    const fn split(mut self, name: &'static str, f: super::SplitFp4) -> Row {
        self.split = Some(Kernel { name, f });
        self
    }
}

/// The kernels that serve one type at one level ([`kernels`]).
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// The type.
    pub dtype: DType,
    /// The level resolved for.
    pub level: CpuLevel,
    /// One row · one column (the scalar reference where no level brings one).
    pub dot: Kernel<DotFn>,
    /// Several rows · one column.
    pub rows: Option<Kernel<super::RowsDotFn>>,
    /// One row · several columns.
    pub multi: Option<Kernel<super::MultiDotFn>>,
    /// The prompt-chunk GEMM.
    pub tile: Option<Kernel<Tile>>,
    /// The kernels of rows in the official FP4 layout (MXFP4 only).
    pub split: Option<Kernel<super::SplitFp4>>,
}

impl Kernels {
    /// True when the dot column is a SIMD kernel, not the scalar reference.
    pub fn has_simd(&self) -> bool {
        self.dot.name != SCALAR
    }
}

/// The name of the scalar references.
pub const SCALAR: &str = "scalar";

/// The kernels of `dtype` at `level` (each column from the highest row that `level`
/// [includes](CpuLevel::includes) and that has it); `None` for a type without a dot product
/// (activation and index types).
/// `level` is capped at [`CpuLevel::detect`]: a kernel is never handed out to a CPU that
/// cannot run it.
pub fn kernels(dtype: DType, level: CpuLevel) -> Option<Kernels> {
    let level = level.min(CpuLevel::detect());
    let reference = dtype.info().vec_dot?;
    let mut k = Kernels {
        dtype,
        level,
        dot: Kernel {
            name: SCALAR,
            f: reference,
        },
        rows: None,
        multi: None,
        tile: None,
        split: None,
    };
    for r in table()
        .iter()
        .filter(|r| r.dtype == dtype && level.includes(r.level))
    {
        k.dot = r.dot.unwrap_or(k.dot);
        k.rows = r.rows.or(k.rows);
        k.multi = r.multi.or(k.multi);
        k.tile = r.tile.or(k.tile);
        k.split = r.split.or(k.split);
    }
    Some(k)
}

/// True when `repacked`'s kernels at `level` do every job `raw`'s do there: a SIMD dot, and a
/// rows, multi and tile kernel wherever `raw` has one. A load-time repack is worth making only
/// then: a repacked type without a multi-column kernel, say, would run a prompt chunk's
/// experts one dot per token.
pub fn covers(repacked: DType, raw: DType, level: CpuLevel) -> bool {
    let (Some(x), Some(r)) = (kernels(repacked, level), kernels(raw, level)) else {
        return false;
    };
    x.has_simd()
        && (r.rows.is_none() || x.rows.is_some())
        && (r.multi.is_none() || x.multi.is_some())
        && (r.tile.is_none() || x.tile.is_some())
}

/// Every row of the table, each type's rows lowest level first. Private: its functions may
/// only be called at the levels this CPU has ([`kernels`] and [`column`] check).
fn table() -> &'static [Row] {
    #[cfg(target_arch = "x86_64")]
    {
        X86
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        &[]
    }
}

#[cfg(target_arch = "x86_64")]
use super::{
    float::avx2 as f2, float::avx512 as f5, float::f8, float::f8_avx512, iq::avx2 as i2,
    iq::avx512 as i5, kquants::avx2 as k2, kquants::avx2_multi as k2m, kquants::avx512 as k5,
    kquants::q6_k, q8::avx2 as q2, q8::mxfp4 as m5, q8::q2_0, q8::q2_0_avx2 as q2r, q8::q8_0,
};
#[cfg(target_arch = "x86_64")]
use CpuLevel::{Amx, Avx2, Avx2Vnni, Avx512, Avx512Bf16, Avx512Vnni};

/// The group GEMM of a grid type ([`iq_group`]): the tile of its layout — IQ2_XXS's (eight
/// scale groups, ×0.125 at the end), IQ1_S's (eight, ×0.125 per block) or IQ1_M's (sixteen
/// halves, ×0.125 per block) — with AVX-VNNI (`vnni`) or AVX-512 VNNI, that layout's scale
/// groups, and `expand` (rows of `dtype` or its repacked form → a group). One place ties
/// each tile to the layout its panels and groups are sized for.
#[cfg(target_arch = "x86_64")]
const fn grid_group(dtype: DType, vnni: bool, expand: iq_group::GroupExpandFn) -> GridGroup {
    use iq_group::x86 as g;
    let (tile, scales): (iq_group::GroupTileFn, usize) = match (dtype, vnni) {
        (DType::IQ2_XXS | DType::IQ2_XXS_X, false) => (g::tile_entry, iq_group::SCALES_32),
        (DType::IQ2_XXS | DType::IQ2_XXS_X, true) => (g::tile_avx_vnni_entry, iq_group::SCALES_32),
        (DType::IQ1_S | DType::IQ1_S_X, false) => (g::tile_iq1s_entry, iq_group::SCALES_32),
        (DType::IQ1_S | DType::IQ1_S_X, true) => (g::tile_iq1s_avx_vnni_entry, iq_group::SCALES_32),
        (DType::IQ1_M | DType::IQ1_M_X, false) => (g::tile_iq1m_entry, iq_group::SCALES_16),
        (DType::IQ1_M | DType::IQ1_M_X, true) => (g::tile_iq1m_avx_vnni_entry, iq_group::SCALES_16),
        _ => panic!("no group tile for this type"),
    };
    GridGroup {
        tile,
        expand,
        scales,
    }
}

/// The grid tile of `dtype` (four-row expander `expand`) at the VNNI level, or with AMX:
/// the four-row tile, the group tile and, where `amx`, the AMX tile.
#[cfg(target_arch = "x86_64")]
const fn grid(dtype: DType, expand: tile_grid::ExpandFn, amx: bool) -> Tile {
    let (tile, kind): (tile_grid::TileFn, tile_amx::GridKind) = match dtype {
        DType::IQ2_XXS | DType::IQ2_XXS_X => {
            (tile_grid::x86::tile_iq2_xxs_entry, tile_amx::GridKind::Iq2)
        }
        _ => (tile_grid::x86::tile_iq1_s_entry, tile_amx::GridKind::Iq1),
    };
    let direct: Option<tile_amx::AmxExpandFn> = match dtype {
        DType::IQ2_XXS_X => Some(tile_amx::x86::expand_direct_entry::<true>),
        DType::IQ1_S_X => Some(tile_amx::x86::expand_direct_entry::<false>),
        _ => None,
    };
    let amx = if amx {
        Some(AmxTile {
            tile: match kind {
                tile_amx::GridKind::Iq2 => tile_amx::x86::tile_entry::<false>,
                tile_amx::GridKind::Iq1 => tile_amx::x86::tile_entry::<true>,
            },
            kind,
            split: tile_amx::x86::split_entry,
            direct,
        })
    } else {
        None
    };
    let group = match dtype {
        DType::IQ2_XXS => iq_group::x86::expand_iq2_xxs_entry,
        DType::IQ2_XXS_X => iq_group::x86::expand_iq2_xxs_x_entry,
        DType::IQ1_S => iq_group::x86::expand_iq1_s_entry,
        DType::IQ1_S_X => iq_group::x86::expand_iq1_s_x_entry,
        _ => panic!("no grid tile for this type"),
    };
    let group = grid_group(dtype, false, group);
    Tile::Grid {
        tile,
        expand,
        group,
        amx,
    }
}

/// The x86 table. Each type's rows lowest level first.
#[cfg(target_arch = "x86_64")]
static X86: &[Row] = &[
    // float types: f32 accumulation, within the reordering bound of `avx2_float`
    Row::new(DType::F32, Avx2)
        .dot("avx2", f2::dot_f32_avx2_entry)
        .rows("avx2", f2::dot_f32_avx2_rows_entry),
    Row::new(DType::F32, Avx512)
        .dot("avx512", f5::dot_f32_avx512_entry)
        .rows("avx512", f5::dot_f32_avx512_rows_entry)
        .tile("avx512", Tile::Float(tile_float::x86::tile_f32_entry)),
    Row::new(DType::F16, Avx2)
        .dot("avx2", f2::dot_f16_avx2_entry)
        .rows("avx2", f2::dot_f16_avx2_rows_entry)
        .tile("avx2", Tile::Float(tile_float::avx2::tile_f16_entry)),
    Row::new(DType::F16, Avx512)
        .dot("avx512", f5::dot_f16_avx512_entry)
        .rows("avx512", f5::dot_f16_avx512_rows_entry)
        .tile("avx512", Tile::Float(tile_float::x86::tile_f16_entry)),
    Row::new(DType::BF16, Avx2)
        .dot("avx2", f2::dot_bf16_avx2_entry)
        .rows("avx2", f2::dot_bf16_avx2_rows_entry)
        .tile("avx2", Tile::Float(tile_float::avx2::tile_bf16_entry)),
    Row::new(DType::BF16, Avx512)
        .dot("avx512", f5::dot_bf16_avx512_entry)
        .rows("avx512", f5::dot_bf16_avx512_rows_entry)
        .tile("avx512", Tile::Float(tile_float::x86::tile_bf16_entry)),
    Row::new(DType::BF16, Avx512Bf16).tile(
        "avx512-bf16",
        Tile::Float(tile_float::x86::tile_bf16_dp_entry),
    ),
    // FP8 E4M3 · F32 (the checkpoint's block-scaled dense weights, in place). Tile: MUL_MAT expands a chunk's rows to exact f32 (codes times
    // their tile scales) and runs the f32 tile on them
    Row::new(DType::F8_E4M3, Avx2)
        .dot("avx2", f8::dot_f8_avx2_entry)
        .rows("avx2", f8::dot_f8_avx2_rows_entry)
        .multi("avx2", f8::dot_f8_avx2_multi_entry)
        .tile("avx2-f32", Tile::Float(tile_float::avx2::tile_f32_entry)),
    Row::new(DType::F8_E4M3, Avx512)
        .dot("avx512", f8_avx512::dot_f8_avx512_entry)
        .rows("avx512", f8_avx512::dot_f8_avx512_rows_entry)
        .multi("avx512", f8_avx512::dot_f8_avx512_multi_entry)
        .tile("avx512-f32", Tile::Float(tile_float::x86::tile_f32_entry)),
    // · Q8_0 activations
    Row::new(DType::Q8_0, Avx2)
        .dot("avx2", q2::dot_q8_0_avx2_entry)
        .rows("avx2", q2::dot_q8_0_avx2_rows_entry)
        .multi("avx2", q2::dot_q8_0_avx2_multi_entry)
        .tile(
            "avx2",
            Tile::Q8Group {
                tile: tile_x16::x86::tile_avx2_entry,
                expand: tile_x16::x86::expand_avx2_entry,
            },
        ),
    Row::new(DType::Q8_0, Avx2Vnni).tile(
        "avx2-vnni",
        Tile::Q8Group {
            tile: tile_x16::x86::tile_avx_vnni_entry,
            expand: tile_x16::x86::expand_avx2_entry,
        },
    ),
    Row::new(DType::Q8_0, Avx512Vnni)
        .rows("avx512", q8_0::dot_q8_0_avx512_rows_entry)
        .multi("avx512", q8_0::dot_q8_0_avx512_multi_entry)
        .tile(
            "avx512",
            Tile::Q8Group {
                tile: tile_x16::x86::tile_entry,
                expand: tile_x16::x86::expand_avx512_entry,
            },
        ),
    Row::new(DType::Q2_0, Avx2)
        .dot("avx2", q2::dot_q2_0_avx2_entry)
        .rows("avx2", q2r::dot_q2_0_avx2_rows_entry)
        .tile(
            "avx2",
            Tile::Panel(super::q8::tile_q2_avx2::x86::tile_entry),
        ),
    Row::new(DType::Q2_0, Avx2Vnni)
        .rows("avx2-vnni", q2r::dot_q2_0_avx_vnni_rows_entry)
        .tile(
            "avx2-vnni",
            Tile::Panel(super::q8::tile_q2_avx2::x86::tile_avx_vnni_entry),
        ),
    Row::new(DType::Q2_0, Avx512Vnni)
        .dot("avx512", q2_0::dot_q2_0_avx512_entry)
        .rows("avx512", q2_0::dot_q2_0_avx512_rows_entry)
        .multi("avx512", q2_0::dot_q2_0_avx512_multi_entry)
        .tile(
            "avx512",
            Tile::Panel(super::q8::tile_q2::x86::tile_entry::<false>),
        ),
    Row::new(DType::Q2_0_X, Avx512Vnni)
        .dot("avx512", q2_0::dot_q2_0_x_avx512_entry)
        .rows("avx512", q2_0::dot_q2_0_x_avx512_rows_entry)
        .multi("avx512", q2_0::dot_q2_0_x_avx512_multi_entry)
        .tile(
            "avx512",
            Tile::Panel(super::q8::tile_q2::x86::tile_entry::<true>),
        ),
    Row::new(DType::MXFP4, Avx2)
        .dot("avx2", q2::dot_mxfp4_avx2_entry)
        .rows("avx2", q2::dot_mxfp4_avx2_rows_entry)
        .multi("avx2", q2::dot_mxfp4_avx2_multi_entry)
        .split(
            "avx2",
            super::SplitFp4 {
                rows: q2::dot_fp4_split_avx2_rows_entry,
                multi: q2::dot_fp4_split_avx2_multi_entry,
            },
        ),
    Row::new(DType::MXFP4, Avx512Vnni)
        .rows("avx512", m5::dot_mxfp4_avx512_rows_entry)
        .multi("avx512", m5::dot_mxfp4_avx512_multi_entry)
        .split(
            "avx512",
            super::SplitFp4 {
                rows: m5::dot_fp4_split_avx512_rows_entry,
                multi: m5::dot_fp4_split_avx512_multi_entry,
            },
        ),
    // K-quants · Q8_K
    Row::new(DType::Q4_K, Avx2)
        .dot("avx2", k2::dot_q4_k_avx2_entry)
        .rows("avx2", k2::dot_q4_k_avx2_rows_entry)
        .multi("avx2", k2m::dot_q4_k_avx2_multi_entry),
    Row::new(DType::Q4_K, Avx512Vnni)
        .dot("avx512", k5::dot_q4_k_avx512_entry)
        .rows("avx512", k5::dot_q4_k_avx512_rows_entry)
        .multi("avx512", k5::dot_q4_k_avx512_multi_entry),
    Row::new(DType::Q5_K, Avx2)
        .dot("avx2", k2::dot_q5_k_avx2_entry)
        .rows("avx2", k2::dot_q5_k_avx2_rows_entry)
        .multi("avx2", k2m::dot_q5_k_avx2_multi_entry),
    Row::new(DType::Q5_K, Avx512Vnni)
        .dot("avx512", k5::dot_q5_k_avx512_entry)
        .rows("avx512", k5::dot_q5_k_avx512_rows_entry)
        .multi("avx512", k5::dot_q5_k_avx512_multi_entry),
    Row::new(DType::Q6_K, Avx2)
        .dot("avx2", k2::dot_q6_k_avx2_entry)
        .rows("avx2", k2::dot_q6_k_avx2_rows_entry)
        .multi("avx2", k2m::dot_q6_k_avx2_multi_entry),
    Row::new(DType::Q6_K, Avx512Vnni)
        .dot("avx512", q6_k::dot_q6_k_avx512_entry)
        .rows("avx512", q6_k::dot_q6_k_avx512_rows_entry)
        .multi("avx512", q6_k::dot_q6_k_avx512_multi_entry),
    // grid types · Q8_K
    Row::new(DType::IQ2_XXS, Avx2)
        .dot("avx2", i2::dot_iq2_xxs_avx2_entry)
        .multi("avx2", i2::dot_iq2_xxs_avx2_multi_entry),
    Row::new(DType::IQ2_XXS, Avx2Vnni).tile(
        "avx2-vnni",
        Tile::GridGroup(grid_group(
            DType::IQ2_XXS,
            true,
            iq_group::x86::expand_iq2_xxs_avx2_entry,
        )),
    ),
    Row::new(DType::IQ2_XXS, Avx512Vnni)
        .dot("avx512", i5::dot_iq2_xxs_avx512_entry)
        .rows("avx512-pairs", i5::dot_iq2_xxs_avx512_pairs_entry)
        .multi("avx512", i5::dot_iq2_xxs_avx512_multi_entry)
        .tile(
            "avx512",
            grid(DType::IQ2_XXS, tile_grid::x86::expand_iq2_xxs_entry, false),
        ),
    Row::new(DType::IQ2_XXS, Amx).tile(
        "amx",
        grid(DType::IQ2_XXS, tile_grid::x86::expand_iq2_xxs_entry, true),
    ),
    Row::new(DType::IQ2_XXS_X, Avx2)
        .dot("avx2", i2::dot_iq2_xxs_x_avx2_entry)
        .rows("avx2", i2::dot_iq2_xxs_x_avx2_rows_entry)
        .multi("avx2", i2::dot_iq2_xxs_x_avx2_multi_entry),
    Row::new(DType::IQ2_XXS_X, Avx2Vnni).tile(
        "avx2-vnni",
        Tile::GridGroup(grid_group(
            DType::IQ2_XXS_X,
            true,
            iq_group::x86::expand_iq2_xxs_x_avx2_entry,
        )),
    ),
    Row::new(DType::IQ2_XXS_X, Avx512Vnni)
        .dot("avx512", i5::dot_iq2_xxs_x_avx512_entry)
        .rows("avx512", i5::dot_iq2_xxs_x_avx512_rows_entry)
        .multi("avx512", i5::dot_iq2_xxs_x_avx512_multi_entry)
        .tile(
            "avx512",
            grid(
                DType::IQ2_XXS_X,
                tile_grid::x86::expand_iq2_xxs_x_entry,
                false,
            ),
        ),
    Row::new(DType::IQ2_XXS_X, Amx).tile(
        "amx",
        grid(
            DType::IQ2_XXS_X,
            tile_grid::x86::expand_iq2_xxs_x_entry,
            true,
        ),
    ),
    Row::new(DType::IQ1_S, Avx2)
        .dot("avx2", i2::dot_iq1_s_avx2_entry)
        .rows("avx2", i2::dot_iq1_s_avx2_rows_entry)
        .multi("avx2", i2::dot_iq1_s_avx2_multi_entry),
    Row::new(DType::IQ1_S, Avx2Vnni).tile(
        "avx2-vnni",
        Tile::GridGroup(grid_group(
            DType::IQ1_S,
            true,
            iq_group::x86::expand_iq1_s_entry,
        )),
    ),
    Row::new(DType::IQ1_S, Avx512Vnni)
        .dot("avx512", i5::dot_iq1_s_avx512_entry)
        .rows("avx512-prepared", i5::dot_iq1_s_avx512_prepared_entry)
        .multi("avx512", i5::dot_iq1_s_avx512_multi_entry)
        .tile(
            "avx512",
            grid(DType::IQ1_S, tile_grid::x86::expand_iq1_s_entry, false),
        ),
    Row::new(DType::IQ1_S, Amx).tile(
        "amx",
        grid(DType::IQ1_S, tile_grid::x86::expand_iq1_s_entry, true),
    ),
    Row::new(DType::IQ1_S_X, Avx2)
        .dot("avx2", i2::dot_iq1_s_x_avx2_entry)
        .rows("avx2", i2::dot_iq1_s_x_avx2_rows_entry)
        .multi("avx2", i2::dot_iq1_s_x_avx2_multi_entry),
    Row::new(DType::IQ1_S_X, Avx2Vnni).tile(
        "avx2-vnni",
        Tile::GridGroup(grid_group(
            DType::IQ1_S_X,
            true,
            iq_group::x86::expand_iq1_s_x_entry,
        )),
    ),
    Row::new(DType::IQ1_S_X, Avx512Vnni)
        .dot("avx512", i5::dot_iq1_s_x_avx512_entry)
        .rows("avx512", i5::dot_iq1_s_x_avx512_rows_entry)
        .multi("avx512", i5::dot_iq1_s_x_avx512_multi_entry)
        .tile(
            "avx512",
            grid(DType::IQ1_S_X, tile_grid::x86::expand_iq1_s_x_entry, false),
        ),
    Row::new(DType::IQ1_S_X, Amx).tile(
        "amx",
        grid(DType::IQ1_S_X, tile_grid::x86::expand_iq1_s_x_entry, true),
    ),
    Row::new(DType::IQ1_M, Avx2)
        .dot("avx2", i2::dot_iq1_m_avx2_entry)
        .rows("avx2", i2::dot_iq1_m_avx2_rows_entry)
        .multi("avx2", i2::dot_iq1_m_avx2_multi_entry),
    Row::new(DType::IQ1_M, Avx2Vnni).tile(
        "avx2-vnni",
        Tile::GridGroup(grid_group(
            DType::IQ1_M,
            true,
            iq_group::x86::expand_iq1_m_entry,
        )),
    ),
    Row::new(DType::IQ1_M, Avx512Vnni)
        .dot("avx512", i5::dot_iq1_m_avx512_entry)
        .rows("avx512-prepared", i5::dot_iq1_m_avx512_prepared_entry)
        .multi("avx512", i5::dot_iq1_m_avx512_multi_entry)
        .tile(
            "avx512",
            Tile::GridGroup(grid_group(
                DType::IQ1_M,
                false,
                iq_group::x86::expand_iq1_m_entry,
            )),
        ),
    Row::new(DType::IQ1_M_X, Avx2)
        .dot("avx2", i2::dot_iq1_m_x_avx2_entry)
        .rows("avx2", i2::dot_iq1_m_x_avx2_rows_entry)
        .multi("avx2", i2::dot_iq1_m_x_avx2_multi_entry),
    Row::new(DType::IQ1_M_X, Avx2Vnni).tile(
        "avx2-vnni",
        Tile::GridGroup(grid_group(
            DType::IQ1_M_X,
            true,
            iq_group::x86::expand_iq1_m_x_entry,
        )),
    ),
    Row::new(DType::IQ1_M_X, Avx512Vnni)
        .dot("avx512", i5::dot_iq1_m_x_avx512_entry)
        .rows("avx512", i5::dot_iq1_m_x_avx512_rows_entry)
        .multi("avx512", i5::dot_iq1_m_x_avx512_multi_entry)
        .tile(
            "avx512",
            Tile::GridGroup(grid_group(
                DType::IQ1_M_X,
                false,
                iq_group::x86::expand_iq1_m_x_entry,
            )),
        ),
];

/// The kernels of one column for `dtype` at the levels up to `level` (capped at
/// [`CpuLevel::detect`]), lowest level first, the scalar reference not included: what a test
/// must check on a CPU at `level`.
pub fn column<F: Copy>(
    dtype: DType,
    level: CpuLevel,
    col: impl Fn(&Row) -> Option<Kernel<F>>,
) -> Vec<(CpuLevel, Kernel<F>)> {
    let level = level.min(CpuLevel::detect());
    table()
        .iter()
        .filter(|r| r.dtype == dtype && level.includes(r.level))
        .filter_map(|r| col(r).map(|k| (r.level, k)))
        .collect()
}

/// A column of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Column {
    /// One row · one column.
    Dot,
    /// Several rows · one column.
    Rows,
    /// One row · several columns.
    Multi,
    /// The prompt-chunk GEMM.
    Tile,
    /// The kernels of rows in the official FP4 layout.
    Split,
}

impl Column {
    /// Every column.
    pub const ALL: [Column; 5] = [
        Column::Dot,
        Column::Rows,
        Column::Multi,
        Column::Tile,
        Column::Split,
    ];

    /// The column's name (`dot`, `rows`, `multi`, `tile`, `split`).
    pub fn name(self) -> &'static str {
        match self {
            Column::Dot => "dot",
            Column::Rows => "rows",
            Column::Multi => "multi",
            Column::Tile => "tile",
            Column::Split => "split",
        }
    }
}

/// One kernel of the table by name, without its function: for counting, listing and
/// documenting the table whatever the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The weight type.
    pub dtype: DType,
    /// The level that brings it.
    pub level: CpuLevel,
    /// Its column.
    pub column: Column,
    /// Its name.
    pub name: &'static str,
}

/// Every kernel of the table, whatever this CPU runs, in table order.
pub fn inventory() -> Vec<Entry> {
    let mut v = Vec::new();
    for r in table() {
        let names = [
            r.dot.map(|k| k.name),
            r.rows.map(|k| k.name),
            r.multi.map(|k| k.name),
            r.tile.map(|k| k.name),
            r.split.map(|k| k.name),
        ];
        for (column, name) in Column::ALL.into_iter().zip(names) {
            if let Some(name) = name {
                v.push(Entry {
                    dtype: r.dtype,
                    level: r.level,
                    column,
                    name,
                });
            }
        }
    }
    v
}
