//! The README's front door holds: every command of its quick start is a script that exists and
//! can be run, and every file of `config/samples` (and of `docs/examples`) passes
//! `vsphere-provider validate` as a user would run it. hack/test.sh then runs the demos
//! themselves; this test fails first, and says which line of the README is wrong.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The lines of the fenced code blocks of the README section whose heading starts with
/// `## Quick start`, with their 1-based line numbers.
fn quick_start_commands(readme: &str) -> Vec<(usize, String)> {
    let mut in_section = false;
    let mut in_code = false;
    let mut out = Vec::new();
    for (i, line) in readme.lines().enumerate() {
        if line.starts_with("## ") {
            in_section = line.starts_with("## Quick start");
            in_code = false;
            continue;
        }
        if !in_section {
            continue;
        }
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let command = line.split('#').next().unwrap_or("").trim();
        if in_code && !command.is_empty() {
            out.push((i + 1, command.to_string()));
        }
    }
    out
}

#[test]
fn every_quick_start_command_is_an_existing_executable_script() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let commands = quick_start_commands(&readme);
    assert!(
        commands.len() >= 2,
        "README's '## Quick start' has fewer than two commands: {commands:?}"
    );
    for (line, command) in &commands {
        let program = command.split_whitespace().next().unwrap();
        let path = root().join(program);
        assert!(
            path.is_file(),
            "README.md:{line}: `{command}` runs {program}, which does not exist"
        );
        let mode = std::os::unix::fs::PermissionsExt::mode(&path.metadata().unwrap().permissions());
        assert!(
            mode & 0o111 != 0,
            "README.md:{line}: {program} is not executable (mode {mode:o})"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("#!"),
            "README.md:{line}: {program} has no #! line"
        );
    }
}

#[test]
fn the_quick_start_parser_finds_commands_only_in_its_section() {
    let readme = "# x\n## Quick start\n\n```sh\nhack/a.sh   # first\n\n# a comment\nhack/b.sh --keep\n```\n## Next\n```sh\nhack/c.sh\n```\n";
    let got = quick_start_commands(readme);
    assert_eq!(
        got,
        vec![
            (5, "hack/a.sh".to_string()),
            (8, "hack/b.sh --keep".to_string())
        ]
    );
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "yaml")
                && p.file_name().is_some_and(|n| n != "kustomization.yaml")
        })
        .collect();
    files.sort();
    files
}

fn validate(args: &[&Path]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vsphere-provider"));
    cmd.arg("validate").current_dir(root());
    for a in args {
        cmd.arg("-f").arg(a);
    }
    cmd.output().unwrap()
}

#[test]
fn every_sample_file_passes_validate_alone_and_together() {
    for dir in ["config/samples", "docs/examples"] {
        let files = yaml_files(&root().join(dir));
        assert!(!files.is_empty(), "no manifests in {dir}");
        for f in &files {
            let out = validate(&[f]);
            assert!(
                out.status.success(),
                "vsphere-provider validate -f {}: exit {:?}\n{}{}",
                f.display(),
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = validate(&[&root().join(dir)]);
        assert!(
            out.status.success(),
            "vsphere-provider validate -f {dir}: exit {:?}\n{}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
