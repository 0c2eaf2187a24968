//! Memory stays bounded by the file size: tiny files that claim 2^60 tensors, key-values or
//! array elements, or 2^63-byte strings, fail without any large allocation. A counting global
//! allocator records the largest single request while each hostile file is parsed
//! (`shared/spec/hostile-inputs.md` §8 rows 3, 4, 6, 7). One test per binary, so no other
//! test's allocations are counted.

mod gguf_support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use fathom_models::gguf::GgufFile;
use gguf_support::*;

struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; it only records sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn hostile_counts_allocate_little() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("2^60 tensors", Raw::header(3, 1 << 60, 0).fill(1000, 0).0),
        ("2^60 kv", Raw::header(3, 0, 1 << 60).fill(1000, 0).0),
        ("5e8 kv", Raw::header(3, 0, 500_000_000).fill(1000, 0).0),
        (
            "2^60 u8 array",
            Raw::header(3, 0, 1)
                .key("a", T_ARRAY)
                .u32(T_U8)
                .u64(1 << 60)
                .fill(1000, 0)
                .0,
        ),
        (
            "2^61 string array",
            Raw::header(3, 0, 1)
                .key("a", T_ARRAY)
                .u32(T_STR)
                .u64(1 << 61)
                .fill(1000, 0)
                .0,
        ),
        (
            "2^63 string",
            Raw::header(3, 0, 1)
                .key("s", T_STR)
                .u64(1 << 63)
                .fill(1000, b'x')
                .0,
        ),
        (
            "2^40 key",
            Raw::header(3, 0, 1).u64(1 << 40).fill(1000, b'k').0,
        ),
        (
            "2^40 tensor name",
            Raw::header(3, 1, 0).u64(1 << 40).fill(1000, b'n').0,
        ),
        (
            // Many tiny nested arrays: each costs 12 bytes on disk, so memory stays linear.
            "nested arrays",
            {
                let mut r = Raw::header(3, 0, 1).key("n", T_ARRAY).u32(T_ARRAY).u64(80);
                for _ in 0..80 {
                    r = r.u32(T_U8).u64(0);
                }
                r.0
            },
        ),
    ];
    for (name, bytes) in cases {
        let len = bytes.len();
        LARGEST.store(0, Ordering::Relaxed);
        let r = GgufFile::parse(&bytes[..]);
        let largest = LARGEST.load(Ordering::Relaxed);
        if name != "nested arrays" {
            assert!(r.is_err(), "{name} accepted");
        }
        // The input copy (`len`) is the largest legitimate allocation; allow slack for
        // error strings and small tables.
        assert!(
            largest <= len.max(4096) * 4,
            "{name}: largest allocation {largest} bytes for a {len}-byte file"
        );
    }
}
