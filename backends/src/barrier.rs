//! How the executor's threads wait for each other: a reusable [`Barrier`] (between the steps
//! of a plan) and a [`Gate`] (the caller starting a run), both spin → yield → park, and
//! [`Start`], the protocol by which a run's job reaches the workers that take part in it.
//!
//! A waiting thread spins for a bounded number of iterations (nodes are short, so the last
//! thread usually arrives within microseconds), then yields its CPU for a while (so that a
//! thread it waits for, descheduled on the same core by another process, gets to run), then
//! parks on a condition variable (an idle pool burns no CPU). Parking is announced through a
//! sleeper count, so that releasing threads only take the lock when someone sleeps.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
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

/// A posted job: the generation at which workers see it and the threads taking part.
#[derive(Debug)]
struct Posted<J> {
    job: Arc<J>,
    gen: usize,
    active: usize,
}

/// How a run starts on a pool: the caller posts a job for `active` threads (itself and
/// workers `1..active`) and opens the [`Gate`] only when a worker takes part; each worker
/// waits for a generation past the last one it saw and takes the job when it is one of them.
///
/// A posted job carries the generation at which workers see it: the next one if the post
/// opens the gate, the current one if it does not (a run of the caller alone). A worker woken
/// by a run it is not part of may read the slot late, after later posts; it remembers the
/// larger of the gate's generation and the slot's, so it neither runs a job twice nor sleeps
/// through the next run that opens the gate.
#[derive(Debug)]
pub struct Start<J> {
    gate: Gate,
    slot: Mutex<Option<Posted<J>>>,
    quit: AtomicBool,
}

impl<J> Start<J> {
    /// No job posted, the gate closed at generation 0.
    pub fn new(spin: u32) -> Start<J> {
        Start {
            gate: Gate::new(spin),
            slot: Mutex::new(None),
            quit: AtomicBool::new(false),
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Posted<J>>> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Post `job` for `active` threads, waking the workers when any takes part.
    pub fn post(&self, job: Arc<J>, active: usize) {
        let opens = active > 1;
        let gen = self.gate.generation() + usize::from(opens);
        *self.slot() = Some(Posted { job, gen, active });
        if opens {
            self.gate.open();
        }
    }

    /// Withdraw the posted job (its run is over).
    pub fn clear(&self) {
        *self.slot() = None;
    }

    /// Tell every worker to return from [`Start::next`].
    pub fn quit(&self) {
        self.clear();
        self.quit.store(true, Ordering::SeqCst);
        self.gate.open();
    }

    /// Worker `ith` (≥ 1): wait for the next run it takes part in; `seen` is its own
    /// generation, 0 at first. `None` once [`Start::quit`] was called.
    pub fn next(&self, ith: usize, seen: &mut usize) -> Option<Arc<J>> {
        loop {
            self.gate.wait_past(*seen);
            if self.quit.load(Ordering::SeqCst) {
                return None;
            }
            if let Some(job) = self.take(ith, seen) {
                return Some(job);
            }
        }
    }

    /// After a wake: the posted job if worker `ith` is part of it, and the generation to
    /// wait past next (a job read before its post opened the gate is not run twice).
    fn take(&self, ith: usize, seen: &mut usize) -> Option<Arc<J>> {
        let g = self.gate.generation();
        let slot = self.slot();
        *seen = slot.as_ref().map_or(g, |p| p.gen.max(g));
        slot.as_ref()
            .filter(|p| ith < p.active)
            .map(|p| p.job.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_worker_that_reads_the_slot_late_still_wakes_for_its_next_run() {
        // worker 2 of 3 is woken by a run of two, and reads the slot only after that run
        // and a run of the caller alone were posted: it must wake for the next run of three
        let s = Start::<u32>::new(0);
        let mut seen = 0;
        s.post(Arc::new(1), 2);
        assert_ne!(s.gate.generation(), seen, "a post for two opens the gate");
        s.clear();
        s.post(Arc::new(2), 1);
        assert!(s.take(2, &mut seen).is_none());
        s.clear();
        s.post(Arc::new(3), 3);
        assert_ne!(s.gate.generation(), seen, "worker 2 sleeps through its run");
        assert_eq!(s.take(2, &mut seen).as_deref(), Some(&3));
        // and does not run it again once it comes back
        assert_eq!(s.gate.generation(), seen);
    }

    #[test]
    fn a_job_read_before_its_gate_opens_is_run_once() {
        let s = Start::<u32>::new(0);
        let mut seen = 0;
        // the worker reads the slot between the post and the opening of the gate
        *s.slot() = Some(Posted {
            job: Arc::new(7),
            gen: 1,
            active: 2,
        });
        assert_eq!(s.take(1, &mut seen).as_deref(), Some(&7));
        s.gate.open();
        assert_eq!(s.gate.generation(), seen);
        // quitting wakes it and ends its loop
        s.quit();
        assert!(s.next(1, &mut seen).is_none());
    }
}
