//! Every file a loader opens must be a regular file (a FIFO would block forever, a device
//! read without end), and every file read into memory has a cap: a clear error naming the
//! file, at once, for each kind of file and each kind of non-regular file.

use fathom_models::model::{open, LoadOptions};
use fathom_models::moe_config::MoeConfig;
use fathom_models::session::SessionState;
use fathom_models::tokenizer::Tokenizer;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(p)
}

fn tmp(tag: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("hostile-files-{tag}"));
    std::fs::remove_dir_all(&d).ok();
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "{}", p.display());
}

/// The non-regular things a path can be: a FIFO, a directory, a link to a character device.
fn make_bad(at: &Path, kind: &str) {
    std::fs::remove_file(at).ok();
    match kind {
        "fifo" => mkfifo(at),
        "dir" => std::fs::create_dir_all(at).unwrap(),
        "dev" => std::os::unix::fs::symlink("/dev/zero", at).unwrap(),
        _ => unreachable!(),
    }
}

const SAYS: [(&str, &str); 3] = [
    ("fifo", "FIFO"),
    ("dir", "directory"),
    ("dev", "character device"),
];

/// `f` fails within a second with a message naming `name` and `says`.
fn refused(what: &str, name: &str, says: &str, f: impl FnOnce() -> Result<(), String>) {
    let t0 = Instant::now();
    let e = f().expect_err(&format!("{what}: accepted"));
    assert!(t0.elapsed() < Duration::from_secs(1), "{what}: slow");
    assert!(e.contains(name) && e.contains(says), "{what}: {e}");
}

#[test]
fn a_model_path_that_is_not_a_regular_file() {
    for (kind, says) in SAYS.iter().filter(|(k, _)| *k != "dir") {
        let d = tmp(&format!("model-{kind}"));
        let p = d.join("m.gguf");
        make_bad(&p, kind);
        refused("model", "m.gguf", says, || {
            open(&p, &LoadOptions::default())
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
    }
}

#[test]
fn checkpoint_files_that_are_not_regular_files() {
    // each file of a sharded checkpoint in turn: a shard, the index, config.json
    for victim in [
        "model-00001-of-00002.safetensors",
        "model.safetensors.index.json",
        "config.json",
    ] {
        for (kind, says) in SAYS {
            let d = tmp(&format!("ckpt-{victim}-{kind}"));
            for f in std::fs::read_dir(fixture("dsv4-tiny-fp8")).unwrap() {
                let f = f.unwrap().path();
                if f.is_file() {
                    std::fs::copy(&f, d.join(f.file_name().unwrap())).unwrap();
                }
            }
            make_bad(&d.join(victim), kind);
            refused(&format!("{victim} as {kind}"), victim, says, || {
                open(&d, &LoadOptions::default())
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
        }
    }
    // a single-file checkpoint directory whose only .safetensors is a FIFO: named, not
    // "no .safetensors file"
    let d = tmp("single-fifo");
    std::fs::copy(fixture("dsv4-tiny/config.json"), d.join("config.json")).unwrap();
    make_bad(&d.join("model.safetensors"), "fifo");
    refused("single", "model.safetensors", "FIFO", || {
        open(&d, &LoadOptions::default())
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
}

#[test]
fn tokenizer_moe_config_and_state_files() {
    let src = fixture("tokenizer/dsv4-tiny-trained");
    for victim in ["tokenizer.json", "tokenizer_config.json"] {
        for (kind, says) in SAYS {
            let d = tmp(&format!("tok-{victim}-{kind}"));
            for f in std::fs::read_dir(&src).unwrap() {
                let f = f.unwrap().path();
                std::fs::copy(&f, d.join(f.file_name().unwrap())).unwrap();
            }
            make_bad(&d.join(victim), kind);
            refused(&format!("{victim} {kind}"), victim, says, || {
                Tokenizer::from_dir(&d)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
        }
    }
    for (kind, says) in SAYS {
        let d = tmp(&format!("moe-{kind}"));
        for name in ["moe.toml", "moe.bin"] {
            let p = d.join(name);
            make_bad(&p, kind);
            refused(&format!("moe {kind}"), name, says, || {
                MoeConfig::read(&p).map(|_| ()).map_err(|e| e.to_string())
            });
        }
        let p = d.join("state.fss");
        make_bad(&p, kind);
        refused(&format!("state {kind}"), "state.fss", "", || {
            SessionState::load(&p)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
    }
}

#[test]
fn files_read_into_memory_are_capped() {
    // sparse files just past each cap: refused from their size, nothing read
    let d = tmp("caps");
    let big = |name: &str, len: u64| {
        let p = d.join(name);
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(len).unwrap();
        p
    };
    let cfg = big("moe.toml", fathom_models::files::CONFIG_CAP + 1);
    refused("moe cap", "moe.toml", "MiB at most", || {
        MoeConfig::read(&cfg).map(|_| ()).map_err(|e| e.to_string())
    });
    let tdir = d.join("tok");
    std::fs::create_dir_all(&tdir).unwrap();
    let t = tdir.join("tokenizer.json");
    std::fs::File::create(&t)
        .unwrap()
        .set_len(fathom_models::files::LARGE_JSON_CAP + 1)
        .unwrap();
    refused("tokenizer cap", "tokenizer.json", "MiB at most", || {
        Tokenizer::from_dir(&tdir)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    let cdir = d.join("ckpt");
    std::fs::create_dir_all(&cdir).unwrap();
    std::fs::copy(
        fixture("dsv4-tiny/model.safetensors"),
        cdir.join("model.safetensors"),
    )
    .unwrap();
    std::fs::File::create(cdir.join("config.json"))
        .unwrap()
        .set_len(fathom_models::files::CONFIG_CAP + 1)
        .unwrap();
    refused("config cap", "config.json", "MiB at most", || {
        open(&cdir, &LoadOptions::default())
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
}
