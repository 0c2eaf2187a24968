//! No input may panic: a valid file cut at every length must be refused, and a deterministic
//! byte-flip fuzz loop (fixed-seed xorshift) must only ever produce `Ok` or `Err`.

mod gguf_support;

use fathom_models::gguf::{GgufFile, GgufWriter};
use gguf_support::*;

#[test]
fn every_truncation_is_an_error() {
    // The sample's last tensor ends exactly at the end of the file, so every proper prefix
    // lacks some required byte.
    let bytes = sample_bytes();
    let full = GgufFile::parse(&bytes[..]).unwrap();
    let last = full.tensors().last().unwrap();
    assert_eq!(
        full.data_offset() + last.offset + last.n_bytes,
        bytes.len() as u64
    );
    for len in 0..bytes.len() {
        let r = GgufFile::parse(&bytes[..len]);
        assert!(r.is_err(), "prefix of {len} bytes was accepted");
    }
}

/// Parse, and when it parses, touch every tensor and re-write it (exercising the writer on
/// whatever the parser accepted).
fn exercise(bytes: &[u8]) -> bool {
    match GgufFile::parse(bytes) {
        Ok(f) => {
            for t in f.tensors() {
                let d = f
                    .tensor_bytes(t)
                    .expect("validated tensor must be readable");
                assert_eq!(d.len() as u64, t.n_bytes);
            }
            let w = GgufWriter::from_file(&f).expect("accepted file must be re-writable");
            let again = GgufFile::parse(w.to_bytes().unwrap()).expect("re-written file parses");
            assert_eq!(again.metadata().len(), f.metadata().len());
            true
        }
        Err(e) => {
            // Every message names the source.
            assert!(e.to_string().starts_with("<memory>: "), "{e}");
            false
        }
    }
}

#[test]
fn byte_flip_fuzz() {
    let base = sample_bytes();
    let header_end = {
        let f = GgufFile::parse(&base[..]).unwrap();
        f.data_offset() as usize
    };
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut accepted = 0;
    for _ in 0..3000 {
        let mut b = base.clone();
        let flips = 1 + (xorshift(&mut state) % 4) as usize;
        for _ in 0..flips {
            let r = xorshift(&mut state);
            // Mostly hit the header/metadata/infos, where the structure is.
            let pos = if r.is_multiple_of(8) {
                (r >> 8) as usize % b.len()
            } else {
                (r >> 8) as usize % header_end
            };
            let v = match (r >> 3) % 4 {
                0 => 0xFF,
                1 => 0x00,
                2 => b[pos] ^ (1 << ((r >> 5) % 8)),
                _ => (r >> 40) as u8,
            };
            b[pos] = v;
        }
        if exercise(&b) {
            accepted += 1;
        }
        // Also a random-length prefix of the mutated file.
        let cut = (xorshift(&mut state) as usize) % (b.len() + 1);
        exercise(&b[..cut]);
    }
    // Flips inside tensor data or string contents still parse; make sure the loop covered both.
    assert!(accepted > 0 && accepted < 3000, "accepted {accepted}");
}

#[test]
fn random_garbage_after_magic() {
    let mut state = 42u64;
    for len in 0..400usize {
        let mut b = b"GGUF\x03\0\0\0".to_vec();
        b.extend((0..len).map(|_| xorshift(&mut state) as u8));
        exercise(&b);
    }
}
