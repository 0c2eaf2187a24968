//! A NaN anywhere in a model (a damaged weight block, a NaN norm weight, one token's
//! embedding) is reported as an error naming the position, in every evaluation mode, instead
//! of coming out as finite, wrong logits (the 8-bit activation quantizers map NaN to 0).

use fathom_models::gguf::{GgufFile, GgufWriter};
use fathom_models::model::{open_gguf, LoadOptions};
use fathom_models::session::{Mode, Session, SessionError};
use std::sync::Arc;

fn fixture() -> GgufFile {
    GgufFile::open(format!(
        "{}/tests/fixtures/dsv4-tiny-Q2_0.gguf",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// The fixture with `edit(bytes)` applied to tensor `name`.
fn damaged(name: &str, edit: impl Fn(&mut [u8])) -> Session {
    let src = fixture();
    let mut w = GgufWriter::new();
    for (k, v) in src.metadata() {
        w.add_kv(k.clone(), v.clone()).unwrap();
    }
    for t in src.tensors() {
        let mut data = src.tensor_bytes(t).unwrap().to_vec();
        if t.name == name {
            edit(&mut data);
        }
        w.add_tensor(t.name.clone(), t.dtype, &t.ne, data).unwrap();
    }
    let f = Arc::new(GgufFile::parse(w.to_bytes().unwrap()).unwrap());
    let m = open_gguf(f, &LoadOptions::default()).unwrap();
    Session::new(m, Default::default(), 64).unwrap()
}

const NAN_F16: [u8; 2] = 0x7E00u16.to_le_bytes();

fn nonfinite_at(r: Result<Vec<f32>, SessionError>) -> usize {
    match r {
        Err(SessionError::NonFinite { position, .. }) => position,
        Err(e) => panic!("other error: {e}"),
        Ok(l) => panic!("accepted: {} logits, first {}", l.len(), l[0]),
    }
}

#[test]
fn a_nan_attention_weight_is_reported_not_passed_on() {
    // every Q2_0 block (18 bytes, f16 scale first) of layer 3's q projection: all-NaN
    // attention rows, which an ordinary max turns into zeros
    for mode in [Mode::Cached, Mode::Recompute] {
        let mut s = damaged("blk.3.attn_q_a.weight", |b| {
            for blk in b.chunks_exact_mut(18) {
                blk[..2].copy_from_slice(&NAN_F16);
            }
        });
        s.set_mode(mode);
        let e = s.prefill(&[0, 5, 9, 300]).unwrap_err();
        assert!(
            e.to_string().contains("non-finite") && e.to_string().contains("position 3"),
            "{e}"
        );
        assert_eq!(s.n_past(), 0, "the sequence is reset");
    }
}

#[test]
fn one_damaged_embedding_row_is_reported_at_its_position() {
    // token 77's Q4_K embedding row (one 144-byte block) gets a NaN scale: prompts without
    // it are fine; the step that feeds it fails naming its position, in prefill and decode
    let mut s = damaged("token_embd.weight", |b| {
        b[77 * 144..77 * 144 + 2].copy_from_slice(&NAN_F16)
    });
    let ok = s.prefill(&[0, 5, 9]).unwrap();
    assert!(ok.iter().all(|v| v.is_finite()));
    assert_eq!(nonfinite_at(s.decode(77)), 3);
    // with every position's logits, the first bad position is the one named
    let mut s2 = damaged("token_embd.weight", |b| {
        b[77 * 144..77 * 144 + 2].copy_from_slice(&NAN_F16)
    });
    let mut seen = Vec::new();
    let e = s2
        .eval_all(&[0, 5, 77, 9, 12], 2, |p, _| seen.push(p))
        .unwrap_err();
    assert!(
        matches!(
            e,
            SessionError::NonFinite {
                position: 2,
                first: 2,
                last: 3
            }
        ),
        "{e}"
    );
    assert_eq!(seen, vec![0]);
    let b = s2.eval_batch(&[0, 77, 5], false).unwrap_err();
    assert!(
        matches!(b, SessionError::NonFinite { position: 1, .. }),
        "{b}"
    );
}

#[test]
fn a_damaged_expert_block_is_reported() {
    // every Q4_0 block of layer 3's shared expert down projection (18 bytes, f16 scale first)
    let mut s = damaged("blk.3.ffn_down_shexp.weight", |b| {
        for blk in b.chunks_exact_mut(18).skip(5).step_by(97) {
            blk[..2].copy_from_slice(&NAN_F16);
        }
    });
    assert_eq!(nonfinite_at(s.prefill(&[1, 2, 3, 4, 5, 6])), 5);
}

#[test]
fn small_float_tables_are_checked_at_open() {
    // a norm, a router bias, an attention sink: refused at open, naming the tensor
    for (name, at, v) in [
        ("blk.3.attn_norm.weight", 17usize, f32::NAN),
        ("blk.4.exp_probs_b.bias", 3, f32::INFINITY),
        ("blk.2.attn_sinks.weight", 0, f32::NEG_INFINITY),
    ] {
        let src = fixture();
        let mut w = GgufWriter::new();
        for (k, val) in src.metadata() {
            w.add_kv(k.clone(), val.clone()).unwrap();
        }
        for t in src.tensors() {
            let mut data = src.tensor_bytes(t).unwrap().to_vec();
            if t.name == name {
                data[4 * at..4 * at + 4].copy_from_slice(&v.to_le_bytes());
            }
            w.add_tensor(t.name.clone(), t.dtype, &t.ne, data).unwrap();
        }
        let f = Arc::new(GgufFile::parse(w.to_bytes().unwrap()).unwrap());
        let e = match open_gguf(f, &LoadOptions::default()) {
            Ok(_) => panic!("{name} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(name) && e.contains(&format!("element {at} is not a finite number")),
            "{e}"
        );
    }
}
