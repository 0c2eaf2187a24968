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
//! [`graph::Pinned`] handle alive) or being read is never evicted; when nothing can be evicted the
//! cache goes over budget rather than deadlock (by at most the pins of the running node and
//! the reads in flight) and reports the peak.
//!
//! Counters ([`ExpertCacheStats`]): a *hit* is an expert a node asked for that was already
//! resident without a read made for this use; a *miss* needed a read (made by this request or
//! by a sibling tensor's request of the same layer); a *wasted* read was evicted before use.
//!
//! Layout: this file holds the cache, its configuration, counters and shared state;
//! `source.rs` the per-tensor source (requests, read-ahead, pins, promotion to the protected
//! segment); `io.rs` the reads, the I/O threads and eviction.

use graph::ExpertSource;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

mod io;
mod source;
#[cfg(test)]
mod tests;

use io::{io_loop, Buf};
pub use source::PagedExperts;

/// `O_DIRECT` offsets, lengths and buffers are aligned to this.
const ALIGN: usize = 4096;

/// The share of the budget the protected (used twice or more) segment may hold.
pub const PROTECTED_SHARE: f64 = 0.75;

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

/// What the cache has done since it was made (counters; [`ExpertCacheStats::since`] gives
/// the difference between two snapshots) and holds now (gauges).
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
    /// Its length when opened.
    len: u64,
}

/// A piece of a file that an expert is assembled from (the official checkpoint keeps each
/// expert's values and scales in tensors of their own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpertPart {
    /// The file.
    pub path: PathBuf,
    /// Its first byte.
    pub offset: u64,
    /// Its length.
    pub len: u64,
}

/// Turns expert `e`'s parts, read in order, into the bytes nodes use (`out`: the expert's
/// length, zeroed); an error says what is wrong with the parts' bytes.
pub type ExpertConvert =
    Arc<dyn Fn(usize, &[&[u8]], &mut [u8]) -> Result<(), String> + Send + Sync>;

/// Where a paged tensor's experts are in its files.
enum Layout {
    /// `stride` apart from `offset` of one file, used as read (a GGUF stack).
    Strided {
        file: Arc<ReadFile>,
        /// File offset of expert 0.
        offset: u64,
        /// Bytes between experts (`nb[2]`).
        stride: u64,
    },
    /// Each expert assembled from its parts and converted (an official checkpoint).
    Parts {
        experts: Vec<Vec<(Arc<ReadFile>, ExpertPart)>>,
        convert: ExpertConvert,
    },
}

/// One paged expert tensor.
struct TensorSpec {
    name: String,
    layout: Layout,
    /// Bytes of one expert as nodes use it.
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

impl State {
    /// Drops entry `key`, taking its bytes off what is held (and off the protected segment).
    fn remove(&mut self, key: (u32, u32)) -> Option<Entry> {
        let v = self.entries.remove(&key)?;
        self.used -= v.bytes;
        if v.protected {
            self.protected -= v.bytes;
        }
        Some(v)
    }
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
        let file = self.open_file(&mut st, path)?;
        let end = u64::from(experts.max(1) - 1)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(offset))
            .and_then(|x| x.checked_add(len));
        if end.is_none_or(|e| e > file.len) || len > stride.max(len) {
            return Err(ExpertCacheError::Outside {
                path: path.to_path_buf(),
                name: name.to_string(),
            });
        }
        let layout = Layout::Strided {
            file,
            offset,
            stride,
        };
        Ok(self.push(&mut st, name, layout, len, experts, group))
    }

    /// Pages the experts of the tensor `name`, expert `e` assembled from `parts[e]` (read
    /// in order) by `convert` into `len` bytes; `group` as for [`ExpertCache::add_tensor`].
    pub fn add_tensor_parts(
        &self,
        name: &str,
        parts: Vec<Vec<ExpertPart>>,
        len: u64,
        convert: ExpertConvert,
        group: u32,
    ) -> Result<Arc<PagedExperts>, ExpertCacheError> {
        let mut st = self.shared.lock();
        let mut experts = Vec::with_capacity(parts.len());
        for expert in parts {
            let mut v = Vec::with_capacity(expert.len());
            for part in expert {
                let file = self.open_file(&mut st, &part.path)?;
                if part
                    .offset
                    .checked_add(part.len)
                    .is_none_or(|e| e > file.len)
                {
                    return Err(ExpertCacheError::Outside {
                        path: part.path.clone(),
                        name: name.to_string(),
                    });
                }
                v.push((file, part));
            }
            experts.push(v);
        }
        let n = u32::try_from(experts.len()).unwrap_or(u32::MAX);
        let layout = Layout::Parts { experts, convert };
        Ok(self.push(&mut st, name, layout, len, n, group))
    }

    /// The file at `path`, opened once for every tensor that reads it.
    fn open_file(&self, st: &mut State, path: &Path) -> Result<Arc<ReadFile>, ExpertCacheError> {
        if let Some(f) = st.files.get(path) {
            return Ok(f.clone());
        }
        let open_err = |source| ExpertCacheError::Open {
            path: path.to_path_buf(),
            source,
        };
        let buffered = File::open(path).map_err(open_err)?;
        let len = buffered.metadata().map_err(open_err)?.len();
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
            len,
        });
        st.files.insert(path.to_path_buf(), f.clone());
        Ok(f)
    }

    fn push(
        &self,
        st: &mut State,
        name: &str,
        layout: Layout,
        len: u64,
        experts: u32,
        group: u32,
    ) -> Arc<PagedExperts> {
        let id = st.tensors.len() as u32;
        st.tensors.push(TensorSpec {
            name: name.to_string(),
            layout,
            len,
            experts,
            group,
        });
        st.groups.entry(group).or_default().push(id);
        Arc::new(PagedExperts {
            shared: self.shared.clone(),
            tensor: id,
            len: len as usize,
        })
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
                st.remove(k);
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

/// Where expert `e` starts in its page-aligned buffer (a strided expert is read with the
/// pages around it; an assembled one is written from the start).
fn in_page(t: &TensorSpec, e: u32) -> usize {
    match &t.layout {
        Layout::Strided { offset, stride, .. } => {
            ((offset + u64::from(e) * stride) % ALIGN as u64) as usize
        }
        Layout::Parts { .. } => 0,
    }
}
