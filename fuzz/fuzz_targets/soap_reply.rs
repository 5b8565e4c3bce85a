//! The SOAP envelope and fault decoder (`Client::call`), with HTTP 200 and 500, and the service content.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vsphere_provider::fuzzing::soap_reply(data));
