//! Opening, mapping and writing the files a user names, safely:
//!
//! * only regular files are opened (a FIFO, socket or device given as a model, config or
//!   prompt would block forever or read without end), and a file read into memory has a size
//!   cap suited to what it is ([`open_regular`], [`read_capped`]);
//! * model files are mapped through [`map_readonly`], which records each mapping so that a
//!   `SIGBUS` (the file truncated under the process) can be reported naming the file
//!   ([`mapped_file_at`], for the CLI's signal handler);
//! * outputs are written whole or not at all ([`write_atomic`]: a temporary file beside the
//!   target, synced, then renamed; removed again if the process is stopped by a fault
//!   ([`remove_in_flight`])).
//!
//! Errors are `std::io::Error`s whose message says what is wrong, so each caller's error
//! names the file as it always has.

use memmap2::Mmap;
use std::ffi::CString;
use std::fs::File;
use std::io::{Error, ErrorKind, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Cap of a JSON or TOML configuration file (config.json, generation_config.json, a MoE
/// config): far above any real one.
pub const CONFIG_CAP: u64 = 16 << 20;
/// Cap of a tokenizer file or a safetensors index (DeepSeek-V4's `tokenizer.json` is ~8 MB).
pub const LARGE_JSON_CAP: u64 = 256 << 20;
/// Cap of a text file given as a prompt or evaluation text.
pub const TEXT_CAP: u64 = 256 << 20;

fn kind_name(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Open `path` for reading, refusing anything but a regular file (symbolic links are
/// followed). The open itself never blocks: it is non-blocking, and the type is checked on
/// the opened file, so a FIFO swapped in after a check cannot hang it either.
pub fn open_regular(path: &Path) -> Result<File, Error> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let t = f.metadata()?.file_type();
    if !t.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{}, not a regular file", kind_name(t)),
        ));
    }
    Ok(f)
}

/// Whether `path` is a regular file (following links); `false` when it cannot be read.
pub fn is_regular(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Read all of `path` (a regular file) if it holds at most `cap` bytes of `what`.
pub fn read_capped(path: &Path, cap: u64, what: &str) -> Result<Vec<u8>, Error> {
    let f = open_regular(path)?;
    let len = f.metadata()?.len();
    let too_big = |n: u64| {
        Error::new(
            ErrorKind::InvalidData,
            format!(
                "{n} bytes is more than a {what} may be ({} MiB at most)",
                cap >> 20
            ),
        )
    };
    if len > cap {
        return Err(too_big(len));
    }
    let mut out = Vec::with_capacity(len as usize);
    // the file may grow while being read: never past the cap
    f.take(cap + 1).read_to_end(&mut out)?;
    if out.len() as u64 > cap {
        return Err(too_big(out.len() as u64));
    }
    Ok(out)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_text_capped(path: &Path, cap: u64, what: &str) -> Result<String, Error> {
    String::from_utf8(read_capped(path, cap, what)?).map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// Slots of the mapping and in-flight registries: read lock-free by a signal handler.
const SLOTS: usize = 256;

struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    /// A leaked NUL-terminated path (null: free).
    path: AtomicPtr<libc::c_char>,
}

#[allow(clippy::declare_interior_mutable_const)] // only to initialise the arrays below
const FREE: Slot = Slot {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    path: AtomicPtr::new(std::ptr::null_mut()),
};
static MAPPED: [Slot; SLOTS] = [FREE; SLOTS];
static IN_FLIGHT: [Slot; 8] = [FREE; 8];

fn c_path(p: &Path) -> *mut libc::c_char {
    CString::new(p.as_os_str().as_bytes())
        .unwrap_or_default()
        .into_raw()
}

/// Record `path` in a free slot of `table` (with a range); the slot index, or `None` when
/// the table is full (the record is best effort: only messages depend on it).
fn claim(table: &[Slot], path: &Path, start: usize, len: usize) -> Option<usize> {
    let p = c_path(path);
    for (i, s) in table.iter().enumerate() {
        if s.path
            .compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            s.start.store(start, Ordering::Release);
            s.len.store(len, Ordering::Release);
            return Some(i);
        }
    }
    // SAFETY: `p` came from `CString::into_raw` above and was not stored anywhere.
    drop(unsafe { CString::from_raw(p) });
    None
}

fn release(table: &[Slot], i: usize) {
    let s = &table[i];
    s.len.store(0, Ordering::Release);
    let p = s.path.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !p.is_null() {
        // SAFETY: every non-null path in a slot came from `CString::into_raw` in `claim`,
        // and the swap above took it out of the slot, so it is freed once.
        drop(unsafe { CString::from_raw(p) });
    }
}

/// A read-only mapping of a whole file, recorded (see the module docs) while it lives.
pub struct Mapping {
    map: Mmap,
    slot: Option<usize>,
}

impl std::ops::Deref for Mapping {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Mapping {
    /// Asks the kernel to read `len` bytes at `offset` ahead, in large reads
    /// (`madvise(MADV_WILLNEED)`); a hint, so a failure is ignored.
    pub fn will_need(&self, offset: usize, len: usize) {
        let _ = self
            .map
            .advise_range(memmap2::Advice::WillNeed, offset, len);
    }
}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        &self.map
    }
}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mapping({} bytes)", self.map.len())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            release(&MAPPED, i);
        }
    }
}

/// Map `file` (opened from `path`) read-only.
///
/// The bytes of a mapping change if another process writes the file, and reading past a
/// truncation raises `SIGBUS`: model files must be replaced by rename, never modified in
/// place (the CLI turns a `SIGBUS` into an error naming the file, [`mapped_file_at`]).
pub fn map_readonly(file: &File, path: &Path) -> Result<Mapping, Error> {
    // SAFETY: a read-only private mapping; this process never writes the file, and the bytes
    // changing underneath (another process writing it in place) is the documented misuse
    // above, reported by the CLI when it faults.
    let map = unsafe { Mmap::map(file) }?;
    let slot = claim(&MAPPED, path, map.as_ptr() as usize, map.len());
    Ok(Mapping { map, slot })
}

