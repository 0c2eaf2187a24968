//! The cache on small files: pins return each expert's bytes within the budget, the
//! protected segment, read failures and tensors outside their file.

use super::*;

/// A file of `n` experts of `len` bytes, expert `e` filled with byte `e`.
fn experts_file(dir: &Path, n: u8, len: usize) -> PathBuf {
    let p = dir.join("experts.bin");
    let mut v = vec![0xAAu8; 100]; // experts start off a page boundary
    for e in 0..n {
        v.extend(std::iter::repeat_n(e, len));
    }
    std::fs::write(&p, v).unwrap();
    p
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fathom-experts-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn pins_return_each_experts_bytes_and_eviction_keeps_the_budget() {
    let d = tmp("pins");
    let len = 5000;
    let p = experts_file(&d, 6, len);
    // two experts' pages (each 5000 bytes at offset 100 + e·5000 spans two pages)
    let cache = ExpertCache::new(ExpertCacheConfig {
        budget: 2 * 8192,
        io_threads: 1,
        direct: true,
    });
    let src = cache
        .add_tensor("t", &p, 100, len as u64, len as u64, 6, 0)
        .unwrap();
    for round in 0..2 {
        for e in [0usize, 3, 5, 3, 1] {
            src.request(&[e as u32]);
            let pin = src.pin(e).unwrap();
            assert_eq!(pin.bytes().unwrap().len(), len);
            assert!(
                pin.bytes().unwrap().iter().all(|&b| b == e as u8),
                "{round} {e}"
            );
        }
    }
    let st = cache.stats();
    assert!(st.peak <= st.budget, "{st:?}");
    assert!(st.hits >= 1 && st.misses >= 4, "{st:?}");
    assert!(cache.take_error().is_none());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_used_twice_expert_outlives_a_scan_of_new_ones() {
    let d = tmp("slru");
    let p = experts_file(&d, 8, 4096);
    // room for four one-or-two-page experts; expert 0 is used twice, then 1..8 once each
    let cache = ExpertCache::new(ExpertCacheConfig {
        budget: 4 * 8192,
        io_threads: 0,
        direct: false,
    });
    let src = cache.add_tensor("t", &p, 100, 4096, 4096, 8, 0).unwrap();
    for e in [0usize, 0, 1, 2, 3, 4, 5, 6, 7] {
        src.request(&[e as u32]);
        drop(src.pin(e).unwrap());
    }
    let before = cache.stats();
    src.request(&[0]);
    drop(src.pin(0).unwrap());
    let after = cache.stats();
    assert_eq!(after.hits, before.hits + 1, "{after:?}");
    assert_eq!(after.bytes_read, before.bytes_read);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_failed_read_gives_none_and_an_error_naming_the_file_and_tensor() {
    let d = tmp("fail");
    let p = experts_file(&d, 4, 4096);
    let cache = ExpertCache::new(ExpertCacheConfig {
        budget: 1 << 20,
        io_threads: 1,
        direct: true,
    });
    let src = cache
        .add_tensor("blk.3.ffn_up_exps.weight", &p, 100, 4096, 4096, 4, 3)
        .unwrap();
    // the file shrinks after it was opened (another program rewrote it)
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(5000)
        .unwrap();
    assert!(src.pin(3).is_none());
    let e = cache.take_error().unwrap();
    assert!(
        e.contains("experts.bin") && e.contains("blk.3.ffn_up_exps.weight"),
        "{e}"
    );
    assert!(e.contains("expert 3"), "{e}");
    // the first experts are still there
    assert!(src.pin(0).unwrap().bytes().unwrap().iter().all(|&b| b == 0));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_tensor_outside_its_file_is_refused() {
    let d = tmp("outside");
    let p = experts_file(&d, 2, 4096);
    let cache = ExpertCache::new(ExpertCacheConfig::with_budget(1 << 20));
    let e = cache
        .add_tensor("x", &p, 100, 4096, 4096, 3, 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("'x'") && e.contains("experts.bin"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}
