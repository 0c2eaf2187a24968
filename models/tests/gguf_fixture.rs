//! The real llama.cpp-written fixture (`tests/fixtures/dsv4-tiny-Q2_0.gguf`, see the README
//! there): it opens, its metadata and tensors are what llama.cpp wrote, every tensor view has
//! its computed size, and it round-trips byte for byte through the writer (also as a split set).

mod gguf_support;

use std::path::PathBuf;

use fathom_models::gguf::{GgufFile, GgufWriter};
use quant::DType;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dsv4-tiny-Q2_0.gguf")
}

#[test]
fn opens_with_expected_contents() {
    let f = GgufFile::open(fixture()).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.alignment(), 32);
    assert_eq!(f.data_offset(), 24928);
    assert_eq!(f.shards().len(), 1);
    assert_eq!(f.metadata().len(), 57);
    assert_eq!(f.tensors().len(), 178);

    assert_eq!(f.get_str("general.architecture").unwrap(), "deepseek4");
    assert_eq!(f.get_u32("deepseek4.block_count").unwrap(), 6);
    assert_eq!(f.get_u32("deepseek4.embedding_length").unwrap(), 256);
    assert_eq!(f.get_u32("deepseek4.expert_count").unwrap(), 16);
    assert_eq!(f.get_f32("deepseek4.expert_weights_scale").unwrap(), 1.5);
    assert!(f.get_bool("deepseek4.expert_weights_norm").unwrap());
    assert_eq!(
        f.get_i32_array("deepseek4.attention.compress_ratios")
            .unwrap(),
        [0, 4, 128, 4, 128, 0]
    );
    assert_eq!(
        f.get_f32_array("deepseek4.swiglu_clamp_exp").unwrap(),
        [2.5; 6]
    );
    let tokens = f.get_str_array("tokenizer.ggml.tokens").unwrap();
    assert_eq!(tokens.len(), 512);
    assert_eq!(tokens[0], "<｜begin▁of▁sentence｜>");
    assert_eq!(f.get_str_array("tokenizer.ggml.merges").unwrap().len(), 254);
    assert_eq!(
        f.get_i32_array("tokenizer.ggml.token_type").unwrap().len(),
        512
    );
    assert_eq!(f.get_str("tokenizer.ggml.model").unwrap(), "gpt2");

    let t = f.tensor("output.weight").unwrap();
    assert_eq!(
        (t.dtype, t.ne.as_slice(), t.offset),
        (DType::Q6_K, &[256u64, 512][..], 0)
    );
    assert_eq!(t.n_bytes, 512 * 210);
    let t = f.tensor("token_embd.weight").unwrap();
    assert_eq!(
        (t.dtype, t.ne.as_slice()),
        (DType::Q4_K, &[256u64, 512][..])
    );
    let t = f.tensor("blk.0.ffn_gate_exps.weight").unwrap();
    assert_eq!(
        (t.dtype, t.ne.as_slice()),
        (DType::Q2_0, &[256u64, 32, 16][..])
    );
    let t = f.tensor("blk.0.ffn_down_exps.weight").unwrap();
    assert_eq!(
        (t.dtype, t.ne.as_slice()),
        (DType::Q4_0, &[32u64, 256, 16][..])
    );
    let t = f.tensor("blk.0.ffn_gate_tid2eid.weight").unwrap();
    assert_eq!((t.dtype, t.ne.as_slice()), (DType::I32, &[6u64, 512][..]));
    let last = f.tensors().last().unwrap();
    assert_eq!(last.name, "blk.5.hc_ffn_scale.weight");
    assert_eq!((last.offset, last.n_bytes), (1891872, 12));

    // Every view has the size computed from dtype and shape.
    for t in f.tensors() {
        let rows: u64 = t.ne[1..].iter().product();
        let expect = t.dtype.row_bytes(t.ne[0]).unwrap() * rows;
        assert_eq!(t.n_bytes, expect, "{}", t.name);
        assert_eq!(
            f.tensor_data(&t.name).unwrap().len() as u64,
            expect,
            "{}",
            t.name
        );
        assert_eq!(t.shard, 0);
    }
    // Views are zero-copy: they point into the map.
    let whole = f.shards()[0].bytes();
    let view = f.tensor_data("output_norm.weight").unwrap();
    let start = view.as_ptr() as usize - whole.as_ptr() as usize;
    assert_eq!(
        start as u64,
        f.data_offset() + f.tensor("output_norm.weight").unwrap().offset
    );
}

#[test]
fn round_trips_byte_for_byte() {
    let original = std::fs::read(fixture()).unwrap();
    let f = GgufFile::open(fixture()).unwrap();
    let bytes = GgufWriter::from_file(&f).unwrap().to_bytes().unwrap();
    assert_eq!(bytes.len(), original.len());
    assert!(bytes == original, "re-written fixture differs");
    let g = GgufFile::parse(bytes).unwrap();
    assert_eq!(g.metadata(), f.metadata());
    assert_eq!(g.tensors(), f.tensors());
}

#[test]
fn round_trips_through_split() {
    let dir = gguf_support::temp_dir("gguf_fixture_split");
    let f = GgufFile::open(fixture()).unwrap();
    let paths = GgufWriter::from_file(&f)
        .unwrap()
        .write_split(dir.join("dsv4-tiny"), 3)
        .unwrap();
    assert_eq!(paths.len(), 3);
    let s = GgufFile::open(&paths[1]).unwrap();
    assert_eq!(s.shards().len(), 3);
    assert_eq!(s.tensors().len(), 178);
    for t in f.tensors() {
        let u = s.tensor(&t.name).unwrap();
        assert_eq!((u.dtype, &u.ne), (t.dtype, &t.ne));
        assert_eq!(
            s.tensor_data(&t.name).unwrap(),
            f.tensor_data(&t.name).unwrap()
        );
    }
    // Joined again: the original file, byte for byte.
    let joined = GgufWriter::from_file(&s).unwrap().to_bytes().unwrap();
    assert!(joined == std::fs::read(fixture()).unwrap());
}
