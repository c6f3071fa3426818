//! Landlock through raw system calls: the ABI probe, and a ruleset built in
//! the parent that the clone child enforces with one `landlock_restrict_self`.
//!
//! The `landlock` crate restricts the calling thread, which does not fit the
//! vfork model: here the child may only make system calls, so the ruleset is
//! built before the clone and only its descriptor crosses over.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::Error;

const CREATE_RULESET_VERSION: libc::c_ulong = 1;
const RULE_PATH_BENEATH: libc::c_ulong = 1;

const ACCESS_FS_WRITE_FILE: u64 = 1 << 1;
const ACCESS_FS_REMOVE_DIR: u64 = 1 << 4;
const ACCESS_FS_REMOVE_FILE: u64 = 1 << 5;
const ACCESS_FS_MAKE_CHAR: u64 = 1 << 6;
const ACCESS_FS_MAKE_DIR: u64 = 1 << 7;
const ACCESS_FS_MAKE_REG: u64 = 1 << 8;
const ACCESS_FS_MAKE_SOCK: u64 = 1 << 9;
const ACCESS_FS_MAKE_FIFO: u64 = 1 << 10;
const ACCESS_FS_MAKE_BLOCK: u64 = 1 << 11;
const ACCESS_FS_MAKE_SYM: u64 = 1 << 12;
/// ABI 2.
const ACCESS_FS_REFER: u64 = 1 << 13;
/// ABI 3.
const ACCESS_FS_TRUNCATE: u64 = 1 << 14;

/// Device files every program may write whatever its profile: the sinks and
/// sources that scripts use as plumbing.
const WRITABLE_DEVICES: [&str; 4] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI version the kernel offers, or why there is none.
pub(crate) fn abi_version() -> Result<u32, io::Error> {
    // SAFETY: the version query takes no attribute and returns a number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0 as libc::c_ulong,
            CREATE_RULESET_VERSION,
        )
    };
    if version < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u32::try_from(version).unwrap_or(0))
}

/// The write rights Landlock handles at `abi`: everything that creates,
/// changes or removes a file. Reading and executing stay unrestricted.
fn write_rights(abi: u32) -> u64 {
    let mut rights = ACCESS_FS_WRITE_FILE
        | ACCESS_FS_REMOVE_DIR
        | ACCESS_FS_REMOVE_FILE
        | ACCESS_FS_MAKE_CHAR
        | ACCESS_FS_MAKE_DIR
        | ACCESS_FS_MAKE_REG
        | ACCESS_FS_MAKE_SOCK
        | ACCESS_FS_MAKE_FIFO
        | ACCESS_FS_MAKE_BLOCK
        | ACCESS_FS_MAKE_SYM;
    if abi >= 2 {
        rights |= ACCESS_FS_REFER;
    }
    if abi >= 3 {
        rights |= ACCESS_FS_TRUNCATE;
    }
    rights
}

/// What a program may do below a writable directory: every handled right but
/// making character and block devices, so that no device node is made
/// anywhere (the mounts are `nodev` too, so none could be opened).
pub(crate) fn writable_rights(abi: u32) -> u64 {
    write_rights(abi) & !(ACCESS_FS_MAKE_CHAR | ACCESS_FS_MAKE_BLOCK)
}

/// A ruleset that allows writes only below `writable` directories (and to
/// the plumbing devices), as a descriptor of 4 or above (the child moves the
/// report pipe onto 3 before it restricts itself).
pub(crate) fn ruleset(abi: u32, writable: &[&Path]) -> Result<OwnedFd, Error> {
    let handled = write_rights(abi);
    let attr = RulesetAttr {
        handled_access_fs: handled,
    };
    // SAFETY: attr is a valid landlock_ruleset_attr prefix of the given size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &raw const attr,
            size_of::<RulesetAttr>(),
            0 as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(sys("landlock_create_ruleset"));
    }
    // SAFETY: the kernel returned a fresh close-on-exec descriptor.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    for dir in writable {
        add_rule(&ruleset, dir, writable_rights(abi), libc::O_DIRECTORY)?;
    }
    let file_rights = handled & (ACCESS_FS_WRITE_FILE | ACCESS_FS_TRUNCATE);
    for device in WRITABLE_DEVICES {
        // A device that does not exist (no /dev/tty in a container) needs no rule.
        match add_rule(&ruleset, Path::new(device), file_rights, 0) {
            Ok(())
            | Err(Error::Sys {
                call: "open(O_PATH)",
                ..
            }) => {}
            Err(error) => return Err(error),
        }
    }
    crate::pipes::at_least(ruleset, 4)
}

fn add_rule(
    ruleset: &OwnedFd,
    path: &Path,
    rights: u64,
    extra_flags: libc::c_int,
) -> Result<(), Error> {
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::NulByte {
        value: path.to_string_lossy().into_owned(),
    })?;
    // SAFETY: c_path is NUL-terminated.
    let fd = unsafe {
        libc::open(
            c_path.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | extra_flags,
        )
    };
    if fd < 0 {
        return Err(sys("open(O_PATH)"));
    }
    // SAFETY: open returned a fresh descriptor that we now own.
    let parent = unsafe { OwnedFd::from_raw_fd(fd) };
    let rule = PathBeneathAttr {
        allowed_access: rights,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: rule is a packed landlock_path_beneath_attr.
    let result = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &raw const rule,
            0 as libc::c_ulong,
        )
    };
    if result != 0 {
        return Err(sys("landlock_add_rule"));
    }
    Ok(())
}

/// Allows `rights` below the directory at `path` in `ruleset`, from the clone
/// child: the run's tmpfs TMPDIR exists only in the child's mount namespace,
/// so its rule cannot be added by the parent.
///
/// # Safety
/// Async-signal-safe: only `open`, `landlock_add_rule` and `close`.
pub(crate) unsafe fn allow_beneath_in_child(
    ruleset: libc::c_int,
    path: &std::ffi::CStr,
    rights: u64,
) -> bool {
    // SAFETY: path is NUL-terminated; rule is a packed landlock_path_beneath_attr.
    unsafe {
        let fd = libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
        );
        if fd < 0 {
            return false;
        }
        let rule = PathBeneathAttr {
            allowed_access: rights,
            parent_fd: fd,
        };
        let result = libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            &raw const rule,
            0 as libc::c_ulong,
        );
        libc::close(fd);
        result == 0
    }
}

fn sys(call: &'static str) -> Error {
    Error::Sys {
        call,
        source: io::Error::last_os_error(),
    }
}
