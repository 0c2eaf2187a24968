//! The environment variables fathom reads: the only place in the workspace that reads any.
//! The library crates take their configuration as values ([`backends::ExecConfig`],
//! `models::LoadOptions`); every command fills them from its flags and from [`Env`], read
//! once at start-up. A value fathom cannot use is an error naming the variable, never
//! silently ignored.
//!
//! | variable | values | effect |
//! |---|---|---|
//! | `FATHOM_CPUS` | a CPU list, `0-7,16` | pin worker `i` to the `i`-th listed CPU; one thread per listed CPU unless `-t` is given |
//! | `FATHOM_PROFILE_OPS` | `1`, `json:PATH`, `trace:PATH`, `0` | the per-op profile: a table on stderr, JSON rows, a Chrome trace |
//! | `LLAMA_PROFILE_OPS` | the same | read when `FATHOM_PROFILE_OPS` is unset (for users of the seed's patched llama.cpp) |
//! | `FATHOM_FORCE_SCALAR` | `1`, `0` | run the scalar reference kernels on one thread (for bisecting numerics) |
//! | `FATHOM_CPU_LEVEL` | `scalar`, `avx2`, `avx2-vnni`, `avx512`, `avx512-vnni`, `avx512-bf16`, `amx` | run the kernels of that level, at most this CPU's (to measure or bisect a lower level's kernels; `avx2-vnni` needs AVX-VNNI) |
//! | `FATHOM_ST_WEIGHTS` | `default`, `q8_0`, `fp32`, `stacked` (comma-separated) | how a safetensors checkpoint's weights are stored (`--st-weights` wins) |
//! | `FATHOM_MOE_CONFIG` | a path | `run`'s live MoE configuration when `--moe-config` is not given |

use anyhow::{bail, Result};
use backends::profiler::ProfileOutput;
use backends::ExecConfig;
use quant::simd::CpuLevel;
use std::path::PathBuf;

/// Every environment variable fathom reads, with its one-line meaning (the table above; the
/// README's table is the same list).
pub const VARIABLES: &[(&str, &str)] = &[
    ("FATHOM_CPUS", "CPU list to pin the worker threads to"),
    (
        "FATHOM_PROFILE_OPS",
        "per-op profile: 1, json:PATH or trace:PATH",
    ),
    (
        "LLAMA_PROFILE_OPS",
        "the same, when FATHOM_PROFILE_OPS is unset",
    ),
    (
        "FATHOM_FORCE_SCALAR",
        "1: the scalar reference kernels on one thread",
    ),
    (
        "FATHOM_CPU_LEVEL",
        "kernels of a lower CPU level: scalar, avx2, avx512, avx512-vnni, avx512-bf16",
    ),
    (
        "FATHOM_ST_WEIGHTS",
        "checkpoint weight policy: default, q8_0, fp32 or stacked (comma-separated)",
    ),
    ("FATHOM_MOE_CONFIG", "run's live MoE configuration file"),
];

/// The `Environment:` section of `fathom --help`.
pub fn help() -> String {
    let mut s = String::from("Environment:\n");
    for (name, what) in VARIABLES {
        s.push_str(&format!("  {name:<20} {what}\n"));
    }
    s
}

/// What the environment says, validated.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `FATHOM_CPUS`.
    pub cpus: Option<Vec<usize>>,
    /// `FATHOM_PROFILE_OPS` / `LLAMA_PROFILE_OPS`.
    pub profile: Option<ProfileOutput>,
    /// `FATHOM_FORCE_SCALAR=1`.
    pub force_scalar: bool,
    /// `FATHOM_CPU_LEVEL`: the kernels' level, at most this CPU's (`None`: this CPU's).
    pub cpu_level: Option<CpuLevel>,
    /// `FATHOM_ST_WEIGHTS`, as given (parsed by the model loader's option parser).
    pub st_weights: Option<String>,
    /// `FATHOM_MOE_CONFIG`.
    pub moe_config: Option<PathBuf>,
}

/// A variable's value: `None` when unset or empty; an error when it is not UTF-8.
fn var(name: &str) -> Result<Option<String>> {
    match std::env::var(name) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => bail!("{name}: the value is not UTF-8"),
    }
}

impl Env {
    /// Reads and checks every variable of [`VARIABLES`].
    pub fn read() -> Result<Env> {
        let cpus = match var("FATHOM_CPUS")? {
            None => None,
            Some(v) => {
                let list = backends::topology::parse_cpu_list(&v)
                    .map_err(|e| anyhow::anyhow!("FATHOM_CPUS={v}: {e}"))?;
                let allowed = backends::topology::allowed_cpus();
                if let Some(c) = list
                    .iter()
                    .find(|c| !allowed.is_empty() && !allowed.contains(c))
                {
                    bail!(
                        "FATHOM_CPUS={v}: CPU {c} is not available to this process (available: {})",
                        backends::topology::format_cpu_list(&allowed)
                    );
                }
                if list.is_empty() {
                    bail!("FATHOM_CPUS={v}: no CPU listed");
                }
                Some(list)
            }
        };
        let (pname, pval) = match var("FATHOM_PROFILE_OPS")? {
            Some(v) => ("FATHOM_PROFILE_OPS", Some(v)),
            None => ("LLAMA_PROFILE_OPS", var("LLAMA_PROFILE_OPS")?),
        };
        let profile = match pval {
            None => None,
            Some(v) => backends::profiler::parse_setting(&v)
                .map_err(|e| anyhow::anyhow!("{pname}={v}: {e}"))?,
        };
        let force_scalar = match var("FATHOM_FORCE_SCALAR")?.as_deref().map(str::trim) {
            None | Some("0") => false,
            Some("1") => true,
            Some(v) => bail!("FATHOM_FORCE_SCALAR={v}: expected 1 (on) or 0 (off)"),
        };
        let cpu_level = match var("FATHOM_CPU_LEVEL")? {
            None => None,
            Some(v) => Some(
                cpu_level(&v, CpuLevel::detect())
                    .map_err(|e| anyhow::anyhow!("FATHOM_CPU_LEVEL={v}: {e}"))?,
            ),
        };
        Ok(Env {
            cpus,
            profile,
            force_scalar,
            cpu_level,
            st_weights: var("FATHOM_ST_WEIGHTS")?,
            moe_config: var("FATHOM_MOE_CONFIG")?.map(PathBuf::from),
        })
    }

