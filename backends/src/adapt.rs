//! How many of its threads an executor runs a plan with: all of them, unless measurements say
//! fewer are faster. When other processes take some of the cores, every barrier waits for a
//! thread that is not running: a 2-thread decode on 2 cores with one core busy fell from ~840
//! to ~220 tokens/s, below one thread's ~840.
//!
//! The policy keeps the last run times at the thread count in use and judges by their median
//! (one run stalled by the scheduler does not count). After the first run, then every
//! `interval` runs, it tries a neighbouring count (all threads, then halving down to one) for
//! [`TRY_RUNS`] runs, and moves there when their median is clearly faster — but never before
//! the time run at the count in use covers what such a try could lose, over
//! [`TRY_COST_SHARE`] (so a graph that takes seconds and runs a few times, a prompt chunk's,
//! is not tried at fewer threads). The interval doubles each time a try confirms
//! the current count (up to [`MAX_INTERVAL`] runs, so that tries cost little once settled) and
//! falls back to [`MIN_INTERVAL`] when the current count gets much slower than it was (the
//! load on the machine changed). A try that loses also costs time — a run with more threads
//! than the free cores can stall for tens of milliseconds waiting for a descheduled thread —
//! so the next try also waits until [`TRY_COST_SHARE`]⁻¹ times that loss has been spent at
//! the current count: tries take at most about that share of the time, however noisy the
//! runs. A move to more threads is undone at once when one of its first runs stalls (the
//! try was lucky). Every count gives the same bits (each output element is computed by one thread), so
//! switching never changes a result.

/// Runs between tries at first and after a change of load.
pub const MIN_INTERVAL: u32 = 3;
/// Most runs between tries.
pub const MAX_INTERVAL: u32 = 4096;
/// Runs of one try.
pub const TRY_RUNS: usize = 3;
/// The most time a try may lose without waiting for `Adapt::try_budget` (ns).
pub const FREE_TRY_LOSS_NS: u64 = 100_000_000;
/// Run times kept for the count in use.
const WINDOW: usize = 8;
/// The share of time losing tries may take: after a try that lost `x` ns against the count
/// in use, the next waits until `x / TRY_COST_SHARE` ns have run at that count.
pub const TRY_COST_SHARE: f64 = 0.04;

fn median(v: &[u64]) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s[s.len() / 2]
}

/// The thread-count policy of one executor (see the module docs).
#[derive(Debug, Clone)]
pub struct Adapt {
    /// The thread counts it may use: `nth`, `nth/2`, …, 1.
    levels: Vec<usize>,
    /// Index into `levels` of the count in use.
    cur: usize,
    /// The last run times at the count in use (ns).
    recent: Vec<u64>,
    /// The best median seen at the count in use since it was chosen.
    best: u64,
    since: u32,
    interval: u32,
    /// The level being tried and its run times so far.
    trying: Option<(usize, Vec<u64>)>,
    down_next: bool,
    /// Time run at the count in use since the last try (ns).
    since_ns: u64,
    /// Time to run at the count in use before the next try (ns).
    wait_ns: u64,
    /// After a move to more threads: the level left, its median, and the runs left in which
    /// one far slower run moves back at once.
    fallback: Option<(usize, u64, usize)>,
}

impl Adapt {
    /// The policy of a pool of `nth` threads.
    pub fn new(nth: usize) -> Adapt {
        let mut levels = vec![nth.max(1)];
        while let Some(&l) = levels.last().filter(|&&l| l > 1) {
            levels.push(l / 2);
        }
        Adapt {
            levels,
            cur: 0,
            recent: Vec::with_capacity(WINDOW),
            best: u64::MAX,
            since: 0,
            // the first try may come after one run, once the time run allows one
            // ([`Adapt::try_budget`]): a busy machine is found within a fraction of a second
            interval: 1,
            trying: None,
            down_next: true,
            since_ns: 0,
            wait_ns: 0,
            fallback: None,
        }
    }

