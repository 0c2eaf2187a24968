//! The RAM-budgeted expert cache: routed experts read from the model file into memory on
//! demand, in large reads that bypass the page cache (`O_DIRECT`) where the file system allows
//! it, and evicted when the budget is full — so a model larger than RAM runs with a resident
//! set the user chose instead of whatever the memory map's page faults leave behind.
//!
//! Each expert tensor of a layer (`{K, N, E}`, an expert one contiguous `nb[2]` slice) gets
//! an [`ExpertSource`] ([`PagedExperts`]). A MUL_MAT_ID node asks for its experts as soon as
//! the router has chosen them ([`ExpertSource::request`]): the missing ones of *every* expert
//! tensor of that layer are queued at once (gate, then up, then down), so the up and down
//! matrices are read while the gate matmul runs. A small pool of I/O threads works the queue;
//! a compute thread that needs an expert still queued reads it itself rather than wait.
//!
//! Eviction is a segmented LRU: an expert used a second time since it was read moves to a
//! protected segment (at most [`PROTECTED_SHARE`] of the budget), so the few hot experts of
//! a layer survive a prompt chunk that touches every expert once. An expert in use (a
//! [`Pinned`] handle alive) or being read is never evicted; when nothing can be evicted the
//! cache goes over budget rather than deadlock (by at most the pins of the running node and
//! the reads in flight) and reports the peak.
//!
//! Counters ([`ExpertCacheStats`]): a *hit* is an expert a node asked for that was already
//! resident without a read made for this use; a *miss* needed a read (made by this request or
//! by a sibling tensor's request of the same layer); a *wasted* read was evicted before use.

use graph::{ExpertBytes, ExpertSource, Pinned};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

/// `O_DIRECT` offsets, lengths and buffers are aligned to this.
const ALIGN: usize = 4096;

/// The share of the budget the protected (used twice or more) segment may hold.
pub const PROTECTED_SHARE: f64 = 0.75;

/// One aligned page of an expert buffer.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(4096))]
struct Page([u8; ALIGN]);

/// An expert's bytes as read: whole pages, the expert at `at..at + len` of them.
struct Buf(Vec<Page>);

impl AsRef<[u8]> for Buf {
    fn as_ref(&self) -> &[u8] {
        bytemuck::cast_slice(&self.0)
    }
}

/// Each paged expert tensor's source, by tensor name (what [`super::GgufWeights`] attaches
/// to the weight nodes).
pub type PagedSources = HashMap<String, Arc<dyn ExpertSource>>;

/// How the cache runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpertCacheConfig {
    /// Bytes of expert buffers the cache keeps (it may go over by the experts in use, see the
    /// module doc).
    pub budget: u64,
    /// Threads reading from disk.
    pub io_threads: usize,
    /// Read with `O_DIRECT` where the file system allows it (else buffered reads whose pages
    /// are dropped from the page cache afterwards).
    pub direct: bool,
}

impl ExpertCacheConfig {
    /// A cache of `budget` bytes with the default I/O pool (four threads: they mostly wait
    /// on the disk) and `O_DIRECT`.
    pub fn with_budget(budget: u64) -> ExpertCacheConfig {
        ExpertCacheConfig {
            budget,
            io_threads: 4,
            direct: true,
        }
    }
}

/// What the cache has done since it was made (or since [`ExpertCache::reset_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ExpertCacheStats {
    /// Experts asked for that were resident.
    pub hits: u64,
    /// Experts asked for that needed a read.
    pub misses: u64,
    /// Reads evicted before any node used them.
    pub wasted: u64,
    /// Experts (of every tensor of the guessed layers) queued by a guess (EXPERT_PREFETCH).
    pub guessed: u64,
    /// Of those, the ones a node then used.
    pub guess_used: u64,
    /// Bytes read from disk.
    pub bytes_read: u64,
    /// Seconds spent in reads, summed over the threads that made them.
    pub read_secs: f64,
    /// Wall-clock seconds with at least one read in flight (`bytes_read / busy_secs` is the
    /// rate the disk delivered while the cache was reading).
    pub busy_secs: f64,
    /// Seconds compute threads waited for experts (or read them themselves).
    pub wait_secs: f64,
    /// Bytes of expert buffers held now.
    pub resident: u64,
    /// The most bytes held at once.
    pub peak: u64,
    /// The budget.
    pub budget: u64,
    /// Whether reads bypass the page cache.
    pub direct: bool,
}

