//! A model file truncated or rewritten while it is mapped makes the next read of the lost
//! pages raise `SIGBUS`, which would kill the process with no message. This handler says
//! which file changed, removes any output being written (`models::files::remove_in_flight`:
//! outputs are written whole or not at all), and exits with status 1 like any other error.
//!
//! Everything in the handler is async-signal-safe: atomic loads, `write(2)`, `unlink(2)` and
//! `_exit(2)`; no allocation, no lock.

/// Install the handler for `SIGBUS` (once, at start-up).
pub fn install() {
    // SAFETY: a zeroed `sigaction` is a valid initial value; the handler has the
    // `SA_SIGINFO` signature and only calls async-signal-safe functions.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}

fn say(b: &[u8]) {
    // SAFETY: writing a valid buffer to stderr.
    unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let path = models::files::mapped_file_at(addr);
    say(b"\nerror: ");
    if path.is_null() {
        say(b"a mapped file");
    } else {
        // SAFETY: a NUL-terminated path owned by the mapping registry.
        let len = unsafe { libc::strlen(path) };
        // SAFETY: `len` bytes at `path` are the path.
        say(unsafe { std::slice::from_raw_parts(path.cast::<u8>(), len) });
    }
    say(
        b" changed on disk while fathom was reading it (truncated or rewritten in place; \
          replace model files by writing a new file and renaming it over the old one)\n",
    );
    models::files::remove_in_flight();
    // SAFETY: ends the process at once, as the handler must not return to the faulting read.
    unsafe { libc::_exit(1) };
}
