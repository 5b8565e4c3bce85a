//! `TaskInfo`, `recentTask` and the task a `*_Task` method returns.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vsphere_provider::fuzzing::task_info(data));
