//! Read-only queries behind `virtwork audit list|show`.
