#!/usr/bin/env bash
# Bounded fuzzing of the vCenter reply decoders (fuzz/, cargo-fuzz + libFuzzer):
#   installs cargo-fuzz if missing (kept in ~/.cargo/bin), builds every target, seeds each corpus
#   from the captured vcsim replies, runs each target for FUZZ_SECONDS, fails if any crashes, and
#   prints the executions per target on stdout.
#   Short runs (CI) use the quick unoptimized build: a cold build there is mostly compile time,
#   and the optimized one costs 2.5 times the CPU (fuzz/README.md has the numbers).
#
# Environment (all optional):
#   FUZZ_SECONDS     seconds per target (default 20); FUZZ_SECONDS=3600 for a long run
#   FUZZ_BUILD       dev | release: `cargo fuzz build --dev` ([profile.dev] of fuzz/Cargo.toml:
#                    unoptimized but for the XML/JSON parsers) or the optimized release build
#                    (default: dev when FUZZ_SECONDS < 600, else release)
#   FUZZ_TARGETS     space-separated subset of the targets (default: all of fuzz/Cargo.toml)
#   FUZZ_TOOLCHAIN   nightly | stable (default: nightly if rustup has it, else stable, which
#                    builds with RUSTC_BOOTSTRAP=1 and no sanitizer)
#   FUZZ_SANITIZER   cargo-fuzz --sanitizer (default: address on nightly, none on stable)
#   FUZZ_TARGET_DIR  build directory (default fuzz/target; never the main crate's target dir,
#                    the instrumented build would evict its artifacts)
#   FUZZ_FIXTURES    captured replies to seed from (default tests/fixtures/vcsim-wire)
#   FUZZ_ARGS        extra libFuzzer flags for every run (e.g. "-max_len=65536")
#   CARGO_FUZZ_VERSION  cargo-fuzz to install when missing (default 0.13.2)
set -euo pipefail

# shellcheck source=lib.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"
cd "$REPO_ROOT"

if [ -d "$HOME/.cargo/bin" ]; then
	PATH="$HOME/.cargo/bin:$PATH"
fi

seconds="${FUZZ_SECONDS:-20}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
	die "FUZZ_SECONDS must be a positive number of seconds (got '$seconds')"
fi
fuzz_dir="$REPO_ROOT/fuzz"
target_dir="${FUZZ_TARGET_DIR:-$fuzz_dir/target}"
fixtures="${FUZZ_FIXTURES:-$REPO_ROOT/tests/fixtures/vcsim-wire}"
cargo_fuzz_version="${CARGO_FUZZ_VERSION:-0.13.2}"
total_start=$SECONDS

# 1. cargo-fuzz.
if ! cargo fuzz --version >/dev/null 2>&1; then
	log "installing cargo-fuzz $cargo_fuzz_version (once; kept in ~/.cargo/bin)"
	start=$SECONDS
	# --debug: half the compile time of a release build, and cargo-fuzz's own speed does not matter.
	cargo install --locked --debug cargo-fuzz --version "$cargo_fuzz_version" >&2 || die "cargo install cargo-fuzz failed"
	log "cargo-fuzz installed ($((SECONDS - start))s)"
fi
log "$(cargo fuzz --version)"

# 2. Toolchain: libFuzzer instrumentation needs nightly flags; stable rustc accepts them with
# RUSTC_BOOTSTRAP=1, but without a sanitizer (no ASan runtime on stable).
toolchain="${FUZZ_TOOLCHAIN:-}"
if [ -z "$toolchain" ]; then
	if command -v rustup >/dev/null 2>&1 && rustup run nightly rustc --version >/dev/null 2>&1; then
		toolchain=nightly
	else
		toolchain=stable
	fi
fi
case "$toolchain" in
nightly)
	cargo=(cargo +nightly)
	sanitizer="${FUZZ_SANITIZER:-address}"
	;;
stable)
	cargo=(cargo)
	if command -v rustup >/dev/null 2>&1 && rustup run stable rustc --version >/dev/null 2>&1; then
		cargo=(cargo +stable)
	fi
	export RUSTC_BOOTSTRAP=1
	sanitizer="${FUZZ_SANITIZER:-none}"
	;;
*) die "FUZZ_TOOLCHAIN must be nightly or stable (got '$toolchain')" ;;
esac
build="${FUZZ_BUILD:-}"
if [ -z "$build" ]; then
	if [ "$seconds" -lt 600 ]; then build=dev; else build=release; fi
fi
fuzz_args=(--fuzz-dir "$fuzz_dir" --target-dir "$target_dir" --sanitizer "$sanitizer" --debug-assertions)
case "$build" in
dev) fuzz_args+=(--dev) ;;
release) ;;
*) die "FUZZ_BUILD must be dev or release (got '$build')" ;;
esac
log "toolchain: $toolchain ($("${cargo[@]}" --version)), sanitizer: $sanitizer, build: $build, build dir: $target_dir"

