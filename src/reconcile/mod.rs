//! The core both shells drive (`run` in a cluster, `reconcile` on files): gather a vCenter view
//! in a fixed number of bulk reads, plan every zone (pure, `plan::zone`), execute the changes
//! autoConfigure asks for, and repeat until nothing is left to change.
pub mod execute;
pub mod gather;
pub mod kube;
pub mod machines;
pub mod views;
pub mod zones;