impl ExpertCacheStats {
    /// What happened since `earlier` (a snapshot of the same cache): the counters' differences,
    /// the gauges (resident, peak, budget) as they are now.
    pub fn since(&self, earlier: &ExpertCacheStats) -> ExpertCacheStats {
        ExpertCacheStats {
            hits: self.hits.saturating_sub(earlier.hits),
            misses: self.misses.saturating_sub(earlier.misses),
            wasted: self.wasted.saturating_sub(earlier.wasted),
            guessed: self.guessed.saturating_sub(earlier.guessed),
            guess_used: self.guess_used.saturating_sub(earlier.guess_used),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            read_secs: (self.read_secs - earlier.read_secs).max(0.0),
            busy_secs: (self.busy_secs - earlier.busy_secs).max(0.0),
            wait_secs: (self.wait_secs - earlier.wait_secs).max(0.0),
            ..*self
        }
    }

    /// Hits over experts asked for (0 when none was).
    pub fn hit_rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            0.0
        } else {
            self.hits as f64 / n as f64
        }
    }
}

/// A file experts are read from.
#[derive(Debug)]
struct ReadFile {
    path: PathBuf,
    buffered: File,
    direct: Option<File>,
    /// Cleared when the file system refuses an `O_DIRECT` read.
    direct_ok: AtomicBool,
}

/// One paged expert tensor.
#[derive(Debug)]
struct TensorSpec {
    name: String,
    file: Arc<ReadFile>,
    /// File offset of expert 0.
    offset: u64,
    /// Bytes between experts (`nb[2]`).
    stride: u64,
    /// Bytes of one expert.
    len: u64,
    experts: u32,
    /// The layer whose tensors are requested together.
    group: u32,
}

enum Slot {
    /// Waiting for a reader.
    Queued,
    /// Being read.
    Loading,
    /// Resident.
    Ready(Arc<Buf>),
    /// The read failed (the error is kept by the cache).
    Failed,
}

struct Entry {
    slot: Slot,
    /// Bytes of its buffer (0 while queued).
    bytes: u64,
    /// Last use, in cache ticks.
    tick: u64,
    /// In the protected segment.
    protected: bool,
    /// Read for a use that has not yet been counted as a miss.
    fresh: bool,
    /// Queued by a guess and not yet used.
    guessed: bool,
}

struct State {
    tensors: Vec<TensorSpec>,
    groups: HashMap<u32, Vec<u32>>,
    files: HashMap<PathBuf, Arc<ReadFile>>,
    entries: HashMap<(u32, u32), Entry>,
    /// Experts nodes asked for, read first.
    queue: VecDeque<(u32, u32)>,
    /// Experts guessed for later layers, read when `queue` is empty.
    guesses: VecDeque<(u32, u32)>,
    budget: u64,
    used: u64,
    protected: u64,
    peak: u64,
    tick: u64,
    /// Reads in flight, and since when at least one has been.
    in_flight: u32,
    busy_since: Option<Instant>,
    shutdown: bool,
    error: Option<String>,
}

#[derive(Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    wasted: AtomicU64,
    guessed: AtomicU64,
    guess_used: AtomicU64,
    bytes_read: AtomicU64,
    read_ns: AtomicU64,
    busy_ns: AtomicU64,
    wait_ns: AtomicU64,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when an entry finishes loading.
    loaded: Condvar,
    /// Signalled when the queue grows (or at shutdown).
    work: Condvar,
    counters: Counters,
    direct: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The cache: its budget, its entries, its I/O threads. Dropping it stops the threads.
pub struct ExpertCache {
    shared: Arc<Shared>,
    io: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for ExpertCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ExpertCache({} bytes)", self.shared.lock().budget)
    }
}

