//! The `fathom` subcommands, one module each.

pub mod inspect;
pub mod test_ops;
