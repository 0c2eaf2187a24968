//! One expert tensor's view of the cache ([`PagedExperts`], its weight node's
//! [`ExpertSource`]): a node's requests (this tensor's experts and its layer's other expert
//! tensors), the read-ahead of guesses, pins, and promotion to the protected segment.

use super::io::load;
use super::{in_page, Entry, Shared, Slot, State, PROTECTED_SHARE};
use graph::{ExpertBytes, ExpertSource, Pinned};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// One expert tensor's view of the cache (its weight node's [`ExpertSource`]).
pub struct PagedExperts {
    pub(super) shared: Arc<Shared>,
    /// Its index in the cache's tensors.
    pub(super) tensor: u32,
    /// Bytes of one expert.
    pub(super) len: usize,
}

impl std::fmt::Debug for PagedExperts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PagedExperts(tensor {})", self.tensor)
    }
}

impl PagedExperts {
    /// The tensors requested together with this one: itself first, then the other expert
    /// tensors of its layer in order.
    fn group_order(&self, st: &State) -> Vec<u32> {
        let group = st.tensors[self.tensor as usize].group;
        let mut order = vec![self.tensor];
        if let Some(g) = st.groups.get(&group) {
            order.extend(g.iter().copied().filter(|&t| t != self.tensor));
        }
        order
    }
}

impl ExpertSource for PagedExperts {
    fn request(&self, experts: &[u32]) {
        let c = &self.shared.counters;
        let mut st = self.shared.lock();
        st.tick += 1;
        let tick = st.tick;
        let n_experts = st.tensors[self.tensor as usize].experts;
        let mut queued = false;
        for (i, t) in self.group_order(&st).into_iter().enumerate() {
            let own = i == 0;
            for &e in experts.iter().filter(|&&e| e < n_experts) {
                let mut protect = None;
                match st.entries.get_mut(&(t, e)) {
                    None => {
                        st.entries.insert(
                            (t, e),
                            Entry {
                                slot: Slot::Queued,
                                bytes: 0,
                                tick,
                                protected: false,
                                fresh: !own,
                                guessed: false,
                            },
                        );
                        st.queue.push_back((t, e));
                        queued = true;
                        if own {
                            c.misses.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Some(ent) => {
                        // a guess still waiting moves ahead of the other guesses
                        let waiting = matches!(ent.slot, Slot::Queued);
                        if own {
                            ent.tick = tick;
                            if ent.guessed {
                                ent.guessed = false;
                                c.guess_used.fetch_add(1, Ordering::Relaxed);
                            }
                            if ent.fresh {
                                ent.fresh = false;
                                c.misses.fetch_add(1, Ordering::Relaxed);
                            } else {
                                c.hits.fetch_add(1, Ordering::Relaxed);
                                if !ent.protected && ent.bytes > 0 {
                                    protect = Some(ent.bytes);
                                }
                            }
                        }
                        if waiting {
                            st.queue.push_back((t, e));
                            queued = true;
                        }
                    }
                }
                if let Some(b) = protect {
                    if let Some(ent) = st.entries.get_mut(&(t, e)) {
                        ent.protected = true;
                    }
                    st.protected += b;
                    demote(&mut st);
                }
            }
        }
        drop(st);
        if queued {
            self.shared.work.notify_all();
        }
    }

    fn prefetch(&self, experts: &[u32]) {
        let mut st = self.shared.lock();
        let n_experts = st.tensors[self.tensor as usize].experts;
        let tick = st.tick;
        let mut n = 0;
        for t in self.group_order(&st) {
            for &e in experts.iter().filter(|&&e| e < n_experts) {
                if let std::collections::hash_map::Entry::Vacant(v) = st.entries.entry((t, e)) {
                    v.insert(Entry {
                        slot: Slot::Queued,
                        bytes: 0,
                        tick,
                        protected: false,
                        fresh: true,
                        guessed: true,
                    });
                    st.guesses.push_back((t, e));
                    n += 1;
                }
            }
        }
        drop(st);
        if n > 0 {
            self.shared.counters.guessed.fetch_add(n, Ordering::Relaxed);
            self.shared.work.notify_all();
        }
    }

    fn pin(&self, e: usize) -> Option<Pinned> {
        let key = (self.tensor, u32::try_from(e).ok()?);
        let t0 = Instant::now();
        let mut st = self.shared.lock();
        let mut waited = false;
        let out = loop {
            match st.entries.get(&key).map(|x| &x.slot) {
                Some(Slot::Ready(buf)) => {
                    let buf: ExpertBytes = buf.clone();
                    let at = in_page(&st.tensors[key.0 as usize], key.1);
                    st.tick += 1;
                    let tick = st.tick;
                    if let Some(ent) = st.entries.get_mut(&key) {
                        ent.tick = tick;
                    }
                    break Pinned::new(e, buf, at, self.len);
                }
                Some(Slot::Failed) => break None,
                Some(Slot::Loading) => {
                    waited = true;
                    st = self
                        .shared
                        .loaded
                        .wait(st)
                        .unwrap_or_else(|e| e.into_inner());
                }
                Some(Slot::Queued) | None => {
                    // still queued (or not yet requested): read it here rather than wait
                    if !st.entries.contains_key(&key) {
                        st.tick += 1;
                        let tick = st.tick;
                        st.entries.insert(
                            key,
                            Entry {
                                slot: Slot::Queued,
                                bytes: 0,
                                tick,
                                protected: false,
                                fresh: false,
                                guessed: false,
                            },
                        );
                        self.shared.counters.misses.fetch_add(1, Ordering::Relaxed);
                    }
                    waited = true;
                    st = load(&self.shared, st, key, true);
                }
            }
        };
        drop(st);
        if waited {
            self.shared
                .counters
                .wait_ns
                .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        out
    }
}

/// Moves the least recently used protected experts back to probation while the protected
/// segment is over its share.
fn demote(st: &mut State) {
    let cap = (st.budget as f64 * PROTECTED_SHARE) as u64;
    while st.protected > cap {
        let Some((&k, _)) = st
            .entries
            .iter()
            .filter(|(_, v)| v.protected)
            .min_by_key(|(_, v)| v.tick)
        else {
            break;
        };
        if let Some(v) = st.entries.get_mut(&k) {
            v.protected = false;
            st.protected -= v.bytes;
        }
    }
}
