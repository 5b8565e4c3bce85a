//! `WaitForUpdatesEx` answers: the long poll's `UpdateSet` decoder.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vsphere_provider::fuzzing::wait_for_updates(data));
