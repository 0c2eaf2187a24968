//! Resident-memory figures of this process, read from `/proc/self/status` (Linux only; other
//! systems report `None`).

/// Current and peak resident set size, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rss {
    /// `VmRSS`: resident now.
    pub current: Option<u64>,
    /// `VmHWM`: the peak ("high water mark").
    pub peak: Option<u64>,
}

/// Read `VmRSS` and `VmHWM`.
pub fn rss() -> Rss {
    match std::fs::read_to_string("/proc/self/status") {
        Ok(s) => parse_status(&s),
        Err(_) => Rss::default(),
    }
}

/// Parse the `VmRSS:` / `VmHWM:` lines (values in kB) of a `/proc/<pid>/status` text.
fn parse_status(s: &str) -> Rss {
    let field = |key: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    };
    Rss {
        current: field("VmRSS:"),
        peak: field("VmHWM:"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status() {
        let s = "Name:\tx\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(
            parse_status(s),
            Rss {
                current: Some(1 << 20),
                peak: Some(2 << 20)
            }
        );
        assert_eq!(parse_status("junk"), Rss::default());
    }

    #[test]
    fn reads_own_status() {
        if cfg!(target_os = "linux") {
            let r = rss();
            assert!(r.current.unwrap() > 0 && r.peak.unwrap() >= r.current.unwrap());
        }
    }
}
