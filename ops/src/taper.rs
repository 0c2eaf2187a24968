//! The claimable items of a decode matvec with its last chunks cut small.
//!
//! MUL_MAT and MUL_MAT_ID split a decode matvec into row chunks of about 512 KiB that the
//! threads claim one at a time (`mul_mat::matvec_chunk`): long chunks keep each thread's DRAM
//! stream going, but the thread that claims the last chunk finishes up to a whole chunk after
//! the others, which then wait at the next barrier (about 23 µs a chunk at 22 GB/s, for each
//! of a token's ~70 matvecs). [`Tapered`] keeps the chunks and cuts the last one per thread
//! into [`TAPER_PIECES`] pieces, so that the wait is at most about a piece.

use quant::simd::DOT_ROWS;
use std::ops::Range;

/// Pieces each of the last chunks (one per thread) is cut into.
pub(crate) const TAPER_PIECES: usize = 4;

/// A node's `total` chunks (flattened over batches or experts, in claim order) as items,
/// the last `tail` chunks cut into [`TAPER_PIECES`] pieces each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tapered {
    total: usize,
    tail: usize,
}

impl Tapered {
    /// The items of `total` chunks on `nth` threads; with `taper` false (prompt chunks, tiles,
    /// one thread) every chunk stays one item.
    pub(crate) fn new(total: usize, nth: usize, taper: bool) -> Tapered {
        let tail = if taper && nth > 1 { nth.min(total) } else { 0 };
        Tapered { total, tail }
    }

    /// How many items there are to claim.
    pub(crate) fn items(self) -> usize {
        self.total + (TAPER_PIECES - 1) * self.tail
    }

    /// Item `i`: the chunk it belongs to (below `total`) and the rows it covers, given the
    /// rows of each chunk (`rows_of`). A piece is a quarter of its chunk's rows rounded up to
    /// whole passes of the multi-row kernels ([`DOT_ROWS`]); the last pieces of a short chunk
    /// may be empty.
    pub(crate) fn item(
        self,
        i: usize,
        rows_of: impl Fn(usize) -> Range<usize>,
    ) -> (usize, Range<usize>) {
        let whole = self.total - self.tail;
        if i < whole {
            return (i, rows_of(i));
        }
        let j = i - whole;
        let c = whole + j / TAPER_PIECES;
        let r = rows_of(c);
        let q = r.len().div_ceil(TAPER_PIECES).next_multiple_of(DOT_ROWS);
        let start = (r.start + (j % TAPER_PIECES) * q).min(r.end);
        (c, start..(start + q).min(r.end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row of every chunk exactly once, in claim order, whatever the chunk and
    /// thread counts; pieces only in the last `nth` chunks, in whole passes of four rows.
    #[test]
    fn items_cover_every_row_once() {
        for n in [1usize, 3, 4, 17, 64, 100, 1024] {
            for chunk in [4usize, 16, 64, 512] {
                for outer in [1usize, 2, 6] {
                    for nth in 1..=4 {
                        for taper in [false, true] {
                            let nchunks = n.div_ceil(chunk);
                            let total = outer * nchunks;
                            let t = Tapered::new(total, nth, taper);
                            let rows_of = |c: usize| {
                                let c = c % nchunks;
                                c * chunk..((c + 1) * chunk).min(n)
                            };
                            let mut seen = vec![0u32; outer * n];
                            let mut last = 0;
                            for i in 0..t.items() {
                                let (c, r) = t.item(i, rows_of);
                                assert!(c < total && c >= last, "claim order");
                                last = c;
                                let whole = rows_of(c);
                                assert!(r.start >= whole.start && r.end <= whole.end);
                                if r.end < whole.end {
                                    assert_eq!(r.len() % DOT_ROWS, 0, "whole passes");
                                }
                                if r != whole {
                                    assert!(taper && nth > 1 && c >= total - nth.min(total));
                                }
                                for row in r {
                                    seen[(c / nchunks) * n + row] += 1;
                                }
                            }
                            assert!(seen.iter().all(|&s| s == 1), "n {n} chunk {chunk}");
                            let pieces = if taper && nth > 1 { nth.min(total) } else { 0 };
                            assert_eq!(t.items(), total + 3 * pieces);
                        }
                    }
                }
            }
        }
    }
}
