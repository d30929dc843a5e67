//! The SQLite audit database: schema and migrations, the recorder used by commands, and the
//! queries behind `virtwork audit`.
