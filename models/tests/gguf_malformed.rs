//! Malformed-file corpus: each case is a few hundred hand-built bytes (after
//! `shared/spec/hostile-inputs.md` §1 and §8, and llama.cpp's test-gguf.cpp scenarios). Every
//! case asserts the error variant and that the message names the offending field, key or
//! tensor; none may panic.

mod gguf_support;

use fathom_models::gguf::{GgufError, GgufFile};
use gguf_support::*;

/// A file with one tensor info of the given shape/type/offset and `data` bytes of data.
fn one_tensor(ne: &[u64], ty: u32, offset: u64, data: usize) -> Vec<u8> {
    Raw::header(3, 1, 0)
        .tensor("w", ne, ty, offset)
        .pad(32)
        .fill(data, 0xAB)
        .0
}

// ---- header ----------------------------------------------------------------------------

#[test]
fn empty_file() {
    let e = parse_err(b"");
    assert!(matches!(e, GgufError::Truncated { offset: 0, .. }), "{e}");
    assert_msg(&e, &["<memory>", "header (magic)", "offset 0"]);
}

#[test]
fn only_magic() {
    // CVE-2024-39720 (Ollama): a 4-byte file "GGUF".
    let e = parse_err(b"GGUF");
    assert!(matches!(e, GgufError::Truncated { offset: 4, .. }), "{e}");
    assert_msg(&e, &["header (version)", "offset 4"]);
}

#[test]
fn wrong_magic() {
    let e = parse_err(&Raw::default().bytes(b"FUGG").u32(3).u64(0).u64(0).0);
    assert!(
        matches!(e, GgufError::BadMagic { found, .. } if &found == b"FUGG"),
        "{e}"
    );
    assert_msg(&e, &["bad magic", "not a GGUF file"]);
}

#[test]
fn version_0_1_4() {
    for v in [0u32, 1, 4] {
        let e = parse_err(&Raw::header(v, 0, 0).0);
        assert!(
            matches!(e, GgufError::UnsupportedVersion { version, .. } if version == v),
            "{e}"
        );
        assert_msg(&e, &[&format!("version {v}"), "supported: 2 and 3"]);
    }
    assert_msg(&parse_err(&Raw::header(1, 0, 0).0), &["v1"]);
}

#[test]
fn big_endian() {
    let e = parse_err(&Raw::default().bytes(b"GGUF").bytes(&3u32.to_be_bytes()).0);
    assert!(
        matches!(
            e,
            GgufError::BigEndian {
                version: 0x0300_0000,
                ..
            }
        ),
        "{e}"
    );
    assert_msg(&e, &["big-endian GGUF not supported", "0x03000000"]);
}

#[test]
fn truncated_counts() {
    let bytes = Raw::header(3, 0, 0).0;
    let e = parse_err(&bytes[..12]);
    assert!(matches!(e, GgufError::Truncated { offset: 8, .. }), "{e}");
    assert_msg(&e, &["tensor count"]);
    let e = parse_err(&bytes[..20]);
    assert!(matches!(e, GgufError::Truncated { offset: 16, .. }), "{e}");
    assert_msg(&e, &["key-value count"]);
}

#[test]
fn huge_tensor_count() {
    // CVE-2024-21836: n_tensors = 2^60 in a tiny file.
    let e = parse_err(&Raw::header(3, 1 << 60, 0).fill(1000, 0).0);
    assert!(matches!(e, GgufError::CountTooLarge { count, offset: 8, .. } if count == 1 << 60));
    assert_msg(&e, &["tensor count 1152921504606846976", "offset 8"]);
}

#[test]
fn huge_kv_count() {
    // CVE-2024-23605 / ferrox: n_kv = 2^60, and n_kv = -1.
    for n in [1u64 << 60, u64::MAX, 500_000_000] {
        let e = parse_err(&Raw::header(3, 0, n).fill(1000, 0).0);
        assert!(matches!(e, GgufError::CountTooLarge { count, offset: 16, .. } if count == n));
        assert_msg(&e, &["metadata key-value count", &n.to_string()]);
    }
}

// ---- key-value pairs -------------------------------------------------------------------