/// Errors of [`ExpertCache::add_tensor`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExpertCacheError {
    /// The file experts are read from cannot be opened.
    #[error("{}: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The tensor's experts are not inside the file.
    #[error("{}: expert tensor '{name}' lies outside the file", path.display())]
    Outside {
        /// The file.
        path: PathBuf,
        /// The tensor.
        name: String,
    },
}

impl ExpertCache {
    /// An empty cache.
    pub fn new(cfg: ExpertCacheConfig) -> ExpertCache {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                tensors: Vec::new(),
                groups: HashMap::new(),
                files: HashMap::new(),
                entries: HashMap::new(),
                queue: VecDeque::new(),
                guesses: VecDeque::new(),
                budget: cfg.budget,
                used: 0,
                protected: 0,
                peak: 0,
                tick: 0,
                in_flight: 0,
                busy_since: None,
                shutdown: false,
                error: None,
            }),
            loaded: Condvar::new(),
            work: Condvar::new(),
            counters: Counters::default(),
            direct: cfg.direct,
        });
        let io = (0..cfg.io_threads)
            .filter_map(|i| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("fathom-io-{i}"))
                    .spawn(move || io_loop(&s))
                    .ok()
            })
            .collect();
        ExpertCache { shared, io }
    }

    /// Pages the experts of the tensor `name`: `experts` slices of `len` bytes, `stride`
    /// apart from byte `offset` of `path`; `group` is the layer whose expert tensors are
    /// requested together. Returns the tensor's source for its weight node.
    #[allow(clippy::too_many_arguments)]
    pub fn add_tensor(
        &self,
        name: &str,
        path: &Path,
        offset: u64,
        stride: u64,
        len: u64,
        experts: u32,
        group: u32,
    ) -> Result<Arc<PagedExperts>, ExpertCacheError> {
        let mut st = self.shared.lock();
        let file = match st.files.get(path) {
            Some(f) => f.clone(),
            None => {
                let open_err = |source| ExpertCacheError::Open {
                    path: path.to_path_buf(),
                    source,
                };
                let buffered = File::open(path).map_err(open_err)?;
                let direct = if self.shared.direct {
                    std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(libc::O_DIRECT)
                        .open(path)
                        .ok()
                } else {
                    None
                };
                let f = Arc::new(ReadFile {
                    path: path.to_path_buf(),
                    direct_ok: AtomicBool::new(direct.is_some()),
                    buffered,
                    direct,
                });
                st.files.insert(path.to_path_buf(), f.clone());
                f
            }
        };
        let file_len = file
            .buffered
            .metadata()
            .map_err(|source| ExpertCacheError::Open {
                path: path.to_path_buf(),
                source,
            })?
            .len();
        let end = u64::from(experts.max(1) - 1)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(offset))
            .and_then(|x| x.checked_add(len));
        if end.is_none_or(|e| e > file_len) || len > stride.max(len) {
            return Err(ExpertCacheError::Outside {
                path: path.to_path_buf(),
                name: name.to_string(),
            });
        }
        let id = st.tensors.len() as u32;
        st.tensors.push(TensorSpec {
            name: name.to_string(),
            file,
            offset,
            stride,
            len,
            experts,
            group,
        });
        st.groups.entry(group).or_default().push(id);
        Ok(Arc::new(PagedExperts {
            shared: self.shared.clone(),
            tensor: id,
            len: len as usize,
        }))
    }

    /// Bytes of every paged expert (what the memory map would otherwise page in).
    pub fn paged_bytes(&self) -> u64 {
        let st = self.shared.lock();
        st.tensors
            .iter()
            .map(|t| u64::from(t.experts) * t.len)
            .sum()
    }

    /// The largest expert, in bytes.
    pub fn largest_expert(&self) -> u64 {
        let st = self.shared.lock();
        st.tensors.iter().map(|t| t.len).max().unwrap_or(0)
    }

    /// Changes the budget (evicting down to it as experts are next read).
    pub fn set_budget(&self, budget: u64) {
        self.shared.lock().budget = budget;
    }

    /// The counters.
    pub fn stats(&self) -> ExpertCacheStats {
        let c = &self.shared.counters;
        let st = self.shared.lock();
        let direct = st
            .files
            .values()
            .all(|f| f.direct_ok.load(Ordering::Relaxed));
        ExpertCacheStats {
            hits: c.hits.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            wasted: c.wasted.load(Ordering::Relaxed),
            guessed: c.guessed.load(Ordering::Relaxed),
            guess_used: c.guess_used.load(Ordering::Relaxed),
            bytes_read: c.bytes_read.load(Ordering::Relaxed),
            read_secs: c.read_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            busy_secs: c.busy_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            wait_secs: c.wait_ns.load(Ordering::Relaxed) as f64 * 1e-9,
            resident: st.used,
            peak: st.peak,
            budget: st.budget,
            direct: self.shared.direct && direct,
        }
    }

    /// Zeroes the counters (the peak restarts from what is resident now).
    pub fn reset_stats(&self) {
        let c = &self.shared.counters;
        for a in [
            &c.hits,
            &c.misses,
            &c.wasted,
            &c.guessed,
            &c.guess_used,
            &c.bytes_read,
            &c.read_ns,
            &c.busy_ns,
            &c.wait_ns,
        ] {
            a.store(0, Ordering::Relaxed);
        }
        let mut st = self.shared.lock();
        st.peak = st.used;
    }

    /// The first read error since the last call, if any (the run that met it produced NaN
    /// for the rows of that expert; the session reports this instead).
    pub fn take_error(&self) -> Option<String> {
        let mut st = self.shared.lock();
        let e = st.error.take();
        if e.is_some() {
            // failed entries are dropped so that a later run reads them again
            let failed: Vec<_> = st
                .entries
                .iter()
                .filter(|(_, v)| matches!(v.slot, Slot::Failed))
                .map(|(&k, _)| k)
                .collect();
            for k in failed {
                if let Some(v) = st.entries.remove(&k) {
                    st.used -= v.bytes;
                    if v.protected {
                        st.protected -= v.bytes;
                    }
                }
            }
        }
        e
    }
}

