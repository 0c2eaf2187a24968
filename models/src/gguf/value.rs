//! GGUF metadata values: the thirteen on-disk value types ([`ValueType`]), scalar and string
//! values ([`Value`]) and typed arrays ([`Array`], nested arrays included).
//!
//! Arrays are stored typed (`Array::F32(Vec<f32>)`, `Array::Str(Vec<String>)`, ...) so a
//! consumer that expects `f32` scores gets `None` from [`Array::as_f32`] on an `i8` array
//! instead of reinterpreting bytes (the llama.cpp vocab type-confusion class, see
//! `shared/spec/hostile-inputs.md` §1.1). The reader only builds an array after checking that
//! the file holds at least `count × min_encoded_size` bytes, so memory stays proportional to
//! the file size: at worst about 3× the metadata bytes (an 8-byte empty string becomes a
//! 24-byte `String`, a 12-byte empty nested array a 32-byte `Array`).

use std::fmt;

/// A GGUF metadata value type, with its stable on-disk id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum ValueType {
    /// `uint8` (id 0).
    U8 = 0,
    /// `int8` (id 1).
    I8 = 1,
    /// `uint16` (id 2).
    U16 = 2,
    /// `int16` (id 3).
    I16 = 3,
    /// `uint32` (id 4).
    U32 = 4,
    /// `int32` (id 5).
    I32 = 5,
    /// `float32` (id 6).
    F32 = 6,
    /// `bool`, one byte that must be 0 or 1 (id 7).
    Bool = 7,
    /// `string`: u64 length + UTF-8 bytes (id 8).
    Str = 8,
    /// `array`: u32 element type + u64 count + elements (id 9).
    Array = 9,
    /// `uint64` (id 10).
    U64 = 10,
    /// `int64` (id 11).
    I64 = 11,
    /// `float64` (id 12).
    F64 = 12,
}

impl ValueType {
    /// Every value type, in id order.
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::Str,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    /// Look a type up by its on-disk id; `None` for ids ≥ 13.
    pub fn from_id(id: u32) -> Option<ValueType> {
        usize::try_from(id)
            .ok()
            .and_then(|i| ValueType::ALL.get(i))
            .copied()
    }

    /// The on-disk id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Lower-case name used in error messages (`"u32"`, `"string"`, `"array"`).
    pub fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::Str => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }

    /// Width in bytes of a fixed-size type; `None` for strings and arrays.
    pub fn fixed_size(self) -> Option<u64> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::Str | ValueType::Array => None,
        }
    }

    /// The fewest bytes one value of this type can occupy on disk: the fixed width, 8 for a
    /// string (its length prefix) and 12 for an array (element type + count).
    pub fn min_encoded_size(self) -> u64 {
        match self {
            ValueType::Str => 8,
            ValueType::Array => 12,
            other => other.fixed_size().unwrap_or(1),
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `uint8`.
    U8(u8),
    /// `int8`.
    I8(i8),
    /// `uint16`.
    U16(u16),
    /// `int16`.
    I16(i16),
    /// `uint32`.
    U32(u32),
    /// `int32`.
    I32(i32),
    /// `float32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// UTF-8 string.
    Str(String),
    /// Typed array (possibly of arrays).
    Array(Array),
    /// `uint64`.
    U64(u64),
    /// `int64`.
    I64(i64),
    /// `float64`.
    F64(f64),
}

impl Value {
    /// The on-disk type of this value.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::Str(_) => ValueType::Str,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// Any integer value that is non-negative, widened to `u64` (lenient accessor for keys
    /// whose integer width varies between writers).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer value that fits in `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => i64::try_from(v).ok(),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => None,
        }
    }

    /// A `f32` or `f64` value, widened to `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The boolean, if this is a `bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if this is an array.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Strings longer than this are cut in `Display` output (error messages stay short).
const DISPLAY_STR_MAX: usize = 48;

impl fmt::Display for Value {
    /// Short human form used in error messages: `u32 32`, `string "abc"`, `array<f32>[6]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U8(v) => write!(f, "u8 {v}"),
            Value::I8(v) => write!(f, "i8 {v}"),
            Value::U16(v) => write!(f, "u16 {v}"),
            Value::I16(v) => write!(f, "i16 {v}"),
            Value::U32(v) => write!(f, "u32 {v}"),
            Value::I32(v) => write!(f, "i32 {v}"),
            Value::F32(v) => write!(f, "f32 {v}"),
            Value::Bool(v) => write!(f, "bool {v}"),
            Value::U64(v) => write!(f, "u64 {v}"),
            Value::I64(v) => write!(f, "i64 {v}"),
            Value::F64(v) => write!(f, "f64 {v}"),
            Value::Str(s) => {
                let cut: String = s.chars().take(DISPLAY_STR_MAX).collect();
                let more = if cut.len() < s.len() { "..." } else { "" };
                write!(f, "string {cut:?}{more}")
            }
            Value::Array(a) => write!(f, "{a}"),
        }
    }
}

/// A typed metadata array. Element type `array` holds nested arrays, each with its own
/// element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// `uint8` elements.
    U8(Vec<u8>),
    /// `int8` elements.
    I8(Vec<i8>),
    /// `uint16` elements.
    U16(Vec<u16>),
    /// `int16` elements.
    I16(Vec<i16>),
    /// `uint32` elements.
    U32(Vec<u32>),
    /// `int32` elements.
    I32(Vec<i32>),
    /// `float32` elements.
    F32(Vec<f32>),
    /// `bool` elements.
    Bool(Vec<bool>),
    /// String elements.
    Str(Vec<String>),
    /// Nested arrays.
    Nested(Vec<Array>),
    /// `uint64` elements.
    U64(Vec<u64>),
    /// `int64` elements.
    I64(Vec<i64>),
    /// `float64` elements.
    F64(Vec<f64>),
}

macro_rules! array_accessors {
    ($( $fn:ident, $var:ident, $t:ty; )*) => {
        impl Array {
            $(
                #[doc = concat!("The elements, if this is an array of `", stringify!($t), "`.")]
                pub fn $fn(&self) -> Option<&[$t]> {
                    match self {
                        Array::$var(v) => Some(v),
                        _ => None,
                    }
                }
            )*
        }
    };
}

array_accessors! {
    as_u8, U8, u8;
    as_i8, I8, i8;
    as_u16, U16, u16;
    as_i16, I16, i16;
    as_u32, U32, u32;
    as_i32, I32, i32;
    as_f32, F32, f32;
    as_bool, Bool, bool;
    as_str, Str, String;
    as_nested, Nested, Array;
    as_u64, U64, u64;
    as_i64, I64, i64;
    as_f64, F64, f64;
}

impl Array {
    /// The element type.
    pub fn elem_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::Str(_) => ValueType::Str,
            Array::Nested(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::Str(v) => v.len(),
            Array::Nested(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F64(v) => v.len(),
        }
    }

    /// `true` when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Nesting depth: 1 for an array of scalars or strings, 1 + the deepest child for an
    /// array of arrays.
    pub fn depth(&self) -> usize {
        match self {
            Array::Nested(v) => 1 + v.iter().map(Array::depth).max().unwrap_or(0),
            _ => 1,
        }
    }
}

impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "array<{}>[{}]", self.elem_type(), self.len())
    }
}
