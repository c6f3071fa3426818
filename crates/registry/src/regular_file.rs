//! Opening the files toolsmith reads or appends to (its state files and the tool files it reads) as regular files only, never blocking on the open and never reading more than a bound.
//!
//! Every such file is opened with `O_NONBLOCK` (a FIFO's open returns at once instead of
//! waiting for a writer) and, for state files, `O_NOFOLLOW`; the open descriptor is then
//! checked with `fstat`: anything but a regular file (a FIFO, a device such as `/dev/zero`, a
//! socket, a directory) is refused before a byte is read, and a file larger than its bound is
//! refused on its size alone, so a sparse gigabyte costs nothing. The bytes are then read
//! through a cap one byte over the bound, so a file that grows meanwhile is refused too.
//!
//! A state file (the discovery cache, the audit log, the trust store, a config file) may be a
//! symbolic link only to a file in its own directory ([`Links::WithinDirectory`]); a tool
//! file follows links as before ([`Links::Follow`]), since a tool directory of links to
//! programs kept elsewhere is common, but the target must still be a regular file within
//! the bound.
//!
//! The failures are `io::Error`s, so the callers' error types (which carry an `io::Error`
//! source) stay as they are: the refusals carry a [`RegularFileError`] inside, whose message
//! says what the file was instead.

use std::fs::{File, OpenOptions};
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// The largest discovery cache read: far above the cache of thousands of tools, whose probe
/// output is capped.
pub(crate) const MAX_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// The largest trust store read.
pub const MAX_TRUST_STORE_BYTES: u64 = 16 * 1024 * 1024;

/// The largest config file read (`config.toml`, `.toolsmith.toml`).
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The largest tool file toolsmith reads (a manifest, or the start of a script): a manifest
/// is a page of YAML and a shell body.
pub(crate) const MAX_TOOL_FILE_BYTES: u64 = 1024 * 1024;

/// How a symbolic link in the last component of a path is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// A link is followed wherever it points; the target must be a regular file.
    Follow,
    /// A link is followed only to a file in the link's own directory.
    WithinDirectory,
}

/// Why a file was refused; it travels inside an `io::Error` of kind `InvalidInput`.
#[derive(Debug, thiserror::Error)]
pub enum RegularFileError {
    /// The file is a FIFO, a device, a socket or a directory.
    #[error("not a regular file but a {kind}")]
    NotRegular {
        /// What it is.
        kind: &'static str,
    },
    /// The file is larger than its bound.
    #[error("{size} bytes, more than the limit of {max}")]
    TooLarge {
        /// Its size (or at least this many bytes, for a file that grew while read).
        size: u64,
        /// The bound.
        max: u64,
    },
    /// The file is a symbolic link to a file outside its directory.
    #[error("a symbolic link to {target}, outside its directory", target = target.display())]
    LinkOutOfDirectory {
        /// Where the link leads.
        target: PathBuf,
    },
}

impl From<RegularFileError> for io::Error {
    fn from(error: RegularFileError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, error)
    }
}

/// The bytes of the regular file at `path`, at most `max_bytes` of them.
pub fn read_regular(path: &Path, links: Links, max_bytes: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path, links, OpenOptions::new().read(true))?;
    read_bounded(file, max_bytes)
}

/// The first `len` bytes of the regular file at `path` (fewer if it is shorter).
pub fn read_start(path: &Path, links: Links, len: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path, links, OpenOptions::new().read(true))?;
    let mut bytes = Vec::new();
    file.take(len).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The regular file at `path` (created with mode 0600 if absent) open for appending.
pub(crate) fn open_append_regular(path: &Path, links: Links) -> io::Result<File> {
    open_regular(
        path,
        links,
        OpenOptions::new().append(true).create(true).mode(0o600),
    )
}

/// Opens `path` with `options` plus `O_NONBLOCK` (and `O_NOFOLLOW` unless links are followed)
/// and checks that what was opened is a regular file.
fn open_regular(path: &Path, links: Links, options: &mut OpenOptions) -> io::Result<File> {
    let no_follow = match links {
        Links::Follow => 0,
        Links::WithinDirectory => libc::O_NOFOLLOW,
    };
    options.custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | no_follow);
    let file = match options.open(path) {
        Ok(file) => file,
        Err(error)
            if links == Links::WithinDirectory && error.raw_os_error() == Some(libc::ELOOP) =>
        {
            let target = target_within_directory(path)?;
            // The target is opened without following links: one swapped in meanwhile fails.
            options.open(target)?
        }
        Err(error) => return Err(error),
    };
    let file_type = file.metadata()?.file_type();
    if !file_type.is_file() {
        return Err(RegularFileError::NotRegular {
            kind: kind_of(&file_type),
        }
        .into());
    }
    Ok(file)
}

