//! Element types of a safetensors header, and one tensor's validated header entry.

use std::fmt;

macro_rules! st_dtypes {
    ($( $var:ident = $s:literal, $bits:literal, $doc:literal; )*) => {
        /// A safetensors element type (the header's `dtype` string).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum StDtype { $( #[doc = $doc] $var, )* }

        impl StDtype {
            /// Every dtype, in order of element size.
            pub const ALL: &'static [StDtype] = &[$(StDtype::$var),*];

            /// The header spelling, e.g. `"F8_E4M3"`.
            pub fn name(self) -> &'static str {
                match self { $( StDtype::$var => $s, )* }
            }

            /// Bits per element (4 and 6 for the sub-byte MX types).
            pub fn bits(self) -> u32 {
                match self { $( StDtype::$var => $bits, )* }
            }

            /// Parse a header dtype string (exact, case-sensitive, as the format specifies).
            pub fn from_name(s: &str) -> Option<StDtype> {
                match s { $( $s => Some(StDtype::$var), )* _ => None }
            }
        }
    };
}

st_dtypes! {
    BOOL = "BOOL", 8, "Boolean, one byte.";
    F4 = "F4", 4, "MX FP4 (e2m1), two per byte.";
    F6_E2M3 = "F6_E2M3", 6, "MX FP6 e2m3.";
    F6_E3M2 = "F6_E3M2", 6, "MX FP6 e3m2.";
    U8 = "U8", 8, "Unsigned 8-bit integer.";
    I8 = "I8", 8, "Signed 8-bit integer (DeepSeek stores packed FP4 codes as I8).";
    F8_E5M2 = "F8_E5M2", 8, "FP8 e5m2.";
    F8_E4M3 = "F8_E4M3", 8, "FP8 e4m3fn (DeepSeek dense weights).";
    F8_E8M0 = "F8_E8M0", 8, "E8M0 power-of-two scale (DeepSeek weight scales).";
    F8_E4M3FNUZ = "F8_E4M3FNUZ", 8, "FP8 e4m3 FNUZ.";
    F8_E5M2FNUZ = "F8_E5M2FNUZ", 8, "FP8 e5m2 FNUZ.";
    I16 = "I16", 16, "Signed 16-bit integer.";
    U16 = "U16", 16, "Unsigned 16-bit integer.";
    F16 = "F16", 16, "IEEE half precision.";
    BF16 = "BF16", 16, "bfloat16.";
    I32 = "I32", 32, "Signed 32-bit integer.";
    U32 = "U32", 32, "Unsigned 32-bit integer.";
    F32 = "F32", 32, "IEEE single precision.";
    C64 = "C64", 64, "Complex with two f32 parts.";
    F64 = "F64", 64, "IEEE double precision.";
    I64 = "I64", 64, "Signed 64-bit integer.";
    U64 = "U64", 64, "Unsigned 64-bit integer.";
}

impl StDtype {
    /// The ggml type with the same element encoding, where there is one.
    pub fn ggml(self) -> Option<quant::DType> {
        Some(match self {
            StDtype::F32 => quant::DType::F32,
            StDtype::F16 => quant::DType::F16,
            StDtype::BF16 => quant::DType::BF16,
            StDtype::F64 => quant::DType::F64,
            StDtype::I8 => quant::DType::I8,
            StDtype::I16 => quant::DType::I16,
            StDtype::I32 => quant::DType::I32,
            StDtype::I64 => quant::DType::I64,
            _ => return None,
        })
    }

    /// Bytes needed for `n_elements` elements; `None` on overflow or when the sub-byte total is
    /// not a whole number of bytes.
    pub fn byte_len(self, n_elements: u64) -> Option<u64> {
        let bits = n_elements.checked_mul(u64::from(self.bits()))?;
        (bits % 8 == 0).then_some(bits / 8)
    }
}

impl fmt::Display for StDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tensor's dtype as read from the header: known, or a string fathom does not understand.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TensorDtype {
    /// A dtype fathom knows.
    Known(StDtype),
    /// An unknown dtype string; the tensor is listed but its data cannot be accessed.
    Unknown(String),
}

impl TensorDtype {
    /// The dtype, if known.
    pub fn known(&self) -> Option<StDtype> {
        match self {
            TensorDtype::Known(d) => Some(*d),
            TensorDtype::Unknown(_) => None,
        }
    }

    /// The header spelling.
    pub fn as_str(&self) -> &str {
        match self {
            TensorDtype::Known(d) => d.name(),
            TensorDtype::Unknown(s) => s,
        }
    }
}

impl fmt::Display for TensorDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tensor of a safetensors file (or of a sharded checkpoint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name.
    pub name: String,
    /// Element type.
    pub dtype: TensorDtype,
    /// Shape as stored (row-major, outermost first).
    pub shape: Vec<u64>,
    /// `[begin, end)` relative to the start of the data buffer, as in the header.
    pub data_offsets: (u64, u64),
    /// Absolute byte offset of the data in its file.
    pub file_offset: u64,
    /// Index of the shard holding it ([`super::SafetensorsModel::shards`]); 0 for a lone file.
    pub shard: usize,
}

impl TensorInfo {
    /// Byte length of the data.
    pub fn byte_len(&self) -> u64 {
        self.data_offsets.1 - self.data_offsets.0
    }

    /// Number of elements (`None` on overflow).
    pub fn n_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }

    /// Why the data cannot be accessed, if it cannot (unknown dtype).
    pub fn unsupported_reason(&self) -> Option<String> {
        match &self.dtype {
            TensorDtype::Known(_) => None,
            TensorDtype::Unknown(s) => Some(format!("unsupported dtype `{s}`")),
        }
    }
}