#[test]
fn key_length_max() {
    // CVE-2024-23496: key length u64::MAX (length + 1 wraps in C).
    let e = parse_err(&Raw::header(3, 0, 1).u64(u64::MAX).fill(20, b'a').0);
    assert!(matches!(
        e,
        GgufError::StringTooLong {
            len: u64::MAX,
            offset: 24,
            ..
        }
    ));
    assert_msg(&e, &["key of kv #0", "offset 24"]);
}

#[test]
fn key_truncated() {
    // The key's length prefix cut short, then the key's bytes cut short.
    // A cut inside the 8-byte length prefix leaves < 14 bytes: the kv count check fires.
    let full = Raw::header(3, 0, 1).kv_u32("general.x", 1).0;
    let e = parse_err(&full[..28]);
    assert!(
        matches!(
            e,
            GgufError::CountTooLarge {
                count: 1,
                max: 0,
                ..
            }
        ),
        "{e}"
    );
    assert_msg(&e, &["metadata key-value count 1"]);
    let bytes = Raw::header(3, 0, 1).u64(40).bytes(b"general.").fill(6, 0).0;
    let e = parse_err(&bytes);
    assert!(matches!(e, GgufError::StringTooLong { len: 40, .. }), "{e}");
    assert_msg(&e, &["key of kv #0"]);
}

#[test]
fn empty_key() {
    let e = parse_err(&Raw::header(3, 0, 1).key("", T_U32).u32(1).0);
    assert!(matches!(e, GgufError::InvalidKey { index: 0, .. }), "{e}");
    assert_msg(&e, &["key of kv #0", "empty key"]);
}

#[test]
fn non_ascii_key() {
    let bytes = Raw::header(3, 0, 2)
        .kv_u32("ok", 1)
        .str(b"bad\xffkey")
        .u32(T_U32)
        .u32(1)
        .0;
    let e = parse_err(&bytes);
    assert!(matches!(e, GgufError::InvalidKey { index: 1, .. }), "{e}");
    assert_msg(&e, &["kv #1", "not ASCII", "0xff"]);
}

#[test]
fn value_type_truncated() {
    let bytes = Raw::header(3, 0, 1).str(b"a.b.c").fill(2, 0).0;
    let e = parse_err(&bytes);
    assert!(matches!(
        e,
        GgufError::Truncated {
            offset: 37,
            needed: 4,
            remaining: 2,
            ..
        }
    ));
    assert_msg(&e, &["value type of key 'a.b.c'", "offset 37"]);
}

#[test]
fn value_truncated() {
    let full = Raw::header(3, 0, 1).key("a.u64", 10).u64(7).0;
    let e = parse_err(&full[..full.len() - 3]);
    assert!(matches!(e, GgufError::Truncated { needed: 8, .. }), "{e}");
    assert_msg(&e, &["value of key 'a.u64'"]);
}

#[test]
fn unknown_value_type() {
    for ty in [13u32, u32::MAX] {
        let e = parse_err(&Raw::header(3, 0, 1).key("k.x", ty).u32(0).0);
        assert!(
            matches!(e, GgufError::UnknownValueType { type_id, offset: 35, .. } if type_id == ty),
            "{e}"
        );
        assert_msg(&e, &["key 'k.x'", &format!("value type {ty}")]);
    }
}

#[test]
fn invalid_bool() {
    let e = parse_err(&Raw::header(3, 0, 1).key("b", T_BOOL).u8(2).fill(8, 0).0);
    assert!(matches!(e, GgufError::InvalidBool { byte: 2, .. }), "{e}");
    assert_msg(&e, &["key 'b'", "invalid bool byte 0x02"]);
}

#[test]
fn duplicate_key() {
    let bytes = Raw::header(3, 0, 3)
        .kv_u32("a", 1)
        .kv_str("general.name", "x")
        .kv_str("general.name", "y")
        .0;
    let e = parse_err(&bytes);
    assert!(matches!(&e, GgufError::DuplicateKey { key, .. } if key == "general.name"));
    assert_msg(&e, &["duplicate key 'general.name'"]);
}