    /// Time to run at the count in use before any try. A try may lose up to about its
    /// [`TRY_RUNS`] runs' time: up to [`FREE_TRY_LOSS_NS`] that is not waited for (decode
    /// steps, whose tries must find a busy machine at once, and under contention run slow);
    /// beyond it the try waits until that loss is [`TRY_COST_SHARE`] of the time run, so a
    /// prompt chunk's graph that takes seconds and runs a few times is not tried at fewer
    /// threads (it was: its second to fourth runs went at one thread, halving a prefill).
    fn try_budget(&self) -> u64 {
        if self.recent.is_empty() {
            return u64::MAX;
        }
        let loss = TRY_RUNS as u64 * median(&self.recent);
        if loss <= FREE_TRY_LOSS_NS {
            return 0;
        }
        (loss as f64 / TRY_COST_SHARE) as u64
    }

    /// The thread count for the next run.
    pub fn threads(&mut self) -> usize {
        if self.trying.is_none()
            && self.levels.len() > 1
            && self.since >= self.interval
            && self.since_ns >= self.wait_ns.max(self.try_budget())
        {
            let down = self.cur + 1 < self.levels.len();
            let up = self.cur > 0;
            let go_down = down && (self.down_next || !up);
            self.down_next = !go_down;
            let t = if go_down { self.cur + 1 } else { self.cur - 1 };
            self.trying = Some((t, Vec::with_capacity(TRY_RUNS)));
        }
        self.levels[self.trying.as_ref().map_or(self.cur, |t| t.0)]
    }

    /// Record the duration of the run started after [`Adapt::threads`].
    pub fn record(&mut self, ns: u64) {
        if let Some((t, runs)) = self.trying.as_mut() {
            runs.push(ns);
            let here = if self.recent.is_empty() {
                u64::MAX
            } else {
                median(&self.recent)
            };
            // a run far slower than the count in use ends the try at once (waking a thread
            // whose core another process holds can take many milliseconds)
            let hopeless = ns as f64 > 4.0 * here as f64;
            if runs.len() < TRY_RUNS && !hopeless {
                return;
            }
            let (t, tried) = (*t, if hopeless { ns } else { median(runs) });
            let lost = runs
                .iter()
                .sum::<u64>()
                .saturating_sub(here.saturating_mul(runs.len() as u64));
            self.trying = None;
            self.since = 0;
            self.since_ns = 0;
            if (tried as f64) < 0.9 * here as f64 {
                self.fallback = (t < self.cur).then_some((self.cur, here, WINDOW));
                self.cur = t;
                self.recent.clear();
                self.best = tried;
                self.interval = MIN_INTERVAL;
                self.wait_ns = 0;
            } else {
                self.interval = (self.interval * 2).min(MAX_INTERVAL);
                self.wait_ns = (lost as f64 / TRY_COST_SHARE) as u64;
            }
            return;
        }
        if let Some((level, median_there, left)) = self.fallback {
            // a move to more threads that a stalled run contradicts is undone at once: the
            // try was lucky, a core is taken after all
            if ns as f64 > 4.0 * median_there as f64 {
                self.fallback = None;
                self.cur = level;
                self.recent.clear();
                self.best = median_there;
                self.since = 0;
                self.since_ns = 0;
                self.interval = (self.interval * 2).min(MAX_INTERVAL);
                self.wait_ns = (ns.saturating_sub(median_there) as f64 / TRY_COST_SHARE) as u64;
                return;
            }
            self.fallback = (left > 1).then_some((level, median_there, left - 1));
        }
        self.since += 1;
        self.since_ns = self.since_ns.saturating_add(ns);
        if self.recent.len() == WINDOW {
            self.recent.remove(0);
        }
        self.recent.push(ns);
        if self.recent.len() >= 3 {
            let now = median(&self.recent);
            self.best = self.best.min(now);
            if now as f64 > 1.5 * self.best as f64 {
                // much slower than this count was: the load changed, look around soon
                self.interval = MIN_INTERVAL;
                self.since = self.since.min(MIN_INTERVAL);
                self.best = now;
            }
        }
    }

