//! See DESIGN.md §2.
