//! A `log` backend that keeps what each thread logged, so a test can check
//! that a failure gpu-sync could not return (in `Drop`) was logged.

use std::sync::Mutex;
use std::thread::ThreadId;

struct Capture;

static RECORDS: Mutex<Vec<(ThreadId, String)>> = Mutex::new(Vec::new());
static LOGGER: Capture = Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let line = format!("{}: {}", r.level(), r.args());
            RECORDS.lock().unwrap_or_else(|p| p.into_inner()).push((std::thread::current().id(), line));
        }
    }
    fn flush(&self) {}
}

/// Installs the capturing logger (once per process; later calls do nothing).
pub fn capture() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
}

/// Takes the warnings and errors the calling thread logged since the last call.
pub fn take() -> Vec<String> {
    let me = std::thread::current().id();
    let mut all = RECORDS.lock().unwrap_or_else(|p| p.into_inner());
    let (mine, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|(t, _)| *t == me);
    *all = rest;
    mine.into_iter().map(|(_, l)| l).collect()
}
