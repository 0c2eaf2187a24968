//! Helpers shared by the session tests that compare two ways of running the same model bit
//! for bit (repacked layouts, the expert cache).

use fathom_models::session::Session;

/// A greedy continuation of `prompt` by `n` tokens: every step's logits as bits (the prompt's
/// last position, then each decode step).
pub fn greedy(s: &mut Session, prompt: &[u32], n: usize) -> Vec<Vec<u32>> {
    let mut out = vec![s.prefill(prompt).unwrap()];
    for _ in 0..n {
        let last = out.last().unwrap();
        let next = (0..last.len()).fold(0, |b, j| if last[j] > last[b] { j } else { b }) as u32;
        out.push(s.decode(next).unwrap());
    }
    out.into_iter()
        .map(|l| l.iter().map(|x| x.to_bits()).collect())
        .collect()
}
