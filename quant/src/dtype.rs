//! The ggml type table: every GGUF tensor type id 0…42 with its name, block geometry and,
//! where fathom supports it, its reference codecs and dot product.
//!
//! This is the single place that knows about all types (ANCHORS §8.4): adding a type is one row
//! in `type_table!` plus its block module. Retired ids (4, 5, 31–33, 36–38) are not variants;
//! [`DType::from_gguf_id`] reports them as [`QuantError::RetiredTypeId`]. The table also holds
//! fathom's load-time repacked types (ids from [`DType::FIRST_INTERNAL_ID`]), which no file can
//! name.

use crate::error::QuantError;
use crate::{codec, dot};

/// Dequantize `src` (whole blocks) into `dst` (`dst.len()` = elements). Lengths are checked by
/// the caller ([`crate::dequantize_row`]).
pub type DequantFn = fn(src: &[u8], dst: &mut [f32]);
/// Quantize `src` (a multiple of the block size) into whole blocks in `dst`.
pub type QuantizeFn = fn(src: &[f32], dst: &mut [u8]);
/// Dot product of a weight row (`w`, whole blocks) with an activation row already converted to
/// the weight's dot type (`a`), over `n` elements.
pub type DotFn = fn(n: usize, w: &[u8], a: &[u8]) -> f32;

/// One row of the type table.
#[derive(Debug)]
pub struct TypeInfo {
    /// ggml / GGUF name, e.g. `"q4_K"` (ggml spelling) — see [`DType::name`] for the upper-case one.
    pub name: &'static str,
    /// Stable GGUF type id.
    pub id: u32,
    /// Elements per block.
    pub block_size: usize,
    /// Bytes per block.
    pub type_size: usize,
    /// The activation type this weight type's dot product consumes (`None`: no dot product).
    pub dot_type: Option<DType>,
    /// Reference dequantizer, bit-exact with ggml's `to_float`.
    pub dequantize: Option<DequantFn>,
    /// Reference quantizer without importance matrix (storage rounding), bit-exact with
    /// `ggml_quantize_chunk`.
    pub quantize: Option<QuantizeFn>,
    /// Activation quantizer used on the CPU path when this type is a dot type (x86 rounding for
    /// Q8_0), bit-exact with ggml-cpu's `from_float`.
    pub quantize_activation: Option<QuantizeFn>,
    /// Reference dot product with an activation row of type `dot_type`.
    pub vec_dot: Option<DotFn>,
}

macro_rules! type_table {
    ($( $var:ident = $id:literal, $name:literal, $blk:literal, $bytes:literal,
        dot: $dot:expr, deq: $deq:expr, q: $q:expr, qa: $qa:expr, vd: $vd:expr; )*) => {
        /// A ggml tensor element type, identified by its stable GGUF id.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum DType { $(
            #[doc = concat!("ggml `", $name, "` (GGUF id ", stringify!($id), ")")]
            $var = $id,
        )* }

        impl DType {
            /// Every supported-or-known type, in id order.
            pub const ALL: &'static [DType] = &[$(DType::$var),*];

            /// The table row of this type.
            pub fn info(self) -> &'static TypeInfo {
                match self { $( DType::$var => {
                    static INFO: TypeInfo = TypeInfo {
                        name: $name, id: $id, block_size: $blk, type_size: $bytes,
                        dot_type: $dot, dequantize: $deq, quantize: $q,
                        quantize_activation: $qa, vec_dot: $vd,
                    };
                    &INFO
                } )* }
            }

            /// Upper-case conventional name (`"Q4_K"`, `"IQ2_XXS"`, `"BF16"`).
            pub fn name(self) -> &'static str {
                match self { $( DType::$var => stringify!($var), )* }
            }

            /// Look a type up by GGUF id. Retired and unknown ids are typed errors, and so
            /// are fathom's internal ids (≥ [`DType::FIRST_INTERNAL_ID`]): no file holds them.
            pub fn from_gguf_id(id: u32) -> Result<DType, QuantError> {
                match id {
                    id if id >= DType::FIRST_INTERNAL_ID => Err(QuantError::UnknownTypeId(id)),
                    $( $id => Ok(DType::$var), )*
                    4 | 5 | 31 | 32 | 33 | 36 | 37 | 38 => Err(QuantError::RetiredTypeId(id)),
                    _ => Err(QuantError::UnknownTypeId(id)),
                }
            }
        }
    };
}

const Q8_0: Option<DType> = Some(DType::Q8_0);
const Q8_K: Option<DType> = Some(DType::Q8_K);

