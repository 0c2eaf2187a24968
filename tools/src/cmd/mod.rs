//! The `fathom` subcommands, one module each.

pub mod bench;
pub mod bench_disk;
pub mod bench_matvec;
pub mod bench_sweep;
pub mod chat;
pub mod inspect;
pub mod kl;
pub mod logits;
pub mod run;
pub mod serve;
pub mod synth;
pub mod test_ops;
