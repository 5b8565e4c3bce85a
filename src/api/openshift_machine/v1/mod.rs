//! `machine.openshift.io/v1`: ControlPlaneMachineSet.

pub mod control_plane_machine_set;