#[test]
fn huge_string_length() {
    // 2^63 string length; 2^40 in a 40-byte-ish file (Ollama CVE-2025-0315).
    for len in [1u64 << 63, 1 << 40, u64::MAX] {
        let e = parse_err(
            &Raw::header(3, 0, 1)
                .key("s", T_STR)
                .u64(len)
                .fill(16, b'x')
                .0,
        );
        assert!(
            matches!(e, GgufError::StringTooLong { len: l, .. } if l == len),
            "{e}"
        );
        assert_msg(&e, &["value of key 's'", &len.to_string()]);
    }
}

#[test]
fn invalid_utf8_string() {
    let e = parse_err(&Raw::header(3, 0, 1).key("s", T_STR).str(b"ok\xc3\x28").0);
    assert!(
        matches!(e, GgufError::InvalidUtf8 { offset: 47, .. }),
        "{e}"
    );
    assert_msg(&e, &["value of key 's'", "invalid UTF-8", "offset 47"]);
}

#[test]
fn huge_array_counts() {
    // 2^60 u8 elements; a string array of 2^61 (count × 8 wraps in C, CVE-2024-21825);
    // 2^63 nested arrays.
    for (ty, count) in [(T_U8, 1u64 << 60), (T_STR, 1 << 61), (T_ARRAY, 1 << 63)] {
        let bytes = Raw::header(3, 0, 1)
            .key("arr", T_ARRAY)
            .u32(ty)
            .u64(count)
            .fill(64, 0)
            .0;
        let e = parse_err(&bytes);
        assert!(
            matches!(e, GgufError::CountTooLarge { count: c, offset: 43, .. } if c == count),
            "{e}"
        );
        assert_msg(&e, &["array 'arr'", &count.to_string()]);
    }
}

#[test]
fn array_truncated() {
    // Four u32 elements declared, two present.
    let bytes = Raw::header(3, 0, 1)
        .key("a", T_ARRAY)
        .u32(T_U32)
        .u64(4)
        .u32(1)
        .u32(2)
        .0;
    let e = parse_err(&bytes);
    assert!(
        matches!(
            e,
            GgufError::CountTooLarge {
                count: 4,
                max: 2,
                ..
            }
        ),
        "{e}"
    );
    assert_msg(&e, &["array 'a' (u32)"]);
    // Two strings declared; the second's length prefix is cut.
    let bytes = Raw::header(3, 0, 1)
        .key("s", T_ARRAY)
        .u32(T_STR)
        .u64(2)
        .str(b"ab")
        .fill(6, 0)
        .0;
    let e = parse_err(&bytes);
    assert!(matches!(e, GgufError::Truncated { needed: 8, .. }), "{e}");
    assert_msg(&e, &["length of element 1 of array 's'"]);
}

#[test]
fn unknown_array_element_type() {
    let e = parse_err(&Raw::header(3, 0, 1).key("a", T_ARRAY).u32(99).u64(0).0);
    assert!(
        matches!(e, GgufError::UnknownValueType { type_id: 99, .. }),
        "{e}"
    );
    assert_msg(&e, &["key 'a'", "value type 99"]);
}

#[test]
fn nested_array_depth_bomb() {
    let mut r = Raw::header(3, 0, 1).key("deep", T_ARRAY);
    for _ in 0..10_000 {
        r = r.u32(T_ARRAY).u64(1);
    }
    let e = parse_err(&r.u32(T_U8).u64(0).0);
    assert!(
        matches!(e, GgufError::NestingTooDeep { max: 16, .. }),
        "{e}"
    );
    assert_msg(&e, &["key 'deep'", "nested deeper than 16"]);
}

// ---- general.alignment -------------------------------------------------------------------

#[test]
fn bad_alignment_values() {
    for a in [0u32, 3, 13, 0x8000_0000] {
        let e = parse_err(&Raw::header(3, 0, 1).kv_u32("general.alignment", a).0);
        assert!(
            matches!(e, GgufError::BadAlignment { offset: 24, .. }),
            "{e}"
        );
        assert_msg(
            &e,
            &["general.alignment", &format!("u32 {a}"), "power of two"],
        );
    }
}