# 3. Targets and build.
mapfile -t all_targets < <("${cargo[@]}" fuzz list --fuzz-dir "$fuzz_dir")
[ "${#all_targets[@]}" -gt 0 ] || die "no fuzz targets in $fuzz_dir"
if [ -n "${FUZZ_TARGETS:-}" ]; then
	read -r -a targets <<<"$FUZZ_TARGETS"
	for t in "${targets[@]}"; do
		printf '%s\n' "${all_targets[@]}" | grep -qx "$t" || die "unknown fuzz target '$t' (have: ${all_targets[*]})"
	done
else
	targets=("${all_targets[@]}")
fi
start=$SECONDS
log "building ${#targets[@]} targets"
if [ "${#targets[@]}" -eq "${#all_targets[@]}" ]; then
	# One cargo invocation for all of them: the binaries link in parallel.
	"${cargo[@]}" fuzz build "${fuzz_args[@]}" >&2 || die "building the fuzz targets failed"
else
	for t in "${targets[@]}"; do
		"${cargo[@]}" fuzz build "${fuzz_args[@]}" "$t" >&2 || die "building fuzz target $t failed"
	done
fi
log "built ($((SECONDS - start))s)"

# 4. Seed corpora: the bodies of the captured replies (fuzz/corpus/<target>, not committed),
# beside the hand-made seeds in fuzz/seeds/<target>.
body_of() { sed '1,/^\r\{0,1\}$/d' "$1"; }
seed() {
	local target="$1" corpus="$fuzz_dir/corpus/$1" req resp name
	mkdir -p "$corpus"
	[ -d "$fixtures" ] || return 0
	if [ "$target" = rest_tagging ]; then
		[ -f "$fixtures/rest_transcript.txt" ] || return 0
		local i=0
		while IFS= read -r line; do
			i=$((i + 1))
			printf '%s' "$line" >"$corpus/fixture-rest-$i"
		done < <(sed -n 's/^<<< \([[{"].*\)$/\1/p' "$fixtures/rest_transcript.txt")
		return 0
	fi
	for resp in "$fixtures"/*.response.http; do
		[ -e "$resp" ] || continue
		name="$(basename "$resp" .response.http)"
		req="$fixtures/$name.request.xml"
		case "$target" in
		soap_reply) ;;
		task_info) grep -qE '^<(Continue)?RetrievePropertiesEx|_Task ' "$req" 2>/dev/null || continue ;;
		wait_for_updates) grep -qE '^<WaitForUpdatesEx' "$req" 2>/dev/null || continue ;;
		*) grep -qE '^<(Continue)?RetrievePropertiesEx' "$req" 2>/dev/null || continue ;;
		esac
		body_of "$resp" >"$corpus/fixture-$name"
	done
}

# 5. Run each target for the time given.
failed=()
declare -A execs secs corpus_size result
for t in "${targets[@]}"; do
	seed "$t"
	dirs=("$fuzz_dir/corpus/$t")
	[ -d "$fuzz_dir/seeds/$t" ] && dirs+=("$fuzz_dir/seeds/$t")
	extra=()
	if [ -n "${FUZZ_ARGS:-}" ]; then
		read -r -a extra <<<"$FUZZ_ARGS"
	fi
	[ "$t" != rest_tagging ] && [ -f "$fuzz_dir/xml.dict" ] && extra+=("-dict=$fuzz_dir/xml.dict")
	mkdir -p "$fuzz_dir/artifacts/$t"
	logfile="$fuzz_dir/artifacts/$t/last-run.log"
	log "==> $t for ${seconds}s (log: ${logfile#"$REPO_ROOT"/})"
	start=$SECONDS
	rc=0
	"${cargo[@]}" fuzz run "${fuzz_args[@]}" "$t" "${dirs[@]}" -- \
		-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$fuzz_dir/artifacts/$t/" "${extra[@]}" >"$logfile" 2>&1 || rc=$?
	secs[$t]=$((SECONDS - start))
	execs[$t]="$(sed -n 's/^stat::number_of_executed_units: *//p' "$logfile" | tail -n1)"
	corpus_size[$t]="$(find "$fuzz_dir/corpus/$t" -type f | wc -l)"
	if [ "$rc" -eq 0 ]; then
		result[$t]=ok
	else
		result[$t]="FAILED (exit $rc)"
		failed+=("$t")
		grep -E '^(thread .* panicked|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)|panicked at' "$logfile" | head -n 20 >&2 || true
		tail -n 30 "$logfile" >&2
		dev_flag=""
		[ "$build" = dev ] && dev_flag=" --dev"
		log "reproduce: cargo fuzz run$dev_flag --fuzz-dir fuzz $t <artifact>; minimize: cargo fuzz tmin$dev_flag --fuzz-dir fuzz $t <artifact>"
	fi
	log "<== $t: ${result[$t]}, ${execs[$t]:-?} executions in ${secs[$t]}s"
done

printf '%-20s %12s %8s %8s  %s\n' target executions seconds corpus result
for t in "${targets[@]}"; do
	printf '%-20s %12s %8s %8s  %s\n' "$t" "${execs[$t]:-?}" "${secs[$t]}" "${corpus_size[$t]}" "${result[$t]}"
done
log "total $((SECONDS - total_start))s"
[ "${#failed[@]}" -eq 0 ] || die "fuzz targets crashed: ${failed[*]} (inputs in fuzz/artifacts/<target>/)"