/// Address space for `len` bytes that read as zeros and take no memory: the stand-in bytes
/// of a weight whose contents only ever come through its expert source (an official
/// checkpoint's routed experts paged by the expert cache: they exist in the file as one
/// tensor per expert, never as the stack the graph declares). Read-only and reserved without
/// swap accounting, so a stack larger than RAM costs page tables only if something reads it.
pub fn zero_reservation(len: usize) -> Result<Mmap, Error> {
    memmap2::MmapOptions::new()
        .len(len.max(1))
        .no_reserve_swap()
        .map_anon()?
        .make_read_only()
}

/// The path of the mapped file holding address `addr`, as a NUL-terminated C string, for a
/// signal handler (lock-free and allocation-free; null when no mapping holds it).
pub fn mapped_file_at(addr: usize) -> *const libc::c_char {
    for s in &MAPPED {
        let p = s.path.load(Ordering::Acquire);
        let (start, len) = (
            s.start.load(Ordering::Acquire),
            s.len.load(Ordering::Acquire),
        );
        if !p.is_null() && addr >= start && addr - start < len {
            return p;
        }
    }
    std::ptr::null()
}

/// Remove every temporary file [`write_atomic`] is writing: from a signal handler, before
/// the process ends (only `unlink`, which is async-signal-safe).
pub fn remove_in_flight() {
    for s in &IN_FLIGHT {
        let p = s.path.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: `p` is a valid NUL-terminated path owned by the slot.
            unsafe { libc::unlink(p) };
        }
    }
}

/// Write `path` whole or not at all: `write` fills a temporary file beside it, which is
/// synced and renamed over `path`; on any error (or a fault, see [`remove_in_flight`]) the
/// temporary file is removed and `path` is untouched. A `path` that exists and is not a
/// regular file (`/dev/null`, a FIFO) is written directly: it cannot be renamed over.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<(), Error>,
) -> Result<(), Error> {
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
        return write(&mut f);
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp: PathBuf = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let slot = claim(&IN_FLIGHT, &tmp, 0, 0);
    let r = (|| {
        let f = File::create(&tmp)?;
        let mut b = std::io::BufWriter::with_capacity(1 << 20, f);
        write(&mut b)?;
        let f = b.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    if let Some(i) = slot {
        release(&IN_FLIGHT, i);
    }
    r
}

/// The starting value of [`fnv1a`].
pub const FNV1A_START: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a (64 bits) of `bytes`, continuing from `h` ([`FNV1A_START`] to begin): the checksum
/// of the files fathom writes for itself (session states, prefix snapshots).
pub fn fnv1a(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_and_only_up_to_the_cap() {
        let dir = std::env::temp_dir().join(format!("fathom-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.txt");
        std::fs::write(&f, b"hello").unwrap();
        assert_eq!(read_capped(&f, 5, "test").unwrap(), b"hello");
        let e = read_capped(&f, 4, "test file").unwrap_err();
        assert!(
            e.to_string().contains("5 bytes") && e.to_string().contains("test file"),
            "{e}"
        );
        // a directory, a FIFO, a character device, a link to one: refused at once
        let fifo = dir.join("p");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let link = dir.join("l");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        for (p, says) in [
            (dir.as_path(), "directory"),
            (fifo.as_path(), "FIFO"),
            (Path::new("/dev/zero"), "character device"),
            (link.as_path(), "character device"),
        ] {
            let e = read_capped(p, 1 << 20, "test").unwrap_err();
            assert!(e.to_string().contains(says), "{}: {e}", p.display());
            assert!(!is_regular(p));
        }
        let e = read_text_capped(
            &{
                let b = dir.join("b");
                std::fs::write(&b, [b'o', b'k', 0xff]).unwrap();
                b
            },
            100,
            "t",
        )
        .unwrap_err();
        assert!(e.to_string().contains("offset 2"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn mappings_are_found_by_address_while_they_live() {
        let dir = std::env::temp_dir().join(format!("fathom-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("m.bin");
        std::fs::write(&p, vec![7u8; 10000]).unwrap();
        let m = map_readonly(&File::open(&p).unwrap(), &p).unwrap();
        let at = m.as_ptr() as usize + 9999;
        let found = mapped_file_at(at);
        assert!(!found.is_null());
        // SAFETY: a NUL-terminated path owned by the live slot.
        let s = unsafe { std::ffi::CStr::from_ptr(found) };
        assert_eq!(s.to_bytes(), p.as_os_str().as_bytes());
        assert!(mapped_file_at(at + 1).is_null() || mapped_file_at(at + 1) != found);
        drop(m);
        assert!(mapped_file_at(at).is_null(), "released on drop");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn atomic_writes_are_whole_or_absent() {
        let dir = std::env::temp_dir().join(format!("fathom-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("out.bin");
        std::fs::write(&p, b"old").unwrap();
        // a failing writer leaves the old file and no temporary file
        let e = write_atomic(&p, |w: &mut dyn Write| {
            w.write_all(b"half")?;
            Err(Error::other("disk full"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("disk full"));
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary left"
        );
        write_atomic(&p, |w: &mut dyn Write| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        // /dev/null is written in place, not replaced
        write_atomic(Path::new("/dev/null"), |w: &mut dyn Write| {
            w.write_all(b"x")
        })
        .unwrap();
        assert!(!std::fs::metadata("/dev/null").unwrap().is_file());
        std::fs::remove_dir_all(&dir).ok();
    }
}
