//! `hack/deny.sh`, the dependency check of hack/test.sh: cargo-deny against the committed RustSec
//! snapshot, every warning an error.
//!
//! - The snapshot's age is printed on every run, and past 180 days the run fails naming the
//!   refresh command (a copy of the script beside a SOURCE of the chosen date; it fails before
//!   anything is installed).
//! - Unmaintained, unsound and yanked crates and a licence not allowed each fail the run:
//!   tests/fixtures/deny-warnings is a crate graph with one of each, checked by the real
//!   cargo-deny against the committed snapshot. That test needs the
//!   cargo-deny binary hack/deny.sh caches (built once, a few minutes cold; hack/test.sh runs
//!   hack/deny.sh before `cargo test`, so it is there) and the crates.io registry for the
//!   fixture's three crates.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A repository holding only hack/deny.sh, hack/lib.sh and a snapshot dated `days_ago`.
fn copy_with_snapshot_of(dir: &Path, days_ago: i64) {
    let hack = dir.join("hack");
    std::fs::create_dir_all(hack.join("deny")).unwrap();
    for f in ["deny.sh", "lib.sh"] {
        std::fs::copy(repo().join("hack").join(f), hack.join(f)).unwrap();
    }
    std::fs::copy(
        repo().join("hack/deny/advisory-db.tar.gz"),
        hack.join("deny/advisory-db.tar.gz"),
    )
    .unwrap();
    let day = jiff::Timestamp::now()
        .checked_sub(jiff::SignedDuration::from_hours(24 * days_ago))
        .unwrap()
        .strftime("%Y-%m-%d")
        .to_string();
    std::fs::write(
        hack.join("deny/SOURCE"),
        format!("https://github.com/rustsec/advisory-db 0123456789abcdef0123456789abcdef01234567 {day}\n"),
    )
    .unwrap();
}

fn deny(dir: &Path, args: &[&str]) -> Output {
    Command::new("bash")
        .arg(dir.join("hack/deny.sh"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running hack/deny.sh")
}

#[test]
fn a_snapshot_older_than_180_days_fails_the_check_naming_the_refresh_command() {
    let tmp = tempfile::tempdir().unwrap();
    copy_with_snapshot_of(tmp.path(), 200);
    for args in [&[][..], &["--age"][..]] {
        let o = deny(tmp.path(), args);
        let err = stderr(&o);
        assert!(!o.status.success(), "hack/deny.sh {args:?} passed:\n{err}");
        assert!(err.contains("200 days old"), "no age in:\n{err}");
        assert!(
            err.contains("hack/deny.sh --refresh"),
            "the refresh command is not named:\n{err}"
        );
        // It stopped at the age: nothing was built or checked.
        assert!(!err.contains("cargo deny check"), "{err}");
    }
}

#[test]
fn a_fresh_snapshot_passes_the_age_check_and_says_its_age() {
    let tmp = tempfile::tempdir().unwrap();
    copy_with_snapshot_of(tmp.path(), 179);
    let o = deny(tmp.path(), &["--age"]);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("179 days old (limit 180"), "{err}");
}

#[test]
fn unmaintained_unsound_and_yanked_crates_and_a_licence_not_allowed_fail_the_check() {
    let fixture = repo().join("tests/fixtures/deny-warnings/Cargo.toml");
    let o = Command::new(repo().join("hack/deny.sh"))
        .arg(&fixture)
        .current_dir(repo())
        .output()
        .expect("running hack/deny.sh");
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(
        !o.status.success(),
        "hack/deny.sh passed the fixture:\n{out}"
    );
    for (error, what) in [
        (
            "error[unmaintained]: difference is unmaintained",
            "RUSTSEC-2020-0095",
        ),
        (
            "error[unsound]: totally-safe-transmute",
            "RUSTSEC-2025-0030",
        ),
        ("error[yanked]: detected yanked crate", "untrusted 0.6.1"),
        (
            "error[rejected]: failed to satisfy license requirements",
            "AGPL-3.0-or-later",
        ),
    ] {
        assert!(out.contains(error), "no `{error}`:\n{out}");
        assert!(out.contains(what), "{what} not named:\n{out}");
    }
    assert!(
        out.contains("days old"),
        "the snapshot's age is not printed:\n{out}"
    );
}
