//! How the executor's threads wait for each other: a reusable [`Barrier`] (between the steps
//! of a plan) and a [`Gate`] (the caller starting a run), both spin → yield → park.
//!
//! A waiting thread spins for a bounded number of iterations (nodes are short, so the last
//! thread usually arrives within microseconds), then yields its CPU for a while (so that a
//! thread it waits for, descheduled on the same core by another process, gets to run), then
//! parks on a condition variable (an idle pool burns no CPU). Parking is announced through a
//! sleeper count, so that releasing threads only take the lock when someone sleeps.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a waiter yields before it parks.
const YIELD_FOR: Duration = Duration::from_micros(200);

/// The park half of a wait: a lock, a condition variable and the number of parked threads.
#[derive(Debug, Default)]
struct Parking {
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Parking {
    /// Wait until `ready()`: spin, yield, then park.
    fn wait_until(&self, spin: u32, ready: impl Fn() -> bool) {
        for _ in 0..spin {
            if ready() {
                return;
            }
            std::hint::spin_loop();
        }
        let t0 = Instant::now();
        while t0.elapsed() < YIELD_FOR {
            if ready() {
                return;
            }
            std::thread::yield_now();
        }
        // announce the sleep before the last check (SeqCst both sides: a releaser that
        // sees no sleeper has made `ready()` true before this check)
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        while !ready() {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        drop(g);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wake every parked waiter (after making their condition true).
    fn wake_all(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cv.notify_all();
        }
    }
}

/// Reusable barrier for `n` threads; `n` may change between uses ([`Barrier::set_n`]).
#[derive(Debug)]
pub struct Barrier {
    n: AtomicUsize,
    count: AtomicUsize,
    gen: AtomicUsize,
    spin: u32,
    park: Parking,
}

impl Barrier {
    /// Barrier for `n` threads that spins `spin` iterations before yielding, then parking.
    pub fn new(n: usize, spin: u32) -> Barrier {
        Barrier {
            n: AtomicUsize::new(n),
            count: AtomicUsize::new(0),
            gen: AtomicUsize::new(0),
            spin,
            park: Parking::default(),
        }
    }

    /// Set the number of threads; only while no thread is waiting at the barrier.
    pub fn set_n(&self, n: usize) {
        self.n.store(n, Ordering::SeqCst);
    }

    /// Wait until all `n` threads have arrived.
    pub fn wait(&self) {
        let n = self.n.load(Ordering::Acquire);
        if n <= 1 {
            return;
        }
        let g = self.gen.load(Ordering::Acquire);
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == n {
            self.count.store(0, Ordering::Relaxed);
            self.gen.fetch_add(1, Ordering::SeqCst);
            self.park.wake_all();
            return;
        }
        self.park
            .wait_until(self.spin, || self.gen.load(Ordering::SeqCst) != g);
    }
}

/// A generation counter the caller bumps to start a run, which workers wait on: unlike a
/// barrier, opening it never waits for a worker (a worker descheduled by another process
/// does not delay a run it takes no part in).
#[derive(Debug)]
pub struct Gate {
    gen: AtomicUsize,
    spin: u32,
    park: Parking,
}

impl Gate {
    /// A closed gate at generation 0.
    pub fn new(spin: u32) -> Gate {
        Gate {
            gen: AtomicUsize::new(0),
            spin,
            park: Parking::default(),
        }
    }
    /// The current generation.
    pub fn generation(&self) -> usize {
        self.gen.load(Ordering::SeqCst)
    }
    /// Start the next generation (after publishing what it carries).
    pub fn open(&self) {
        self.gen.fetch_add(1, Ordering::SeqCst);
        self.park.wake_all();
    }
    /// Wait until the generation is no longer `seen`.
    pub fn wait_past(&self, seen: usize) {
        self.park
            .wait_until(self.spin, || self.gen.load(Ordering::SeqCst) != seen);
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

    #[test]
    fn a_gate_wakes_spinning_yielding_and_parked_waiters() {
        for (spin, delay_us) in [(1000, 0), (0, 50), (0, 5000)] {
            let g = Arc::new(Gate::new(spin));
            let seen = g.generation();
            let hs: Vec<_> = (0..3)
                .map(|_| {
                    let g = g.clone();
                    std::thread::spawn(move || {
                        g.wait_past(seen);
                        g.generation()
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_micros(delay_us));
            g.open();
            for h in hs {
                assert_eq!(h.join().expect("thread"), seen + 1);
            }
        }
    }
}
