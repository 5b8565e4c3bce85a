//! Manifest loading (multi-document YAML with source locations).
