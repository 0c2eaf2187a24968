//! The `fathom` subcommands, one module each.

pub mod inspect;