    /// The thread count in use (between tries).
    pub fn current(&self) -> usize {
        self.levels[self.cur]
    }

    /// The thread counts it chooses from.
    pub fn levels(&self) -> &[usize] {
        &self.levels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drive the policy with run times from `cost(threads, run)`; the counts it ran with.
    fn drive(a: &mut Adapt, runs: usize, cost: impl Fn(usize, usize) -> u64) -> Vec<usize> {
        (0..runs)
            .map(|i| {
                let t = a.threads();
                a.record(cost(t, i));
                t
            })
            .collect()
    }

    /// A prompt chunk's graph, seconds per run and run a few times, is never tried at fewer
    /// threads: a try would cost more than the share tries may take.
    #[test]
    fn long_runs_are_not_tried_at_fewer_threads() {
        let mut a = Adapt::new(2);
        let used = drive(&mut a, 12, |t, _| 5_000_000_000 / t as u64);
        assert!(used.iter().all(|&t| t == 2), "{used:?}");
    }

    #[test]
    fn stays_at_all_threads_when_they_are_fastest() {
        let mut a = Adapt::new(8);
        let used = drive(&mut a, 5000, |t, _| 1000 / t as u64 + 10);
        assert_eq!(a.current(), 8);
        let off = used.iter().filter(|&&t| t != 8).count();
        assert!(off < 40, "{off} runs away from 8 threads");
    }

    #[test]
    fn moves_to_fewer_threads_under_contention_and_back() {
        let mut a = Adapt::new(2);
        // one core busy: 2 threads take 4x as long as 1, and one run in 7 is stalled 4x by
        // the scheduler whatever the count
        let busy = |t: usize, i: usize| {
            (if t == 2 { 4000 } else { 1000 }) * if i.is_multiple_of(7) { 4 } else { 1 }
        };
        drive(&mut a, 60, busy);
        assert_eq!(a.current(), 1);
        let used = drive(&mut a, 5000, busy);
        let slow = used.iter().filter(|&&t| t == 2).count();
        assert!(slow < 60, "{slow} slow runs in 5000");
        // the other process ends: 2 threads are faster again, found within an interval
        drive(&mut a, 2 * MAX_INTERVAL as usize + 10, |t, _| {
            if t == 2 {
                600
            } else {
                1000
            }
        });
        assert_eq!(a.current(), 2);
    }

    /// As measured on a 2-core host with one core busy: a 2-thread run usually takes 10x one
    /// thread's and one in five stalls for 60x (a descheduled worker); 1-thread runs come in
    /// phases, one run in ten 2x slower for 12 runs at a time, which look like a change of
    /// load. Tries may take only a few percent of the time.
    #[test]
    fn expensive_tries_take_a_small_share_of_the_time() {
        let mut a = Adapt::new(2);
        let cost = |t: usize, i: usize| -> u64 {
            let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 59;
            if t == 2 {
                if h.is_multiple_of(5) {
                    60_000
                } else {
                    10_000
                }
            } else if i % 120 < 12 {
                2_000
            } else {
                1_000
            }
        };
        let mut at = [0u64; 3];
        for i in 0..20_000 {
            let t = a.threads();
            let ns = cost(t, i);
            a.record(ns);
            at[t] += ns;
        }
        assert_eq!(a.current(), 1);
        let share = at[2] as f64 / (at[1] + at[2]) as f64;
        assert!(
            share < 0.08,
            "{:.1}% of the time at 2 threads",
            share * 100.0
        );
    }

    #[test]
    fn one_thread_never_tries() {
        let mut a = Adapt::new(1);
        assert!(drive(&mut a, 100, |_, _| 5).iter().all(|&t| t == 1));
    }
}
