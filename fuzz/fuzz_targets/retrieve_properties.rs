//! `RetrievePropertiesEx` / `ContinueRetrievePropertiesEx` pages and the typed property accessors.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vsphere_provider::fuzzing::retrieve_properties(data));