impl Drop for ExpertCache {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.work.notify_all();
        for h in self.io.drain(..) {
            let _ = h.join();
        }
    }
}

/// One expert tensor's view of the cache (its weight node's [`ExpertSource`]).
pub struct PagedExperts {
    shared: Arc<Shared>,
    tensor: u32,
    len: usize,
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

/// Where expert `e` starts in its page-aligned buffer.
fn in_page(t: &TensorSpec, e: u32) -> usize {
    ((t.offset + u64::from(e) * t.stride) % ALIGN as u64) as usize
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

/// Evicts one resident expert no one holds (probation before protected, least recently
/// used first; failed entries first of all; for a prefetch (`!demand`), never one read
/// ahead and not yet used). Returns its buffer, or `None` when nothing can be evicted.
fn evict_one(shared: &Shared, st: &mut State, demand: bool) -> Option<Option<Buf>> {
    let key = st
        .entries
        .iter()
        .filter(|(_, v)| match &v.slot {
            Slot::Ready(b) => Arc::strong_count(b) == 1 && (demand || !v.fresh),
            Slot::Failed => true,
            _ => false,
        })
        .min_by_key(|(_, v)| (!matches!(v.slot, Slot::Failed), v.protected, v.tick))
        .map(|(&k, _)| k)?;
    let v = st.entries.remove(&key)?;
    st.used -= v.bytes;
    if v.protected {
        st.protected -= v.bytes;
    }
    if v.fresh {
        shared.counters.wasted.fetch_add(1, Ordering::Relaxed);
    }
    Some(match v.slot {
        Slot::Ready(b) => Arc::try_unwrap(b).ok(),
        _ => None,
    })
}

/// Reads queued entry `key` (the lock is released during the read and held again on
/// return). A prefetch (`!demand`: an I/O thread reading ahead) evicts only experts already
/// used and gives up, leaving the entry queued for the thread that will need it, when that
/// does not make room: reading ahead more than the budget holds would evict what was read
/// ahead before it is used.
fn load<'a>(
    shared: &'a Shared,
    mut st: MutexGuard<'a, State>,
    key: (u32, u32),
    demand: bool,
) -> MutexGuard<'a, State> {
    let t = &st.tensors[key.0 as usize];
    let file = t.file.clone();
    let name = t.name.clone();
    let at = in_page(t, key.1);
    let pos = t.offset + u64::from(key.1) * t.stride;
    let len = t.len as usize;
    let pages = (at + len).div_ceil(ALIGN);
    let bytes = (pages * ALIGN) as u64;
    // room first: evict until the buffer fits (or nothing more can go)
    let mut reuse = None;
    while st.used + bytes > st.budget {
        match evict_one(shared, &mut st, demand) {
            Some(b) => {
                if let Some(b) = b.filter(|b| b.0.len() == pages) {
                    reuse = Some(b);
                }
            }
            None if demand => break,
            None => return st,
        }
    }
    if let Some(ent) = st.entries.get_mut(&key) {
        ent.slot = Slot::Loading;
        ent.bytes = bytes;
    }
    st.used += bytes;
    st.peak = st.peak.max(st.used);
    let t0 = Instant::now();
    if st.in_flight == 0 {
        st.busy_since = Some(t0);
    }
    st.in_flight += 1;
    drop(st);
    let res = read_expert(&file, reuse, pages, pos - at as u64, at + len);
    shared
        .counters
        .read_ns
        .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    let mut st = shared.lock();
    st.in_flight -= 1;
    if st.in_flight == 0 {
        if let Some(since) = st.busy_since.take() {
            shared
                .counters
                .busy_ns
                .fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
    let slot = match res {
        Ok((buf, n)) => {
            shared.counters.bytes_read.fetch_add(n, Ordering::Relaxed);
            Slot::Ready(Arc::new(buf))
        }
        Err(e) => {
            st.error.get_or_insert_with(|| {
                format!(
                    "{}: reading expert {} of '{name}': {e}",
                    file.path.display(),
                    key.1
                )
            });
            Slot::Failed
        }
    };
    match st.entries.get_mut(&key) {
        Some(ent) => ent.slot = slot,
        // (entries are only removed when ready or failed, so this does not happen)
        None => st.used -= bytes,
    }
    shared.loaded.notify_all();
    st
}

/// Reads `need` bytes from `start` (page-aligned) of `file` into a buffer of `pages` pages
/// (`reuse`, or a new one); returns it and the bytes read.
fn read_expert(
    file: &ReadFile,
    reuse: Option<Buf>,
    pages: usize,
    start: u64,
    need: usize,
) -> std::io::Result<(Buf, u64)> {
    let mut buf = match reuse {
        Some(b) => b,
        None => {
            let mut v = Vec::new();
            v.try_reserve_exact(pages).map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    format!("no memory for a {} KiB expert buffer", pages * 4),
                )
            })?;
            v.resize(pages, Page([0; ALIGN]));
            Buf(v)
        }
    };
    let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut buf.0);
    if let (Some(f), true) = (&file.direct, file.direct_ok.load(Ordering::Relaxed)) {
        let mut done = 0usize;
        let mut ok = true;
        while done < need {
            match f.read_at(&mut dst[done..], start + done as u64) {
                Ok(0) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the file ends before the expert does",
                    ))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) && done == 0 => {
                    // the file system refuses O_DIRECT reads: buffered from now on
                    file.direct_ok.store(false, Ordering::Relaxed);
                    ok = false;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        if ok {
            return Ok((buf, done as u64));
        }
    }
    // buffered: only the expert's bytes, then their pages are dropped from the page cache
    // so the budget stays the memory the experts take
    file.buffered.read_exact_at(&mut dst[..need], start)?;
    // SAFETY: posix_fadvise only reads its arguments; the descriptor is open for the call.
    unsafe {
        libc::posix_fadvise(
            file.buffered.as_raw_fd(),
            start as libc::off_t,
            need as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
    Ok((buf, need as u64))
}

/// An I/O thread: reads queued experts until the cache is dropped.
fn io_loop(shared: &Shared) {
    let mut st = shared.lock();
    loop {
        if st.shutdown {
            return;
        }
        let Some(key) = st.queue.pop_front().or_else(|| st.guesses.pop_front()) else {
            st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        if matches!(st.entries.get(&key).map(|e| &e.slot), Some(Slot::Queued)) {
            st = load(shared, st, key, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `n` experts of `len` bytes, expert `e` filled with byte `e`.
    fn experts_file(dir: &Path, n: u8, len: usize) -> PathBuf {
        let p = dir.join("experts.bin");
        let mut v = vec![0xAAu8; 100]; // experts start off a page boundary
        for e in 0..n {
            v.extend(std::iter::repeat_n(e, len));
        }
        std::fs::write(&p, v).unwrap();
        p
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fathom-experts-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn pins_return_each_experts_bytes_and_eviction_keeps_the_budget() {
        let d = tmp("pins");
        let len = 5000;
        let p = experts_file(&d, 6, len);
        // two experts' pages (each 5000 bytes at offset 100 + e·5000 spans two pages)
        let cache = ExpertCache::new(ExpertCacheConfig {
            budget: 2 * 8192,
            io_threads: 1,
            direct: true,
        });
        let src = cache
            .add_tensor("t", &p, 100, len as u64, len as u64, 6, 0)
            .unwrap();
        for round in 0..2 {
            for e in [0usize, 3, 5, 3, 1] {
                src.request(&[e as u32]);
                let pin = src.pin(e).unwrap();
                assert_eq!(pin.bytes().len(), len);
                assert!(pin.bytes().iter().all(|&b| b == e as u8), "{round} {e}");
            }
        }
        let st = cache.stats();
        assert!(st.peak <= st.budget, "{st:?}");
        assert!(st.hits >= 1 && st.misses >= 4, "{st:?}");
        assert!(cache.take_error().is_none());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_used_twice_expert_outlives_a_scan_of_new_ones() {
        let d = tmp("slru");
        let p = experts_file(&d, 8, 4096);
        // room for four one-or-two-page experts; expert 0 is used twice, then 1..8 once each
        let cache = ExpertCache::new(ExpertCacheConfig {
            budget: 4 * 8192,
            io_threads: 0,
            direct: false,
        });
        let src = cache.add_tensor("t", &p, 100, 4096, 4096, 8, 0).unwrap();
        for e in [0usize, 0, 1, 2, 3, 4, 5, 6, 7] {
            src.request(&[e as u32]);
            drop(src.pin(e).unwrap());
        }
        let before = cache.stats();
        src.request(&[0]);
        drop(src.pin(0).unwrap());
        let after = cache.stats();
        assert_eq!(after.hits, before.hits + 1, "{after:?}");
        assert_eq!(after.bytes_read, before.bytes_read);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_read_gives_none_and_an_error_naming_the_file_and_tensor() {
        let d = tmp("fail");
        let p = experts_file(&d, 4, 4096);
        let cache = ExpertCache::new(ExpertCacheConfig {
            budget: 1 << 20,
            io_threads: 1,
            direct: true,
        });
        let src = cache
            .add_tensor("blk.3.ffn_up_exps.weight", &p, 100, 4096, 4096, 4, 3)
            .unwrap();
        // the file shrinks after it was opened (another program rewrote it)
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(5000)
            .unwrap();
        assert!(src.pin(3).is_none());
        let e = cache.take_error().unwrap();
        assert!(
            e.contains("experts.bin") && e.contains("blk.3.ffn_up_exps.weight"),
            "{e}"
        );
        assert!(e.contains("expert 3"), "{e}");
        // the first experts are still there
        assert!(src.pin(0).unwrap().bytes().iter().all(|&b| b == 0));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_tensor_outside_its_file_is_refused() {
        let d = tmp("outside");
        let p = experts_file(&d, 2, 4096);
        let cache = ExpertCache::new(ExpertCacheConfig::with_budget(1 << 20));
        let e = cache
            .add_tensor("x", &p, 100, 4096, 4096, 3, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'x'") && e.contains("experts.bin"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
