//! REST (vAPI tagging) answers in both dialects and REST error classification.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vsphere_provider::fuzzing::rest_tagging(data));
