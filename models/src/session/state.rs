//! [`SessionState`]: a snapshot of a session's sequence — its tokens and its decode caches —
//! that can be cloned, restored into a fresh session of the same model and context
//! ([`Session::set_state`]), and saved to a file ([`SessionState::save`],
//! [`SessionState::load`]). Restoring a snapshot taken after a prefix `A` and then feeding
//! `B` gives the logits of feeding `A` then `B` (the caches are the same bytes).
//!
//! # File format
//!
//! Little-endian: the magic `FATHOMSS`, a `u32` version (1), the mode (`u8`: 0 cached, 1
//! recompute), the architecture (`u16` length, ≤ 64 bytes), the context (`u64`), the cache
//! layout's fingerprint (`u64`, over the model's state tensors), the token count (`u64`, at
//! most the context) and the tokens (`u32` each), the cache length (`u64`, 0 for none) and
//! its bytes, then an FNV-1a checksum (`u64`) of everything before it. A file is written to a
//! temporary name beside the target and renamed, so a crash never leaves half a file under
//! the target's name; a file whose length, checksum or fields do not add up is refused.

use super::{Mode, Session, SessionError};
use crate::files::{fnv1a as fnv, FNV1A_START as FNV0};
use crate::model::Model;
use backends::StateBuf;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The magic bytes of a saved state.
const MAGIC: &[u8; 8] = b"FATHOMSS";
/// The format version.
const VERSION: u32 = 1;
/// Longest architecture name in a saved state.
const MAX_ARCH: usize = 64;

/// Errors of saving, loading and restoring a [`SessionState`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a saved state, or is damaged.
    #[error("{}: not a fathom session state: {msg}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
    /// The state is of another model, context or cache layout than the session.
    #[error("the state does not fit this session: {0}")]
    Mismatch(String),
}

/// A snapshot of a session's sequence (see the module docs).
#[derive(Clone)]
pub struct SessionState {
    arch: String,
    ctx: usize,
    mode: Mode,
    layout: u64,
    tokens: Vec<u32>,
    cache: Option<StateBuf>,
}

impl std::fmt::Debug for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionState")
            .field("arch", &self.arch)
            .field("ctx", &self.ctx)
            .field("tokens", &self.tokens.len())
            .field("cache_bytes", &self.cache.as_ref().map_or(0, |c| c.len()))
            .finish()
    }
}

/// The fingerprint of a model's cache layout at context `ctx`.
fn layout(model: &(impl Model + ?Sized), ctx: usize) -> u64 {
    let mut h = fnv(FNV0, model.info().arch.as_bytes());
    for s in model.state_tensors(ctx) {
        h = fnv(h, s.name.as_bytes());
        h = fnv(h, &(s.ne[0] as u64).to_le_bytes());
        h = fnv(h, &(s.ne[1] as u64).to_le_bytes());
    }
    h
}

impl SessionState {
    /// The tokens of the sequence.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The context length it was taken at.
    pub fn ctx(&self) -> usize {
        self.ctx
    }

    /// Bytes of its caches (0 before the first cached step, and in recompute mode).
    pub fn cache_bytes(&self) -> usize {
        self.cache.as_ref().map_or(0, StateBuf::len)
    }

