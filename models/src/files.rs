//! Opening and reading the files a user names, safely: only regular files are opened (a FIFO,
//! socket or device given as a model, config or prompt would block forever or read without
//! end), and a file read into memory has a size cap suited to what it is. Every loader and
//! the CLI read through here; errors are `std::io::Error`s whose message says what is wrong,
//! so each caller's error names the file as it always has.

use std::fs::File;
use std::io::{Error, ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

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
}
