#!/usr/bin/env python3
"""Writes a CycloneDX 1.5 JSON SBOM of the vsphere-provider binary's crate graph.

Usage: hack/sbom.py --out FILE [--target TRIPLE]

The graph is `cargo metadata --locked --filter-platform TRIPLE` (default: the host, which is what
hack/image.sh builds for), from the binary's package through every normal and build dependency;
dev-dependencies are left out (they never reach the binary). Each crate is one component with
its version, its purl (pkg:cargo/NAME@VERSION), the SHA-256 that Cargo.lock records for the
.crate file, and its licence expression. Crates linked into the binary have scope "required";
crates used only while building it (build scripts, proc macros and what only they depend on) have
scope "excluded", so a scanner can tell an advisory that ships from one that does not.

Only the Python standard library and cargo: CI and release machines get no extra tool. The output
is reproducible for a given Cargo.lock (the serial number is derived from the graph; a timestamp
is written only when SOURCE_DATE_EPOCH is set). tests/release_artifacts.rs checks it against
`cargo tree` and Cargo.lock.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path
from urllib.parse import quote

REPO_ROOT = Path(__file__).resolve().parent.parent
BINARY_PACKAGE = "vsphere-provider"
CRATES_IO = "registry+https://github.com/rust-lang/crates.io-index"
# A fixed namespace for the serial number's UUIDv5 (any constant UUID would do).
SERIAL_NAMESPACE = uuid.UUID("6f2b8f8e-0b7e-4f43-9d3f-2c7c1f0f4a51")


def die(msg):
    print(f"[sbom.py] ERROR: {msg}", file=sys.stderr)
    sys.exit(1)


def host_triple():
    out = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("host: "):
            return line.split(" ", 1)[1].strip()
    die("`rustc -vV` names no host triple")


def cargo(*args):
    cmd = ["cargo", *args, "--locked", "--manifest-path", str(REPO_ROOT / "Cargo.toml")]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        die(f"{' '.join(cmd)} failed:\n{res.stderr}")
    return res.stdout


# "<depth><name> v<version>[ (<path or git source>)][ (proc-macro)]" then " (*)" on a repeat.
TREE_LINE = re.compile(r"^(\d+)(\S+) v(\S+)(?: \((?!proc-macro\))[^)]*\))?( \(proc-macro\))?(?: \(\*\))?$")


def cargo_tree(target, edges):
    """The graph `cargo tree` resolves (features as the build resolves them, resolver 2) over the
    given edge kinds: ({(name, version)}, {parent: {child}}, {proc macros})."""
    out = cargo("tree", "-e", edges, "--target", target, "--prefix", "depth", "-f", "{p}",
                "-p", BINARY_PACKAGE)
    nodes, children, proc_macros, stack = set(), {}, set(), []
    for line in out.splitlines():
        m = TREE_LINE.match(line)
        if not m:
            die(f"unexpected `cargo tree` line: {line!r}")
        depth, key = int(m[1]), (m[2], m[3])
        nodes.add(key)
        if m[4]:
            proc_macros.add(key)
        del stack[depth:]
        if stack:
            children.setdefault(stack[-1], set()).add(key)
        stack.append(key)
    return nodes, children, proc_macros


def cargo_version():
    with open(REPO_ROOT / "Cargo.toml", "rb") as f:
        return tomllib.load(f)["package"]["version"]


def lock_checksums():
    """(name, version, source) -> sha256 of the .crate, as Cargo.lock records it."""
    with open(REPO_ROOT / "Cargo.lock", "rb") as f:
        lock = tomllib.load(f)
    return {
        (p["name"], p["version"], p.get("source")): p["checksum"]
        for p in lock.get("package", [])
        if "checksum" in p
    }


def purl(pkg):
    """pkg:cargo/NAME@VERSION, with the registry or repository named when it is not crates.io."""
    base = f"pkg:cargo/{pkg['name']}@{pkg['version']}"
    source = pkg.get("source")
    if source is None or source == CRATES_IO:
        return base
    kind, _, url = source.partition("+")
    if kind == "git":
        return f"{base}?vcs_url={quote('git+' + url, safe='')}"
    return f"{base}?repository_url={quote(url, safe='')}"


def spdx(expr):
    # Cargo still accepts the old "MIT/Apache-2.0" form; SPDX spells it with OR.
    return " OR ".join(part.strip() for part in expr.split("/"))


def walk(start, edges):
    seen, todo = {start}, [start]
    while todo:
        for dep in edges(todo.pop()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON file to write")
    ap.add_argument("--target", help="the platform the binary is built for (default: the host)")
    args = ap.parse_args()
    target = args.target or host_triple()

    # Everything the build compiles (normal and build edges; dev edges never reach the binary).
    built, edges, _ = cargo_tree(target, "normal,build")
    # What is linked in: normal edges only, and never through a proc macro (it runs in rustc).
    normal, normal_edges, proc_macros = cargo_tree(target, "normal")
    root = (BINARY_PACKAGE, cargo_version())
    linked = walk(root, lambda k: (d for d in normal_edges.get(k, ()) if d not in proc_macros))

    # Source, licence and description of each crate: cargo metadata (all platforms).
    meta = json.loads(cargo("metadata", "--format-version", "1"))
    packages = {}
    for p in meta["packages"]:
        key = (p["name"], p["version"])
        if key in built:
            if key in packages:
                die(f"{p['name']} {p['version']} comes from two sources; the SBOM cannot tell them apart")
            packages[key] = p
    missing = built - packages.keys()
    if missing:
        die(f"cargo metadata lacks {sorted(missing)}")

    checksums = lock_checksums()
    refs = {k: purl(packages[k]) for k in built}

    def component(key):
        p = packages[key]
        c = {"type": "application" if key == root else "library", "bom-ref": refs[key],
             "name": p["name"], "version": p["version"], "purl": refs[key]}
        if key != root:
            c["scope"] = "required" if key in linked else "excluded"
        if p.get("description"):
            c["description"] = " ".join(p["description"].split())
        checksum = checksums.get((p["name"], p["version"], p.get("source")))
        if (p.get("source") or "").startswith("registry+") and not checksum:
            die(f"Cargo.lock has no checksum for {p['name']} {p['version']}")
        if checksum:
            c["hashes"] = [{"alg": "SHA-256", "content": checksum}]
        if p.get("license"):
            c["licenses"] = [{"expression": spdx(p["license"])}]
        if p.get("repository"):
            c["externalReferences"] = [{"type": "vcs", "url": p["repository"]}]
        return c

    order = sorted(built)
    components = [component(k) for k in order if k != root]
    dependencies = [{"ref": refs[k], "dependsOn": sorted(refs[d] for d in edges.get(k, ()))}
                    for k in order]
    metadata = {
        "tools": {"components": [{"type": "application", "name": "hack/sbom.py",
                                  "description": "cargo tree, cargo metadata and Cargo.lock to CycloneDX"}]},
        "component": component(root),
    }
    if os.environ.get("SOURCE_DATE_EPOCH"):
        ts = datetime.datetime.fromtimestamp(int(os.environ["SOURCE_DATE_EPOCH"]),
                                             datetime.timezone.utc)
        metadata = {"timestamp": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), **metadata}
    serial = uuid.uuid5(SERIAL_NAMESPACE, json.dumps([components, dependencies], sort_keys=True))
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": metadata,
        "components": components,
        "dependencies": dependencies,
    }
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(bom, indent=2) + "\n")
    tmp.replace(out)
    print(f"[sbom.py] {out}: {len(components)} crates "
          f"({sum(c['scope'] == 'required' for c in components)} linked into the binary)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
