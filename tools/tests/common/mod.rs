//! What the CLI tests share: the `fathom` binary in a clean environment.

#![allow(dead_code)] // each test crate uses its own subset

use std::process::Command;

/// Every environment variable fathom reads (`tools/src/env.rs`), and `RUST_BACKTRACE`:
/// cleared for every test run, so a developer's shell settings cannot change a result.
pub const CLEARED: &[&str] = &[
    "FATHOM_CPUS",
    "FATHOM_PROFILE_OPS",
    "LLAMA_PROFILE_OPS",
    "FATHOM_FORCE_SCALAR",
    "FATHOM_ST_WEIGHTS",
    "FATHOM_MOE_CONFIG",
    "RUST_BACKTRACE",
];

/// The `fathom` binary built for these tests, with none of [`CLEARED`] set.
pub fn fathom() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fathom"));
    for v in CLEARED {
        c.env_remove(v);
    }
    c
}
