//! The audit database file: created `0600` in a directory created `0700`, never through a
//! symbolic link, refused when every user may write it, then configured and migrated. Opening
//! it is the only fatal step of auditing; the error names the path and how to proceed.
//!
//! Must not: write records (the recorder does, through the writer thread).

use std::fmt;
use std::path::Path;

use rusqlite::Connection;

use crate::audit::schema;
use crate::error::{Error, Result};

/// Opens a connection configured and migrated for auditing; errors are [`Error::Audit`].
pub(crate) fn open_connection(path: &Path) -> Result<Connection> {
    let fail = |what: &str, err: &dyn fmt::Display| {
        Error::Audit(format!(
            "{what} {}: {err} (choose another file with --audit-db or disable auditing with --no-audit)",
            path.display()
        ))
    };
    let in_memory = path.as_os_str() == ":memory:";
    if let Some(parent) = path
        .parent()
        .filter(|p| !in_memory && !p.as_os_str().is_empty())
    {
        create_private_dir(parent).map_err(|e| fail("creating the directory of", &e))?;
    }
    if in_memory {
        return configured(path, &fail);
    }
    let real = real_parent(path).map_err(|e| fail("resolving the directory of", &e))?;
    let created = create_private_file(&real).map_err(|e| fail("opening", &e))?;
    let opened = configured(&real, &fail);
    // A file this call created and could not make a database of is removed again, so a
    // failed attempt leaves nothing behind (an existing file is never removed).
    if opened.is_err()
        && created
        && std::fs::symlink_metadata(&real).is_ok_and(|m| m.is_file() && m.len() == 0)
    {
        let _ = std::fs::remove_file(&real);
    }
    opened
}

/// `path` with its directory resolved to the real one: SQLite's `SQLITE_OPEN_NOFOLLOW` refuses
/// a link in any component, and a directory reached through one (Fedora Atomic's
/// `/home -> var/home`) is fine; only the last component must not be a link.
pub(crate) fn real_parent(path: &Path) -> std::io::Result<std::path::PathBuf> {
    let Some(name) = path.file_name() else {
        return Ok(path.to_path_buf());
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok(std::fs::canonicalize(parent)?.join(name))
}

/// Opens `path` with SQLite and brings its schema up to date.
fn configured(path: &Path, fail: &dyn Fn(&str, &dyn fmt::Display) -> Error) -> Result<Connection> {
    // Checked without following a link; SQLite must not follow one swapped in since.
    let flags = rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|e| fail("opening", &e))?;
    schema::configure(&conn).map_err(|e| fail("configuring", &e))?;
    schema::migrate(&mut conn).map_err(|e| fail("migrating the schema of", &e))?;
    Ok(conn)
}

/// Creates the directories leading to the database `0700` (only those created here).
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Creates the database file `0600` when it does not exist yet, before SQLite does (SQLite
/// would create it with the umask's default, usually world-readable, and copies the file's
/// mode to its `-wal` and `-shm` files). An existing file keeps its mode.
///
/// The last path component is never followed: a symbolic link there (dangling or not) is
/// refused, as is anything but a regular file, and a database every user may write (anyone
/// could rewrite the audit trail). One owned by another user, or writable by its group, is
/// used with a warning, the way OpenSSH judges key files.
/// Returns whether it created the file.
fn create_private_file(path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let refuse = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
    let mut options = std::fs::OpenOptions::new();
    options
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let mut created = true;
    let mut opened = options.open(path);
    if matches!(&opened, Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists) {
        created = false;
        opened = options.create_new(false).create(false).open(path);
    }
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refuse(
                "is a symbolic link, which virtwork does not follow for the audit database; \
                 give the real path"
                    .to_string(),
            ));
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(refuse("is not a regular file".to_string()));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o002 != 0 {
        return Err(refuse(format!(
            "is writable by every user (mode {mode:03o}), so anyone could rewrite the audit \
             trail; run `chmod 600` on it"
        )));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me && meta.uid() != 0 {
        tracing::warn!(
            path = %path.display(),
            owner = meta.uid(),
            "the audit database belongs to another user, who can rewrite what it records"
        );
    } else if mode & 0o020 != 0 {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{mode:03o}"),
            "the audit database is writable by its group, whose members can rewrite what it records"
        );
    }
    Ok(created)
}
