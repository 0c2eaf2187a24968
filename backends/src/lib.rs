//! fathom-backends: the CPU executor.
//!
//! This crate will own the persistent, core-pinned worker pool, the spin-then-park barrier and
//! the barrier-elision pass, the plan executor (`Executor::reference()` as the single-thread
//! oracle) and the per-op profiler switched on by `FATHOM_PROFILE_OPS=1`.
//!
//! Status: not yet implemented (issue 3).
