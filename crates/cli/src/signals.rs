//! Ctrl-C and friends: SIGINT, SIGTERM and SIGHUP set a flag that the capture loop checks at
//! least every 100 ms, so that files are flushed and the summary printed before exiting.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handlers (without `SA_RESTART`, so a blocking `poll` returns at once).
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the
        // sigaction structure is fully initialised (zeroed, then the handler set).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether a stop signal arrived.
pub fn stopped() -> bool {
    STOP.load(Ordering::SeqCst)
}
