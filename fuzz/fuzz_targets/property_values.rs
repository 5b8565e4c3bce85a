//! Cluster `configurationEx` and `config.hardware.device` values.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vsphere_provider::fuzzing::property_values(data));