type_table! {
    F32 = 0, "f32", 1, 4, dot: Some(DType::F32),
        deq: Some(codec::float::dequant_f32), q: Some(codec::float::quant_f32),
        qa: Some(codec::float::quant_f32), vd: Some(dot::dot_f32);
    F16 = 1, "f16", 1, 2, dot: Some(DType::F16),
        deq: Some(codec::float::dequant_f16), q: Some(codec::float::quant_f16),
        qa: Some(codec::float::quant_f16), vd: Some(dot::dot_f16);
    Q4_0 = 2, "q4_0", 32, 18, dot: Q8_0,
        deq: Some(codec::legacy::dequant_q4_0), q: None, qa: None, vd: Some(dot::dot_q4_0);
    Q4_1 = 3, "q4_1", 32, 20, dot: Some(DType::Q8_1),
        deq: Some(codec::legacy::dequant_q4_1), q: None, qa: None, vd: Some(dot::dot_q4_1);
    Q5_0 = 6, "q5_0", 32, 22, dot: Q8_0,
        deq: Some(codec::legacy::dequant_q5_0), q: None, qa: None, vd: Some(dot::dot_q5_0);
    Q5_1 = 7, "q5_1", 32, 24, dot: Some(DType::Q8_1),
        deq: Some(codec::legacy::dequant_q5_1), q: None, qa: None, vd: Some(dot::dot_q5_1);
    Q8_0 = 8, "q8_0", 32, 34, dot: Q8_0,
        deq: Some(codec::q8::dequant_q8_0), q: Some(codec::q8::quant_q8_0_ref),
        qa: Some(codec::q8::quant_q8_0_x86), vd: Some(dot::dot_q8_0);
    Q8_1 = 9, "q8_1", 32, 36, dot: None,
        deq: Some(codec::legacy::dequant_q8_1), q: None,
        qa: Some(codec::legacy::quant_q8_1_x86), vd: None;
    Q2_K = 10, "q2_K", 256, 84, dot: Q8_K,
        deq: Some(codec::kquants::dequant_q2_k), q: None, qa: None, vd: Some(dot::dot_q2_k);
    Q3_K = 11, "q3_K", 256, 110, dot: Q8_K, deq: None, q: None, qa: None, vd: None;
    Q4_K = 12, "q4_K", 256, 144, dot: Q8_K,
        deq: Some(codec::kquants::dequant_q4_k), q: Some(codec::kquants::quant_q4_k),
        qa: None, vd: Some(dot::dot_q4_k);
    Q5_K = 13, "q5_K", 256, 176, dot: Q8_K,
        deq: Some(codec::kquants::dequant_q5_k), q: Some(codec::kquants::quant_q5_k),
        qa: None, vd: Some(dot::dot_q5_k);
    Q6_K = 14, "q6_K", 256, 210, dot: Q8_K,
        deq: Some(codec::kquants::dequant_q6_k), q: Some(codec::kquants::quant_q6_k),
        qa: None, vd: Some(dot::dot_q6_k);
    Q8_K = 15, "q8_K", 256, 292, dot: None,
        deq: Some(codec::q8::dequant_q8_k), q: Some(codec::q8::quant_q8_k),
        qa: Some(codec::q8::quant_q8_k), vd: None;
    IQ2_XXS = 16, "iq2_xxs", 256, 66, dot: Q8_K,
        deq: Some(codec::iquants::dequant_iq2_xxs), q: None, qa: None, vd: Some(dot::dot_iq2_xxs);
    IQ2_XS = 17, "iq2_xs", 256, 74, dot: Q8_K,
        deq: Some(codec::iquants::dequant_iq2_xs), q: None, qa: None, vd: Some(dot::dot_iq2_xs);
    IQ3_XXS = 18, "iq3_xxs", 256, 98, dot: Q8_K, deq: None, q: None, qa: None, vd: None;
    IQ1_S = 19, "iq1_s", 256, 50, dot: Q8_K,
        deq: Some(codec::iquants::dequant_iq1_s), q: None, qa: None, vd: Some(dot::dot_iq1_s);
    IQ4_NL = 20, "iq4_nl", 32, 18, dot: Q8_0,
        deq: Some(codec::legacy::dequant_iq4_nl), q: None, qa: None, vd: Some(dot::dot_iq4_nl);
    IQ3_S = 21, "iq3_s", 256, 110, dot: Q8_K, deq: None, q: None, qa: None, vd: None;
    IQ2_S = 22, "iq2_s", 256, 82, dot: Q8_K, deq: None, q: None, qa: None, vd: None;
    IQ4_XS = 23, "iq4_xs", 256, 136, dot: Q8_K,
        deq: Some(codec::iquants::dequant_iq4_xs), q: None, qa: None, vd: Some(dot::dot_iq4_xs);
    I8 = 24, "i8", 1, 1, dot: None, deq: None, q: None, qa: None, vd: None;
    I16 = 25, "i16", 1, 2, dot: None, deq: None, q: None, qa: None, vd: None;
    I32 = 26, "i32", 1, 4, dot: None, deq: None, q: None, qa: None, vd: None;
    I64 = 27, "i64", 1, 8, dot: None, deq: None, q: None, qa: None, vd: None;
    F64 = 28, "f64", 1, 8, dot: None, deq: None, q: None, qa: None, vd: None;
    IQ1_M = 29, "iq1_m", 256, 56, dot: Q8_K,
        deq: Some(codec::iquants::dequant_iq1_m), q: None, qa: None, vd: Some(dot::dot_iq1_m);
    BF16 = 30, "bf16", 1, 2, dot: Some(DType::BF16),
        deq: Some(codec::float::dequant_bf16), q: Some(codec::float::quant_bf16),
        qa: Some(codec::float::quant_bf16), vd: Some(dot::dot_bf16);
    TQ1_0 = 34, "tq1_0", 256, 54, dot: Q8_K, deq: None, q: None, qa: None, vd: None;
    TQ2_0 = 35, "tq2_0", 256, 66, dot: Q8_K, deq: None, q: None, qa: None, vd: None;
    MXFP4 = 39, "mxfp4", 32, 17, dot: Q8_0,
        deq: Some(codec::fp4::dequant_mxfp4), q: Some(codec::fp4::quant_mxfp4),
        qa: None, vd: Some(dot::dot_mxfp4);
    NVFP4 = 40, "nvfp4", 64, 36, dot: Q8_0, deq: None, q: None, qa: None, vd: None;
    Q1_0 = 41, "q1_0", 128, 18, dot: Q8_0,
        deq: Some(codec::lowbit::dequant_q1_0), q: Some(codec::lowbit::quant_q1_0),
        qa: None, vd: Some(dot::dot_q1_0);
    Q2_0 = 42, "q2_0", 64, 18, dot: Q8_0,
        deq: Some(codec::lowbit::dequant_q2_0), q: Some(codec::lowbit::quant_q2_0),
        qa: None, vd: Some(dot::dot_q2_0);
    IQ1_S_X = 1019, "iq1_s_x", 256, 70, dot: Q8_K,
        deq: Some(codec::repack::dequant_iq1_s_x), q: None, qa: None,
        vd: Some(dot::dot_iq1_s_x);
    IQ2_XXS_X = 1020, "iq2_xxs_x", 256, 102, dot: Q8_K,
        deq: Some(codec::repack::dequant_iq2_xxs_x), q: None, qa: None,
        vd: Some(dot::dot_iq2_xxs_x);
    IQ1_M_X = 1021, "iq1_m_x", 256, 76, dot: Q8_K,
        deq: Some(codec::repack::dequant_iq1_m_x), q: None, qa: None,
        vd: Some(dot::dot_iq1_m_x);
    Q2_0_X = 1022, "q2_0_x", 512, 144, dot: Q8_0,
        deq: Some(codec::repack::dequant_q2_0_x), q: None, qa: None,
        vd: Some(dot::dot_q2_0_x);
    F8_E4M3 = 1030, "f8_e4m3", 1, 1, dot: Some(DType::F32),
        deq: Some(codec::float::dequant_e4m3), q: Some(codec::float::quant_e4m3), qa: None,
        vd: Some(dot::dot_f8_e4m3);
}