    /// The executor configuration for `-t threads` (none given: one per listed
    /// `FATHOM_CPUS` CPU, else one per physical core), with this environment's pinning,
    /// profiler and reference switch.
    pub fn exec_config(&self, threads: Option<usize>) -> Result<ExecConfig> {
        if threads == Some(0) {
            bail!("-t 0: at least one thread is needed");
        }
        let d = ExecConfig::default();
        // more threads than CPUs to run them makes every barrier wait for a descheduled
        // thread: clamp to the listed CPUs, else to those available to the process
        let (avail, from) = match &self.cpus {
            Some(list) => (list.len(), "FATHOM_CPUS lists"),
            None => (
                backends::topology::allowed_cpus().len().max(1),
                "this process may use",
            ),
        };
        let threads = match threads {
            Some(t) if t > avail => {
                let s = if avail == 1 { "" } else { "s" };
                eprintln!("note: -t {t}: {from} {avail} CPU{s}; using {avail} thread{s}");
                avail
            }
            Some(t) => t,
            None => self.cpus.as_ref().map_or(d.threads, Vec::len).min(avail),
        };
        Ok(ExecConfig {
            threads,
            cpus: self.cpus.clone(),
            profile: self.profile.clone(),
            reference: self.force_scalar,
            cpu: self.cpu_level.unwrap_or(d.cpu),
            ..d
        })
    }
}

/// A CPU level by its name ([`CpuLevel::name`]), at most `have` (this CPU's level).
fn cpu_level(v: &str, have: CpuLevel) -> std::result::Result<CpuLevel, String> {
    let v = v.trim();
    let names = || {
        CpuLevel::ALL
            .iter()
            .map(|l| l.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let level = CpuLevel::ALL
        .into_iter()
        .find(|l| l.name() == v)
        .ok_or_else(|| format!("expected one of {}", names()))?;
    if level > have {
        return Err(format!("this CPU's kernels go up to {have}"));
    }
    if !have.includes(level) {
        return Err(format!("this CPU has no AVX-VNNI for {level}'s kernels"));
    }
    Ok(level)
}

#[cfg(test)]
mod tests {
    use super::{cpu_level, VARIABLES};
    use quant::simd::CpuLevel;

    /// `FATHOM_CPU_LEVEL` takes every level's name up to this CPU's, and names the choices or
    /// the ceiling otherwise.
    #[test]
    fn cpu_levels_by_name_up_to_this_cpus() {
        assert_eq!(cpu_level("avx2", CpuLevel::Amx), Ok(CpuLevel::Avx2));
        assert_eq!(cpu_level(" scalar ", CpuLevel::Avx2), Ok(CpuLevel::Scalar));
        assert_eq!(
            cpu_level("avx512-vnni", CpuLevel::Avx512Vnni),
            Ok(CpuLevel::Avx512Vnni)
        );
        let e = cpu_level("avx512", CpuLevel::Avx2).unwrap_err();
        assert!(e.contains("up to avx2"), "{e}");
        let e = cpu_level("sse4", CpuLevel::Amx).unwrap_err();
        assert!(e.contains("avx2") && e.contains("amx"), "{e}");
        let e = cpu_level("avx2-vnni", CpuLevel::Avx2).unwrap_err();
        assert!(e.contains("up to avx2"), "{e}");
        // an AVX-512 CPU need not have AVX-VNNI: the level is named only where it does
        match cpu_level("avx2-vnni", CpuLevel::Amx) {
            Ok(l) => assert!(l == CpuLevel::Avx2Vnni && CpuLevel::Amx.includes(l)),
            Err(e) => assert!(
                e.contains("no AVX-VNNI") && !CpuLevel::Amx.includes(CpuLevel::Avx2Vnni),
                "{e}"
            ),
        }
    }
    use std::path::Path;

    /// The README's environment table lists every variable fathom reads, and no other.
    #[test]
    fn the_readme_documents_every_variable() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        for (name, _) in VARIABLES {
            assert!(
                readme.contains(&format!("| `{name}` |")),
                "README.md has no table row for {name}"
            );
        }
    }

    /// Only this file reads the environment: no `std::env::var` in the library crates (their
    /// sources and tests) nor elsewhere in the CLI.
    #[test]
    fn nothing_else_reads_the_environment() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut offenders = Vec::new();
        let mut stack: Vec<_> = [
            "quant", "graph", "ops", "backends", "models", "tools", "benches",
        ]
        .iter()
        .map(|c| root.join(c))
        .collect();
        let needle = ["std::env::", "var("].concat();
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let p = entry.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|e| e == "rs")
                    && !p.ends_with("tools/src/env.rs")
                {
                    let text = std::fs::read_to_string(&p).unwrap();
                    if text.contains(&needle) || text.contains("env::var_os(") {
                        offenders.push(p.display().to_string());
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "environment read in {offenders:?}");
    }
}
