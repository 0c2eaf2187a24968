//! Prefix snapshots on disk (`--prefix-cache-dir`): kept across restarts, found lazily.
//!
//! Snapshots live in `DIR/<fingerprint>/`, where the fingerprint (a hash of what the CLI says
//! identifies the model file and the settings that shape its caches) keeps another model's
//! states out of reach. Each snapshot is two files named by its token count and a hash of its
//! tokens: `<n>-<hash>.state` (a [`SessionState`], checksummed) and `<n>-<hash>.logits` (the
//! logits after its last token), each written atomically. At start only the names are read;
//! a lookup hashes the prompt's prefixes of the stored lengths, loads a match, and checks its
//! tokens. A damaged or foreign file is removed and counts as a miss. The directory is kept
//! under a byte budget by removing the least recently used snapshots.

use models::files::{fnv1a as fnv, FNV1A_START as FNV0};
use models::session::SessionState;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The magic of a logits file.
const LOGITS_MAGIC: &[u8; 8] = b"FATHOMLG";

fn hash_tokens(tokens: &[u32]) -> u64 {
    tokens.iter().fold(FNV0, |h, t| fnv(h, &t.to_le_bytes()))
}

/// Snapshots on disk (see the module docs).
#[derive(Debug)]
pub struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
    lens: BTreeSet<usize>,
}

impl DiskCache {
    /// The cache for `fingerprint` under `root`, holding at most `max_bytes`.
    pub fn open(root: &Path, fingerprint: &str, max_bytes: u64) -> std::io::Result<DiskCache> {
        let dir = root.join(format!("{:016x}", fnv(FNV0, fingerprint.as_bytes())));
        std::fs::create_dir_all(&dir)?;
        let mut lens = BTreeSet::new();
        for e in std::fs::read_dir(&dir)? {
            let name = e?.file_name();
            let name = name.to_string_lossy();
            if let Some(n) = name
                .strip_suffix(".state")
                .and_then(|s| s.split_once('-'))
                .and_then(|(n, _)| n.parse().ok())
            {
                lens.insert(n);
            }
        }
        Ok(DiskCache {
            dir,
            max_bytes,
            lens,
        })
    }

    /// The directory of this fingerprint.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn stem(&self, tokens: &[u32]) -> PathBuf {
        self.dir
            .join(format!("{}-{:016x}", tokens.len(), hash_tokens(tokens)))
    }

    /// The stored snapshot holding the longest prefix of `prompt` longer than `at_least`.
    pub fn longest_prefix(
        &mut self,
        prompt: &[u32],
        at_least: usize,
    ) -> Option<(SessionState, Vec<f32>)> {
        let lens: Vec<usize> = self
            .lens
            .range(at_least + 1..=prompt.len())
            .rev()
            .copied()
            .collect();
        for n in lens {
            let stem = self.stem(&prompt[..n]);
            let state_path = stem.with_extension("state");
            if !state_path.exists() {
                continue;
            }
            match (
                SessionState::load(&state_path),
                read_logits(&stem.with_extension("logits")),
            ) {
                (Ok(s), Some(l)) if s.tokens() == &prompt[..n] => {
                    touch(&state_path);
                    return Some((s, l));
                }
                _ => self.remove(&stem),
            }
        }
        None
    }

    /// Store a snapshot, then keep the directory under its budget.
    pub fn store(&mut self, state: &SessionState, logits: &[f32]) {
        let stem = self.stem(state.tokens());
        let mut bytes = Vec::with_capacity(16 + logits.len() * 4 + 8);
        bytes.extend_from_slice(LOGITS_MAGIC);
        bytes.extend_from_slice(&(logits.len() as u64).to_le_bytes());
        for l in logits {
            bytes.extend_from_slice(&l.to_le_bytes());
        }
        let sum = fnv(FNV0, &bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        let ok =
            models::files::write_atomic(&stem.with_extension("logits"), |f| f.write_all(&bytes))
                .is_ok()
                && state.save(stem.with_extension("state")).is_ok();
        if ok {
            self.lens.insert(state.tokens().len());
            self.trim();
        } else {
            self.remove(&stem);
        }
    }

    fn remove(&mut self, stem: &Path) {
        let _ = std::fs::remove_file(stem.with_extension("state"));
        let _ = std::fs::remove_file(stem.with_extension("logits"));
    }

    /// Remove the least recently used snapshots until the directory fits its budget.
    fn trim(&mut self) {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut snaps: Vec<(std::time::SystemTime, u64, PathBuf)> = Vec::new();
        let mut total = 0u64;
        for e in rd.flatten() {
            let p = e.path();
            let Ok(m) = e.metadata() else { continue };
            total += m.len();
            if p.extension().is_some_and(|x| x == "state") {
                let logits = std::fs::metadata(p.with_extension("logits")).map_or(0, |m| m.len());
                let t = m.modified().unwrap_or(std::time::UNIX_EPOCH);
                snaps.push((t, m.len() + logits, p.with_extension("")));
            }
        }
        snaps.sort();
        for (_, bytes, stem) in snaps {
            if total <= self.max_bytes {
                break;
            }
            self.remove(&stem);
            total = total.saturating_sub(bytes);
        }
    }
}

/// Mark a snapshot as used (its modification time orders eviction).
fn touch(path: &Path) {
    if let Ok(f) = std::fs::OpenOptions::new().append(true).open(path) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// A logits file, or `None` if it is missing or damaged.
fn read_logits(path: &Path) -> Option<Vec<f32>> {
    let bytes = models::files::read_capped(path, 1 << 30, "logits").ok()?;
    if bytes.len() < 24 || &bytes[..8] != LOGITS_MAGIC {
        return None;
    }
    let n = usize::try_from(u64::from_le_bytes(bytes[8..16].try_into().ok()?)).ok()?;
    if bytes.len() != 16 + n.checked_mul(4)? + 8 {
        return None;
    }
    let body = &bytes[..bytes.len() - 8];
    let sum = u64::from_le_bytes(bytes[bytes.len() - 8..].try_into().ok()?);
    if fnv(FNV0, body) != sum {
        return None;
    }
    Some(
        body[16..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    )
}
