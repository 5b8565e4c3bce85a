//! Standard output and standard error for every command.
//!
//! Rust ignores SIGPIPE, so a reader that stops reading (`vsphere-provider crds | head -1`)
//! turns the next write into an error, and `print!`/`eprint!` panic on it. Every command writes
//! through [`outln!`]/[`errln!`] instead: once a stream's reader is gone, what is left for that
//! stream is dropped and the command finishes its work (logout, state file) and exits with its
//! own code, as `cat` or `grep` would. Any other write failure (a full disk behind `>`) is said
//! once on standard error and turns the exit code into a failure ([`exit_code`]).

use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// A stream whose reader went away, or that failed: nothing more is written to it.
struct Stream {
    closed: AtomicBool,
    failed: AtomicBool,
}

static STDOUT: Stream = Stream {
    closed: AtomicBool::new(false),
    failed: AtomicBool::new(false),
};
static STDERR: Stream = Stream {
    closed: AtomicBool::new(false),
    failed: AtomicBool::new(false),
};

impl Stream {
    fn write(&self, mut w: impl Write, args: fmt::Arguments<'_>) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = w.write_fmt(args).and_then(|()| w.flush()) {
            self.closed.store(true, Ordering::Relaxed);
            if e.kind() != io::ErrorKind::BrokenPipe {
                self.failed.store(true, Ordering::Relaxed);
                if !std::ptr::eq(self, &STDERR) {
                    write_err(format_args!(
                        "error: cannot write to standard output: {e}\n"
                    ));
                }
            }
        }
    }
}

/// Writes to standard output (use [`outln!`] / [`out!`]).
pub fn write_out(args: fmt::Arguments<'_>) {
    STDOUT.write(io::stdout().lock(), args);
}

/// Writes to standard error (use [`errln!`] / [`err!`]).
pub fn write_err(args: fmt::Arguments<'_>) {
    STDERR.write(io::stderr().lock(), args);
}

/// Whether standard output's reader went away (a command may stop producing output then).
pub fn stdout_closed() -> bool {
    STDOUT.closed.load(Ordering::Relaxed)
}

/// The command's exit code, unless writing its output failed for another reason than a
/// reader that stopped reading: then the output is incomplete and the run failed.
pub fn exit_code(code: ExitCode) -> ExitCode {
    if STDOUT.failed.load(Ordering::Relaxed) || STDERR.failed.load(Ordering::Relaxed) {
        ExitCode::from(super::EXIT_FAILED)
    } else {
        code
    }
}

/// `print!` that a closed pipe does not turn into a panic.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::out::write_out(format_args!($($arg)*)) };
}

/// `println!` that a closed pipe does not turn into a panic.
macro_rules! outln {
    () => { $crate::cli::out::write_out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::out::write_out(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` that a closed pipe does not turn into a panic.
macro_rules! err {
    ($($arg:tt)*) => { $crate::cli::out::write_err(format_args!($($arg)*)) };
}

/// `eprintln!` that a closed pipe does not turn into a panic.
macro_rules! errln {
    () => { $crate::cli::out::write_err(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::out::write_err(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use {err, errln, out, outln};