impl DType {
    /// The first id of fathom's internal types (load-time repacked layouts such as
    /// [`DType::IQ1_S_X`], see [`crate::codec::repack`]): never read from or written to a file.
    pub const FIRST_INTERNAL_ID: u32 = 1000;

    /// `true` for the types a GGUF file can hold (every type but the internal ones).
    pub fn is_gguf(self) -> bool {
        self.gguf_id() < Self::FIRST_INTERNAL_ID
    }

    /// Stable GGUF type id (for an internal type, its fathom id).
    pub fn gguf_id(self) -> u32 {
        self as u32
    }
    /// Elements per block.
    pub fn block_size(self) -> usize {
        self.info().block_size
    }
    /// Bytes per block.
    pub fn type_size(self) -> usize {
        self.info().type_size
    }
    /// `true` for block-quantized types (block size > 1).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }
    /// Case-insensitive lookup by name (`"q4_k"`, `"Q4_K"`, `"iq2_xxs"`).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }
    /// Bytes of a row of `n` elements, checked: `n` must be a multiple of the block size and
    /// the result must not overflow.
    pub fn row_bytes(self, n: u64) -> Result<u64, QuantError> {
        let bs = self.block_size() as u64;
        if !n.is_multiple_of(bs) {
            return Err(QuantError::RowNotMultiple {
                dtype: self,
                n,
                block: bs as usize,
            });
        }
        (n / bs)
            .checked_mul(self.type_size() as u64)
            .ok_or(QuantError::Overflow)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