#[test]
fn alignment_wrong_type() {
    // test-gguf KV_WRONG_TYPE_ALIGN: alignment stored as INT32.
    let e = parse_err(
        &Raw::header(3, 0, 1)
            .key("general.alignment", T_I32)
            .i32(32)
            .0,
    );
    assert!(matches!(e, GgufError::BadAlignment { .. }), "{e}");
    assert_msg(&e, &["general.alignment", "i32 32", "must be a u32"]);
}

// ---- tensor infos ------------------------------------------------------------------------

#[test]
fn tensor_info_truncated() {
    // A 30-byte name makes the info (70 bytes) larger than the 33-byte minimum the count check
    // assumes, so cuts inside it reach the field reads. Layout: name 24..62, n_dims 62..66,
    // ne[0] 66..74, ne[1] 74..82, type 82..86, offset 86..94.
    let name = "blk.0.attn_q.weight.aaaaaaaaaa";
    let full = Raw::header(3, 1, 0).tensor(name, &[4, 2], G_F32, 0).0;
    assert_eq!(full.len(), 94);
    let e = parse_err(&full[..60]);
    assert!(matches!(e, GgufError::StringTooLong { len: 30, .. }), "{e}");
    assert_msg(&e, &["name of tensor #0"]);
    for (cut, what) in [
        (64, "n_dims of tensor"),
        (69, "ne[0] of tensor"),
        (79, "ne[1] of tensor"),
        (84, "type of tensor"),
        (91, "data offset of tensor"),
    ] {
        let e = parse_err(&full[..cut]);
        assert!(matches!(e, GgufError::Truncated { .. }), "{e}");
        assert_msg(&e, &[what, name]);
    }
    // Too short for even one minimal tensor info: the count check fires first.
    let e = parse_err(&full[..50]);
    assert!(
        matches!(
            e,
            GgufError::CountTooLarge {
                count: 1,
                max: 0,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn tensor_name_too_long_or_empty() {
    let name = "n".repeat(64);
    let e = parse_err(&one_tensor_named(&name));
    assert!(
        matches!(e, GgufError::InvalidTensorName { index: 0, .. }),
        "{e}"
    );
    assert_msg(&e, &["tensor #0", "nnnnnnnn", "name length 64"]);
    let e = parse_err(&one_tensor_named(""));
    assert!(matches!(e, GgufError::InvalidTensorName { .. }), "{e}");
    assert_msg(&e, &["name length 0"]);
}

fn one_tensor_named(name: &str) -> Vec<u8> {
    Raw::header(3, 1, 0)
        .tensor(name, &[4], G_F32, 0)
        .pad(32)
        .fill(16, 0)
        .0
}

#[test]
fn tensor_name_invalid_utf8() {
    let bytes = Raw::header(3, 1, 0)
        .str(b"w\xfe")
        .u32(1)
        .u64(4)
        .u32(G_F32)
        .u64(0)
        .pad(32)
        .fill(16, 0)
        .0;
    let e = parse_err(&bytes);
    assert!(
        matches!(e, GgufError::InvalidUtf8 { offset: 33, .. }),
        "{e}"
    );
    assert_msg(&e, &["name of tensor #0", "invalid UTF-8"]);
}

#[test]
fn n_dims_out_of_range() {
    for nd in [0usize, 5] {
        let e = parse_err(&one_tensor(&vec![1; nd], G_F32, 0, 64));
        assert!(matches!(e, GgufError::BadDims { n_dims, .. } if n_dims as usize == nd));
        assert_msg(
            &e,
            &["tensor 'w'", &format!("n_dims {nd}"), "between 1 and 4"],
        );
    }
}

#[test]
fn negative_dimension() {
    let e = parse_err(&one_tensor(&[4, u64::MAX], G_F32, 0, 64));
    assert!(
        matches!(
            e,
            GgufError::BadDimension {
                dim: 1,
                value: u64::MAX,
                ..
            }
        ),
        "{e}"
    );
    assert_msg(&e, &["tensor 'w'", "ne[1]", "exceeds i64::MAX"]);
}

#[test]
fn element_count_overflow() {
    // CVE-2024-21802: ne = [2^32, 2^32]; and a product just above 2^63.
    for ne in [
        vec![1u64 << 32, 1 << 32],
        vec![1 << 62, 2, 1, 1],
        vec![1 << 40, 1 << 24],
    ] {
        let e = parse_err(&one_tensor(&ne, G_F32, 0, 64));
        assert!(
            matches!(
                e,
                GgufError::SizeOverflow {
                    what: "element count",
                    ..
                }
            ),
            "{e}"
        );
        assert_msg(&e, &["tensor 'w'", "element count", "overflows"]);
    }
}

#[test]
fn byte_size_overflow() {
    // test-gguf TENSORS_NBYTES_PAD_WRAP: nbytes = 2^64 - 16, padding would wrap to 0.
    let ne = [4, (1 << 30) - 1, (1 << 30) + 1, 1];
    let e = parse_err(&one_tensor(&ne, G_F32, 0, 64));
    assert!(
        matches!(
            e,
            GgufError::SizeOverflow {
                what: "byte size",
                ..
            }
        ),
        "{e}"
    );
    assert_msg(&e, &["tensor 'w'", "byte size"]);
}

#[test]
fn huge_quantized_tensor() {
    // CVE-2026-33298: Q4_0 with ne0 near 2^62; the size is exact and far past the file.
    let e = parse_err(&one_tensor(&[1 << 62], G_Q4_0, 0, 64));
    assert!(matches!(e, GgufError::TensorOutOfBounds { .. }), "{e}");
    assert_msg(&e, &["tensor 'w'", "extends past end of file"]);
}

#[test]
fn size_sum_overflow() {
    // CVE-2025-53630 (DATA_MEM_SIZE_OVERFLOW): two I8 tensors of 0x7FFF_FFFF_FFFF_FFC0 bytes.
    let n = 0x7FFF_FFFF_FFFF_FFC0;
    let bytes = Raw::header(3, 2, 0)
        .tensor("a", &[n], G_I8, 0)
        .tensor("b", &[n], G_I8, n)
        .pad(32)
        .fill(64, 0)
        .0;
    let e = parse_err(&bytes);
    assert!(matches!(e, GgufError::TensorOutOfBounds { .. }), "{e}");
    assert_msg(&e, &["tensor 'a'", "extends past end of file"]);
}

#[test]
fn row_not_multiple_of_block() {
    let e = parse_err(&one_tensor(&[33, 2], G_Q4_0, 0, 64));
    assert!(
        matches!(
            e,
            GgufError::BadRowSize {
                ne0: 33,
                block_size: 32,
                ..
            }
        ),
        "{e}"
    );
    assert_msg(&e, &["tensor 'w'", "ne[0] = 33", "Q4_0 block size 32"]);
}

#[test]
fn unknown_type_id() {
    for ty in [43u32, 1000, u32::MAX] {
        let e = parse_err(&one_tensor(&[4], ty, 0, 64));
        assert!(matches!(e, GgufError::BadTensorType { .. }), "{e}");
        assert_msg(&e, &["tensor 'w'", &format!("unknown ggml type id {ty}")]);
    }
}

#[test]
fn retired_type_id() {
    for ty in [4u32, 5, 31, 32, 33, 36, 37, 38] {
        let e = parse_err(&one_tensor(&[32], ty, 0, 64));
        assert!(matches!(e, GgufError::BadTensorType { .. }), "{e}");
        assert_msg(&e, &["tensor 'w'", &format!("retired ggml type id {ty}")]);
    }
}

#[test]
fn duplicate_tensor_name() {
    let bytes = Raw::header(3, 2, 0)
        .tensor("w", &[8], G_F32, 0)
        .tensor("w", &[8], G_F32, 32)
        .pad(32)
        .fill(64, 0)
        .0;
    let e = parse_err(&bytes);
    assert!(
        matches!(&e, GgufError::DuplicateTensor { name, .. } if name == "w"),
        "{e}"
    );
    assert_msg(&e, &["duplicate tensor name 'w'"]);
}

// ---- tensor data ranges ------------------------------------------------------------------

#[test]
fn misaligned_offset() {
    let e = parse_err(&one_tensor(&[4], G_F32, 16, 64));
    assert!(matches!(
        e,
        GgufError::MisalignedTensor {
            data_offset: 16,
            alignment: 32,
            ..
        }
    ));
    assert_msg(&e, &["tensor 'w'", "offset 16", "alignment 32"]);
    // test-gguf: offsets computed with alignment 1 while the file declares 32.
    let bytes = Raw::header(3, 2, 1)
        .kv_u32("general.alignment", 32)
        .tensor("a", &[1], G_I8, 0)
        .tensor("b", &[1], G_I8, 1)
        .pad(32)
        .fill(64, 0)
        .0;
    let e = parse_err(&bytes);
    assert!(
        matches!(&e, GgufError::MisalignedTensor { tensor, .. } if tensor == "b"),
        "{e}"
    );
}

#[test]
fn offset_past_eof() {
    // Bleeding Llama (CVE-2026-7482): offset 2^32 in a tiny file; and offset near u64::MAX.
    for off in [1u64 << 32, u64::MAX - 31] {
        let e = parse_err(&one_tensor(&[4], G_F32, off, 64));
        assert!(matches!(e, GgufError::TensorOutOfBounds { .. }), "{e}");
        assert_msg(&e, &["tensor 'w'", "extends past end of file", "bytes)"]);
    }
}

#[test]
fn data_one_byte_short() {
    let bytes = one_tensor(&[4, 4], G_F32, 0, 63);
    let e = parse_err(&bytes);
    let len = bytes.len();
    assert!(matches!(e, GgufError::TensorOutOfBounds { file_len, .. } if file_len == len as u64));
    // Header 24 + info (8+1+4+16+4+8 = 41) = 65, data starts at 96.
    assert_msg(
        &e,
        &["<memory>: tensor 'w': data [96, 160) extends past end of file (159 bytes)"],
    );
}

#[test]
fn overlapping_tensors() {
    for (off_b, size_a) in [(0u64, 16u64), (32, 16)] {
        let bytes = Raw::header(3, 2, 0)
            .tensor("a", &[size_a], G_F32, 0)
            .tensor("b", &[4], G_F32, off_b)
            .pad(32)
            .fill(128, 0)
            .0;
        let e = parse_err(&bytes);
        assert!(matches!(e, GgufError::TensorOverlap { .. }), "{e}");
        assert_msg(&e, &["tensor 'b'", "overlaps tensor 'a'"]);
    }
}

#[test]
fn data_section_start_past_eof() {
    // Tensor infos end at 57; the padding to 64 is missing entirely.
    let bytes = Raw::header(3, 1, 0).tensor("w", &[0], G_F32, 0).0;
    let e = parse_err(&bytes);
    assert!(
        matches!(
            e,
            GgufError::Truncated {
                offset: 57,
                needed: 7,
                ..
            }
        ),
        "{e}"
    );
    assert_msg(&e, &["padding before the data section"]);
}

// ---- accepted edge cases (must parse) ----------------------------------------------------

#[test]
fn accepted_edge_cases() {
    // Zero-size tensor, trailing bytes, alignment 1, version 2, no tensors at all.
    let f = GgufFile::parse(one_tensor(&[0, 5], G_F32, 0, 7)).unwrap();
    assert_eq!(f.tensor_data("w").unwrap().len(), 0);
    let f = GgufFile::parse(one_tensor(&[4], G_F32, 0, 100)).unwrap();
    assert_eq!(f.tensor_data("w").unwrap(), &[0xAB; 16]);
    let bytes = Raw::header(2, 2, 1)
        .kv_u32("general.alignment", 1)
        .tensor("a", &[3], G_I8, 0)
        .tensor("b", &[1], G_F32, 3)
        .fill(7, 1)
        .0;
    let f = GgufFile::parse(bytes).unwrap();
    assert_eq!((f.version(), f.alignment()), (2, 1));
    assert_eq!(f.tensor_data("b").unwrap().len(), 4);
    let f = GgufFile::parse(Raw::header(3, 0, 0).0).unwrap();
    assert!(f.tensors().is_empty() && f.metadata().is_empty());
    // Gaps between tensors and out-of-order offsets are allowed (only overlap is refused).
    let bytes = Raw::header(3, 2, 0)
        .tensor("a", &[4], G_F32, 64)
        .tensor("b", &[4], G_F32, 0)
        .pad(32)
        .fill(96, 0)
        .0;
    assert!(GgufFile::parse(bytes).is_ok());
}
