//! Prefix snapshots: session states taken after prompt prefixes, with the logits of their
//! last position, held in a least-recently-used set under a byte budget.

use models::session::SessionState;

/// One snapshot.
#[derive(Clone)]
pub struct Snapshot {
    /// The state (its tokens are the prefix).
    pub state: SessionState,
    /// The logits after its last token.
    pub logits: Vec<f32>,
    last_used: u64,
}

impl Snapshot {
    fn bytes(&self) -> u64 {
        (self.state.cache_bytes() + self.state.tokens().len() * 4 + self.logits.len() * 4) as u64
    }
}

/// Snapshots under a byte budget, least recently used evicted first.
pub struct PrefixCache {
    budget: u64,
    entries: Vec<Snapshot>,
    clock: u64,
}

impl PrefixCache {
    /// An empty cache holding at most `budget` bytes.
    pub fn new(budget: u64) -> PrefixCache {
        PrefixCache {
            budget,
            entries: Vec::new(),
            clock: 0,
        }
    }

    /// Snapshots held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.entries.iter().map(Snapshot::bytes).sum()
    }

    /// The snapshot holding the longest prefix of `prompt` longer than `at_least` tokens (a
    /// state the caller already has), marked as used.
    pub fn longest_prefix(&mut self, prompt: &[u32], at_least: usize) -> Option<&Snapshot> {
        self.clock += 1;
        let best = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                let t = s.state.tokens();
                t.len() > at_least && t.len() <= prompt.len() && prompt.starts_with(t)
            })
            .max_by_key(|(_, s)| s.state.tokens().len())
            .map(|(i, _)| i)?;
        self.entries[best].last_used = self.clock;
        Some(&self.entries[best])
    }

    /// Add a snapshot (replacing one of the same tokens), then evict the least recently used
    /// until the budget holds. A snapshot larger than the whole budget is not kept.
    pub fn insert(&mut self, state: SessionState, logits: &[f32]) {
        self.clock += 1;
        let snap = Snapshot {
            state,
            logits: logits.to_vec(),
            last_used: self.clock,
        };
        if snap.bytes() > self.budget {
            return;
        }
        self.entries
            .retain(|s| s.state.tokens() != snap.state.tokens());
        self.entries.push(snap);
        while self.bytes() > self.budget {
            let Some(oldest) = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(i, _)| i)
            else {
                break;
            };
            self.entries.swap_remove(oldest);
        }
    }
}
