//! fathom-backends: the CPU executor.
//!
//! - [`Executor`]: a persistent pool of worker threads pinned with `core_affinity` (thread
//!   count and CPU list configurable; default one per physical core) that replays a
//!   [`graph::Plan`]: every thread walks the step list, runs its share of each node and meets
//!   the others at a spin-then-park [`Barrier`] where the plan kept one (barrier elision:
//!   see `graph::plan`). Matmuls balance work with the node's atomic chunk counter.
//! - [`Executor::reference`]: reference kernels on one thread — the oracle of every test.
//! - [`profiler`]: the per-op profiler (`FATHOM_PROFILE_OPS=1 | json:PATH | trace:PATH`).
//! - [`testops`]: fathom's test-backend-ops (every op case against the reference).

pub mod adapt;
pub mod barrier;
pub mod executor;
pub mod profiler;
pub mod testops;
pub mod topology;

pub use barrier::Barrier;
pub use executor::{ExecConfig, ExecError, Executor, StateBuf};
pub use profiler::Profiler;
