//! JSON written the way the chat template's `tojson` writes it.
//!
//! llama.cpp's Jinja engine (and transformers' `tojson`) writes JSON like Python's
//! `json.dumps(x, ensure_ascii=False)`: `", "` between items, `": "` between a key and its
//! value, keys in their given order, non-ASCII characters as they are. The model saw tool
//! schemas in exactly this layout during training, so the prompt must match it byte for byte.
//! (Floats with exponents differ: Python writes `1e-05`, this `1e-5`; schemas rarely hold
//! them.)

use serde::Serialize;
use serde_json::ser::{Formatter, Serializer};
use std::io::{self, Write};

/// A `serde_json` formatter with Python's default separators.
struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

/// `value` as Python's `json.dumps(value, ensure_ascii=False)` writes it.
pub fn dumps(value: &serde_json::Value) -> String {
    let mut out = Vec::new();
    let mut ser = Serializer::with_formatter(&mut out, PythonFormatter);
    // Writing a Value into a Vec cannot fail.
    if value.serialize(&mut ser).is_err() {
        return String::new();
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_layout() {
        let v = json!({"name": "get_weather", "parameters": {"type": "object",
            "properties": {"city": {"type": "string"}}, "required": ["city", "day"]},
            "n": 3, "x": 1.5, "ok": true, "none": null, "s": "héllo \"q\"\n"});
        assert_eq!(
            dumps(&v),
            "{\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \
             \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\", \"day\"]}, \
             \"n\": 3, \"x\": 1.5, \"ok\": true, \"none\": null, \"s\": \"héllo \\\"q\\\"\\n\"}"
        );
        assert_eq!(dumps(&json!([])), "[]");
        assert_eq!(dumps(&json!({})), "{}");
    }
}
