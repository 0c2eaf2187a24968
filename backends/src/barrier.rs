//! A spin-then-park barrier for the executor's threads.
//!
//! Threads arriving early spin for a bounded number of iterations (nodes are short, so the
//! last thread usually arrives within microseconds) and then park on a condition variable, so
//! an idle pool does not burn CPU. The generation counter makes it reusable without reset.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// Reusable barrier for `n` threads.
#[derive(Debug)]
pub struct Barrier {
    n: usize,
    count: AtomicUsize,
    gen: AtomicUsize,
    spin: u32,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Barrier {
    /// Barrier for `n` threads that spins `spin` iterations before parking.
    pub fn new(n: usize, spin: u32) -> Barrier {
        Barrier {
            n,
            count: AtomicUsize::new(0),
            gen: AtomicUsize::new(0),
            spin,
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Wait until all `n` threads have arrived.
    pub fn wait(&self) {
        if self.n == 1 {
            return;
        }
        let g = self.gen.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.count.store(0, Ordering::Relaxed);
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.gen.fetch_add(1, Ordering::Release);
            self.cv.notify_all();
            return;
        }
        for _ in 0..self.spin {
            if self.gen.load(Ordering::Acquire) != g {
                return;
            }
            std::hint::spin_loop();
        }
        let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        while self.gen.load(Ordering::Acquire) == g {
            guard = self.cv.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn many_rounds_no_thread_escapes_early() {
        for spin in [0, 1000] {
            let n = 4;
            let b = Arc::new(Barrier::new(n, spin));
            let counter = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    let (b, c) = (b.clone(), counter.clone());
                    std::thread::spawn(move || {
                        for round in 0..200 {
                            c.fetch_add(1, Ordering::SeqCst);
                            b.wait();
                            assert!(c.load(Ordering::SeqCst) >= (round + 1) * n);
                            b.wait();
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().expect("thread");
            }
        }
    }
}