/// Where the link at `path` leads, if that is a file of the link's own directory.
fn target_within_directory(path: &Path) -> io::Result<PathBuf> {
    let target = path.canonicalize()?;
    let directory = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .canonicalize()?;
    if target.parent() == Some(directory.as_path()) {
        Ok(target)
    } else {
        Err(RegularFileError::LinkOutOfDirectory { target }.into())
    }
}

/// Reads `file` whole, refusing it when it holds more than `max_bytes`.
fn read_bounded(file: File, max_bytes: u64) -> io::Result<Vec<u8>> {
    let size = file.metadata()?.len();
    if size > max_bytes {
        return Err(RegularFileError::TooLarge {
            size,
            max: max_bytes,
        }
        .into());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    let read = bytes.len() as u64;
    if read > max_bytes {
        return Err(RegularFileError::TooLarge {
            size: read,
            max: max_bytes,
        }
        .into());
    }
    Ok(bytes)
}

/// A file type's name, for messages.
fn kind_of(file_type: &std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_char_device() {
        "character device"
    } else if file_type.is_block_device() {
        "block device"
    } else if file_type.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// What a non-regular file is, for a scan that found one; `None` for a regular file.
pub(crate) fn special_kind(file_type: &std::fs::FileType) -> Option<&'static str> {
    (!file_type.is_file()).then(|| kind_of(file_type))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::Path;

    use crate::regular_file::{Links, RegularFileError, open_append_regular, read_regular};

    fn refusal(path: &Path, links: Links, max: u64) -> String {
        let error = read_regular(path, links, max).unwrap_err();
        let inner = error
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<RegularFileError>())
            .map(ToString::to_string);
        inner.unwrap_or_else(|| error.to_string())
    }

    #[test]
    fn a_regular_file_within_the_bound_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, b"{}").unwrap();
        assert_eq!(
            read_regular(&path, Links::WithinDirectory, 2).unwrap(),
            b"{}"
        );
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fifo");
        make_fifo(&path);
        assert_eq!(
            refusal(&path, Links::Follow, 10),
            "not a regular file but a FIFO"
        );
        let error = open_append_regular(&path, Links::WithinDirectory).unwrap_err();
        // With no reader, a FIFO's non-blocking open for writing fails at once (ENXIO).
        assert!(
            error.raw_os_error() == Some(6) || error.get_ref().is_some(),
            "{error}"
        );
    }

    #[test]
    fn a_device_is_refused() {
        assert_eq!(
            refusal(Path::new("/dev/zero"), Links::Follow, 10),
            "not a regular file but a character device"
        );
    }

    #[test]
    fn a_link_out_of_the_directory_is_refused_for_state_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("elsewhere");
        std::fs::write(&target, b"x").unwrap();
        let link = dir.path().join("link");
        symlink(&target, &link).unwrap();
        assert!(
            refusal(&link, Links::WithinDirectory, 10).contains("outside its directory"),
            "{}",
            refusal(&link, Links::WithinDirectory, 10)
        );
        assert_eq!(read_regular(&link, Links::Follow, 10).unwrap(), b"x");
        let inside = dir.path().join("inside");
        std::fs::write(&inside, b"y").unwrap();
        let near = dir.path().join("near");
        symlink("inside", &near).unwrap();
        assert_eq!(
            read_regular(&near, Links::WithinDirectory, 10).unwrap(),
            b"y"
        );
    }

    #[test]
    fn a_file_over_the_bound_is_refused_on_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(1 << 30).unwrap();
        assert_eq!(
            refusal(&path, Links::Follow, 1024),
            "1073741824 bytes, more than the limit of 1024"
        );
    }

    fn make_fifo(path: &Path) {
        #[expect(
            clippy::disallowed_methods,
            reason = "the test makes its fixture FIFO with the system's mkfifo"
        )]
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }
}
