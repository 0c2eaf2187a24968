//! CPU topology: the default thread count (one per physical core), the last-level cache
//! size (for benchmarks that must stream from DRAM) and CPU-list parsing for `--cpus 0-7,16`.

/// Number of physical cores (distinct `core_id`/`package` pairs in sysfs); falls back to the
/// number of logical CPUs.
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut seen = std::collections::HashSet::new();
    for cpu in 0..logical.max(1) * 2 {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let core = std::fs::read_to_string(format!("{base}/core_id"));
        let pkg = std::fs::read_to_string(format!("{base}/physical_package_id"));
        if let (Ok(c), Ok(p)) = (core, pkg) {
            seen.insert((p.trim().to_string(), c.trim().to_string()));
        }
    }
    if seen.is_empty() {
        logical
    } else {
        seen.len().min(logical)
    }
}

/// Bytes of CPU 0's L3 as Linux reports it (`/sys/devices/system/cpu/cpu0/cache/index3/size`,
/// e.g. `491520K`); `None` where there is no such file or it does not parse.
pub fn l3_bytes() -> Option<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size").ok()?;
    parse_cache_size(s.trim())
}

/// A sysfs cache size: a number with an optional `K`, `M` or `G` suffix.
fn parse_cache_size(s: &str) -> Option<usize> {
    let (num, mul) = match s.char_indices().last()? {
        (i, 'K') => (&s[..i], 1usize << 10),
        (i, 'M') => (&s[..i], 1 << 20),
        (i, 'G') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok()?.checked_mul(mul)
}

/// Bytes of memory a new allocation can get without swapping: Linux's `MemAvailable`
/// (`/proc/meminfo`), less where the process's cgroup (a container) allows less
/// (`memory.max` − `memory.current`, cgroup v2) or its address-space limit (`ulimit -v`)
/// leaves less room above what it has mapped. `None` where the system does not say.
pub fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let mut avail = parse_meminfo_available(&meminfo)?;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0
        && lim.rlim_cur != libc::RLIM_INFINITY
    {
        let mapped = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmSize:"))
                    .and_then(|v| v.trim().strip_suffix("kB"))
                    .and_then(|v| v.trim().parse::<u64>().ok())
            })
            .unwrap_or(0)
            * 1024;
        avail = avail.min(lim.rlim_cur.saturating_sub(mapped));
    }
    let cg = |f: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    if let (Some(max), Some(cur)) = (cg("memory.max"), cg("memory.current")) {
        avail = avail.min(max.saturating_sub(cur));
    }
    Some(avail)
}

/// The `MemAvailable:` line of a `/proc/meminfo` text, in bytes.
fn parse_meminfo_available(s: &str) -> Option<u64> {
    s.lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?
        .checked_mul(1024)
}

/// The CPUs this process may run on (its affinity mask, which `taskset`, cgroups and
/// containers narrow), in order; empty where the platform does not say.
pub fn allowed_cpus() -> Vec<usize> {
    core_affinity::get_core_ids()
        .map(|v| v.into_iter().map(|c| c.id).collect())
        .unwrap_or_default()
}

/// A CPU list in the form [`parse_cpu_list`] reads, ranges joined: `[0, 1, 2, 5]` → `0-2,5`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", cpus[i], cpus[j])
        } else {
            cpus[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// Parse a CPU list such as `"0-3,8,10-11"`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("bad CPU list entry '{part}' in '{s}'");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b || b - a > 4096 {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(format!("empty CPU list '{s}'"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn meminfo_available() {
        let s = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(super::parse_meminfo_available(s), Some(2 << 20));
        assert_eq!(super::parse_meminfo_available("MemTotal: 5 kB\n"), None);
        if cfg!(target_os = "linux") {
            assert!(super::available_memory().unwrap() > 0);
        }
    }

    #[test]
    fn cpu_lists_format_as_ranges() {
        assert_eq!(super::format_cpu_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(super::format_cpu_list(&[3]), "3");
        assert_eq!(
            super::parse_cpu_list("0-2,5,7-8").unwrap(),
            [0, 1, 2, 5, 7, 8]
        );
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(super::parse_cpu_list("0-3,8").unwrap(), vec![0, 1, 2, 3, 8]);
        assert!(super::parse_cpu_list("3-1").is_err());
        assert!(super::parse_cpu_list("x").is_err());
        assert!(super::physical_cores() >= 1);
    }

    #[test]
    fn cache_sizes() {
        assert_eq!(super::parse_cache_size("491520K"), Some(480 << 20));
        assert_eq!(super::parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(super::parse_cache_size("1024"), Some(1024));
        assert_eq!(super::parse_cache_size("K"), None);
        assert_eq!(super::parse_cache_size(""), None);
        assert_eq!(super::parse_cache_size("99999999999999999999G"), None);
    }
}