    /// Writes the state to `path` (see the module docs): to a temporary file beside it,
    /// synced, then renamed over `path`.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), StateError> {
        let path = path.as_ref();
        let io = |source| StateError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut head = Vec::new();
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&VERSION.to_le_bytes());
        head.push(match self.mode {
            Mode::Cached => 0,
            Mode::Recompute => 1,
        });
        head.extend_from_slice(&(self.arch.len() as u16).to_le_bytes());
        head.extend_from_slice(self.arch.as_bytes());
        head.extend_from_slice(&(self.ctx as u64).to_le_bytes());
        head.extend_from_slice(&self.layout.to_le_bytes());
        head.extend_from_slice(&(self.tokens.len() as u64).to_le_bytes());
        for t in &self.tokens {
            head.extend_from_slice(&t.to_le_bytes());
        }
        let cache = self.cache.as_ref().map_or(&[][..], StateBuf::bytes);
        head.extend_from_slice(&(cache.len() as u64).to_le_bytes());
        let sum = fnv(fnv(FNV0, &head), cache);
        crate::files::write_atomic(path, |f| {
            f.write_all(&head)?;
            f.write_all(cache)?;
            f.write_all(&sum.to_le_bytes())
        })
        .map_err(io)
    }

    /// Reads a state written by [`SessionState::save`], checking its length, checksum and
    /// fields before allocating anything the file's length does not back.
    pub fn load(path: impl AsRef<Path>) -> Result<SessionState, StateError> {
        let path = path.as_ref();
        let bad = |msg: String| StateError::Format {
            path: path.to_path_buf(),
            msg,
        };
        let io = |source| StateError::Io {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_file() {
            return Err(bad("not a regular file".into()));
        }
        let len = meta.len();
        let mut f = crate::files::open_regular(path).map_err(io)?;
        let mut read = |n: usize| -> Result<Vec<u8>, StateError> {
            let mut b = vec![0u8; n];
            f.read_exact(&mut b)
                .map_err(|_| bad("the file ends early".into()))?;
            Ok(b)
        };
        let mut sum = FNV0;
        let mut take = |n: usize, sum: &mut u64| -> Result<Vec<u8>, StateError> {
            let b = read(n)?;
            *sum = fnv(*sum, &b);
            Ok(b)
        };
        let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        if take(8, &mut sum)? != MAGIC {
            return Err(bad("wrong magic".into()));
        }
        let version = u32::from_le_bytes(take(4, &mut sum)?.try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(bad(format!(
                "version {version} (this build reads {VERSION})"
            )));
        }
        let mode = match take(1, &mut sum)?[0] {
            0 => Mode::Cached,
            1 => Mode::Recompute,
            m => return Err(bad(format!("mode {m}"))),
        };
        let alen = u16::from_le_bytes(take(2, &mut sum)?.try_into().expect("2 bytes")) as usize;
        if alen > MAX_ARCH {
            return Err(bad(format!("architecture name of {alen} bytes")));
        }
        let arch = String::from_utf8(take(alen, &mut sum)?)
            .map_err(|_| bad("architecture name not UTF-8".into()))?;
        let ctx = u64_of(&take(8, &mut sum)?);
        let layout = u64_of(&take(8, &mut sum)?);
        let n = u64_of(&take(8, &mut sum)?);
        let fixed = 8 + 4 + 1 + 2 + alen as u64 + 8 + 8 + 8 + 8 + 8;
        if n > ctx || n.checked_mul(4).is_none_or(|b| b + fixed > len) {
            return Err(bad(format!("{n} tokens for a context of {ctx}")));
        }
        let toks = take(n as usize * 4, &mut sum)?;
        let tokens = toks
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        let clen = u64_of(&take(8, &mut sum)?);
        if fixed + 4 * n + clen != len {
            return Err(bad(format!(
                "{len} bytes, but the header says {}",
                fixed.saturating_add(4 * n).saturating_add(clen)
            )));
        }
        let cache = take(clen as usize, &mut sum)?;
        let want = u64_of(&read(8)?);
        if want != sum {
            return Err(bad("checksum mismatch (the file is damaged)".into()));
        }
        Ok(SessionState {
            arch,
            ctx: ctx as usize,
            mode,
            layout,
            tokens,
            cache: (clen > 0).then(|| StateBuf::from_bytes(&cache)),
        })
    }
}

impl<M: Model + ?Sized> Session<M> {
    /// A snapshot of the sequence: its tokens and a copy of its caches.
    pub fn state(&self) -> SessionState {
        SessionState {
            arch: self.model.info().arch.to_string(),
            ctx: self.ctx,
            mode: self.mode,
            layout: layout(&*self.model, self.ctx),
            tokens: self.seq().clone(),
            cache: match (self.mode, &self.state) {
                (Mode::Cached, Some(st)) => Some(StateBuf::from_bytes(
                    &st.bytes()[self.slot_range(self.slot)],
                )),
                _ => None,
            },
        }
    }

    /// Makes `state` this session's sequence (its mode included). The state must be of the
    /// same architecture, context and cache layout; the session's executors stay.
    pub fn set_state(&mut self, state: &SessionState) -> Result<(), SessionError> {
        let arch = self.model.info().arch;
        if state.arch != arch {
            return Err(StateError::Mismatch(format!(
                "taken on a {} model, this one is {arch}",
                state.arch
            ))
            .into());
        }
        if state.ctx != self.ctx {
            return Err(StateError::Mismatch(format!(
                "taken at a context of {}, this session's is {}",
                state.ctx, self.ctx
            ))
            .into());
        }
        if state.layout != layout(&*self.model, self.ctx) {
            return Err(StateError::Mismatch(
                "its cache layout is another model's (different dimensions)".into(),
            )
            .into());
        }
        let n_vocab = self.model.info().n_vocab;
        if let Some(&id) = state.tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(SessionError::BadToken { id, n_vocab });
        }
        if state.mode == Mode::Cached && state.cache.is_none() && !state.tokens.is_empty() {
            return Err(StateError::Mismatch(format!(
                "{} tokens without their caches",
                state.tokens.len()
            ))
            .into());
        }
        let need = self.cache_bytes() as usize;
        if let Some(c) = &state.cache {
            if c.len() != need.div_ceil(64) * 64 {
                return Err(StateError::Mismatch(format!(
                    "{} cache bytes, this session's caches take {need}",
                    c.len()
                ))
                .into());
            }
        }
        if state.mode != self.mode && self.seqs.len() > 1 {
            return Err(StateError::Mismatch(
                "a recompute-mode state cannot go into one of several slots".into(),
            )
            .into());
        }
        self.set_mode(state.mode);
        *self.seq_mut() = state.tokens.clone();
        let range = self.slot_range(self.slot);
        match (&state.cache, self.mode) {
            (Some(c), Mode::Cached) => {
                let len = self.state_len();
                let st = self.state.get_or_insert_with(|| StateBuf::new(len));
                st.bytes_mut()[range].copy_from_slice(c.bytes());
            }
            _ => {
                if let Some(st) = self.state.as_mut() {
                    st.bytes_mut()[range].fill(0);
                }
            }
        }
        Ok(())
    }
}
