//! Several sequences in one session: a server's parallel slots.
//!
//! With [`Session::set_slots`]`(n)` the state buffer holds `n` sequences' caches back to
//! back, slot `k`'s at `k ×` [`Session::cache_bytes`], each laid out as one sequence's. The
//! one-sequence methods (`prefill`, `decode`, `state`, `set_state`, `reset`, `tokens`) act
//! on the slot chosen with [`Session::select`], running the same graphs as a one-slot
//! session on that slot's region (so a slot's logits are those of a session of its own, bit
//! for bit). [`Session::decode_slots`] evaluates one token of each of several slots as one
//! [`GraphKind::Slots`] graph: every weight is read once per step for all of them, each
//! slot attending over its own caches.

use super::{Mode, Session, SessionError};
use crate::model::{span_for, GraphKind, GraphSpec, Logits, Model, MAX_SLOTS};
use std::ops::Range;

impl<M: Model + ?Sized> Session<M> {
    /// The selected slot's sequence.
    pub(super) fn seq(&self) -> &Vec<u32> {
        &self.seqs[self.slot]
    }

    /// The selected slot's sequence, mutable.
    pub(super) fn seq_mut(&mut self) -> &mut Vec<u32> {
        &mut self.seqs[self.slot]
    }

    /// Bytes of the state buffer of every slot.
    pub(super) fn state_len(&self) -> usize {
        self.cache_bytes() as usize * self.seqs.len()
    }

    /// Slot `k`'s bytes in the state buffer.
    pub(super) fn slot_range(&self, k: usize) -> Range<usize> {
        let b = self.cache_bytes() as usize;
        k * b..(k + 1) * b
    }

    /// Hold `n` sequences (1 to [`MAX_SLOTS`]); every slot starts empty and slot 0 is
    /// selected. Cached mode only (the session switches to it). The caches of all `n` are
    /// checked against the memory limit before anything is allocated.
    pub fn set_slots(&mut self, n: usize) -> Result<(), SessionError> {
        if n == 0 || n > MAX_SLOTS {
            return Err(SessionError::Slots(format!(
                "{n} slots (a session holds 1 to {MAX_SLOTS})"
            )));
        }
        self.set_mode(Mode::Cached);
        self.retire_all();
        self.state = None;
        self.seqs = vec![Vec::new(); n];
        self.slot = 0;
        self.reserve(
            self.cache_bytes() * n as u64,
            format!("the caches of {n} sequences of {} tokens", self.ctx),
        )
    }

    /// Slots held.
    pub fn n_slots(&self) -> usize {
        self.seqs.len()
    }

    /// Make the one-sequence methods act on slot `k`.
    pub fn select(&mut self, k: usize) -> Result<(), SessionError> {
        if k >= self.seqs.len() {
            return Err(SessionError::Slots(format!(
                "slot {k} of {} (slots count from 0)",
                self.seqs.len()
            )));
        }
        self.slot = k;
        Ok(())
    }

    /// The selected slot.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The token ids of slot `k`'s sequence (empty for a slot that does not exist).
    pub fn slot_tokens(&self, k: usize) -> &[u32] {
        self.seqs.get(k).map_or(&[], Vec::as_slice)
    }

    /// Forget every slot's sequence.
    pub fn reset_all(&mut self) {
        self.seqs.iter_mut().for_each(Vec::clear);
        if let Some(st) = self.state.as_mut() {
            st.reset();
        }
    }

    /// Evaluate one token after each of several slots' sequences, as one batched step;
    /// returns each slot's logits in the order given. `steps` is `(slot, token)`, each slot
    /// at most once. One step alone runs the slot's ordinary one-token graph. On an error
    /// the slots of the step are reset (their caches may be half-written); the selected
    /// slot stays.
    pub fn decode_slots(&mut self, steps: &[(usize, u32)]) -> Result<Vec<Vec<f32>>, SessionError> {
        let n_vocab = self.info().n_vocab;
        let mut active = 0u64;
        for &(k, token) in steps {
            if k >= self.seqs.len() || active >> k & 1 == 1 {
                return Err(SessionError::Slots(format!(
                    "slot {k} twice or out of the {} slots in one step",
                    self.seqs.len()
                )));
            }
            active |= 1 << k;
            if token as usize >= n_vocab {
                return Err(SessionError::BadToken { id: token, n_vocab });
            }
            if self.seqs[k].len() >= self.ctx {
                return Err(SessionError::ContextFull {
                    n_past: self.seqs[k].len(),
                    adding: 1,
                    ctx: self.ctx,
                });
            }
        }
        if self.mode != Mode::Cached {
            return Err(SessionError::Slots(
                "batched steps run in the cached mode only".into(),
            ));
        }
        let selected = self.slot;
        let r = match steps {
            [] => Ok(Vec::new()),
            &[(k, token)] => {
                self.slot = k;
                let r = self.decode(token).map(|l| vec![l]);
                self.slot = selected;
                r
            }
            _ => self.run_slots(steps, active),
        };
        if r.is_err() {
            for &(k, _) in steps {
                self.slot = k;
                self.reset();
            }
            self.slot = selected;
        }
        r
    }

    /// The batched step of [`Session::decode_slots`] (two or more slots).
    fn run_slots(
        &mut self,
        steps: &[(usize, u32)],
        active: u64,
    ) -> Result<Vec<Vec<f32>>, SessionError> {
        let mut order: Vec<(usize, u32)> = steps.to_vec();
        order.sort_unstable();
        let end = order.iter().map(|&(k, _)| self.seqs[k].len() + 1).max();
        let spec = GraphSpec {
            tokens: order.len(),
            kind: GraphKind::Slots {
                ctx: self.ctx,
                span: span_for(self.ctx, end.unwrap_or(1)),
                n_slots: self.seqs.len(),
                active,
            },
            logits: Logits::All,
            hidden: false,
        };
        self.exec_for(spec)?;
        let ids: Vec<u32> = order.iter().map(|&(_, t)| t).collect();
        let starts: Vec<usize> = order.iter().map(|&(k, _)| self.seqs[k].len()).collect();
        for &(k, t) in &order {
            self.seqs[k].push(t);
        }
        let logits = self
            .run_last(&ids, &starts, order.len(), true)?
            .ok_or(SessionError::Empty)?;
        let v = self.info().n_vocab;
        Ok(steps
            .iter()
            .map(|(k, _)| {
                let row = order.iter().position(|(o, _)| o == k).unwrap_or(0);
                logits[row * v..(row + 1) * v].to_vec()
            })
            .collect())
    }
}
