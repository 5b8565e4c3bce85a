//! The inventory snapshot built from a bulk read, and the lookups reconciles make on it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vsphere_provider::fuzzing::inventory(data));
