//! How many of its threads an executor runs a plan with: all of them, unless measurements say
//! fewer are faster. When other processes take some of the cores, every barrier waits for a
//! thread that is not running: a 2-thread decode on 2 cores with one core busy fell from ~840
//! to ~220 tokens/s, below one thread's ~840.
//!
//! The policy keeps the last run times at the thread count in use and judges by their median
//! (one run stalled by the scheduler does not count). Every `interval` runs it tries a
//! neighbouring count (all threads, then halving down to one) for [`TRY_RUNS`] runs, and moves
//! there when their median is clearly faster. The interval doubles each time a try confirms
//! the current count (up to [`MAX_INTERVAL`] runs, so that tries cost little once settled) and
//! falls back to [`MIN_INTERVAL`] when the current count gets much slower than it was (the
//! load on the machine changed). Every count gives the same bits (each output element is
//! computed by one thread), so switching never changes a result.

/// Runs between tries at first and after a change of load.
pub const MIN_INTERVAL: u32 = 3;
/// Most runs between tries.
pub const MAX_INTERVAL: u32 = 4096;
/// Runs of one try.
pub const TRY_RUNS: usize = 3;
/// Run times kept for the count in use.
const WINDOW: usize = 8;

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
            interval: MIN_INTERVAL,
            trying: None,
            down_next: true,
        }
    }

    /// The thread count for the next run.
    pub fn threads(&mut self) -> usize {
        if self.trying.is_none() && self.levels.len() > 1 && self.since >= self.interval {
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
            self.trying = None;
            self.since = 0;
            if (tried as f64) < 0.9 * here as f64 {
                self.cur = t;
                self.recent.clear();
                self.best = tried;
                self.interval = MIN_INTERVAL;
            } else {
                self.interval = (self.interval * 2).min(MAX_INTERVAL);
            }
            return;
        }
        self.since += 1;
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

    #[test]
    fn one_thread_never_tries() {
        let mut a = Adapt::new(1);
        assert!(drive(&mut a, 100, |_, _| 5).iter().all(|&t| t == 1));
    }
}
