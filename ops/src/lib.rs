//! fathom-ops: CPU kernels, one module per graph op.
//!
//! Each op will have a scalar reference kernel (the oracle) and fast parallel variants that are
//! tested against it on random inputs. Kernel dispatch is generated from the op list in
//! `fathom-graph`, so a missing kernel is a compile error.
//!
//! Status: not yet implemented (issue 3).
