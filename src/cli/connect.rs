//! vCenter connection flags shared by every subcommand that talks to vCenter.
