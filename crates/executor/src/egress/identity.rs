//! The identity the supervisor's connects are made with: the caller's.
//!
//! The supervisor (`unix.rs`) opens and connects a granted socket itself, so
//! without care the kernel would check the socket file's permissions against
//! toolsmith's credentials, the server would read toolsmith's uid and gid
//! in `SO_PEERCRED` (a root toolsmith's, for a tool run as `nobody`), and a
//! connect that needs a capability (a netlink socket's to a group) would get
//! toolsmith's. The supervisor's thread takes on the caller's effective uid,
//! gid, supplementary groups and effective capabilities for every open and
//! connect, with raw system calls (credentials are per thread in the kernel;
//! the C library's wrappers would change every thread of toolsmith), and
//! takes its own back afterwards. A grant thus lets a tool reach a socket it
//! names, never more than the tool's own identity may reach, and the server
//! sees who the tool is (only `SO_PEERCRED`'s pid is toolsmith's).

use std::mem::zeroed;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Credentials of one thread, as `/proc/TID/status` shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    effective: u64,
}

impl Identity {
    /// The credentials of thread `tid` (the effective ids).
    pub(crate) fn of_thread(tid: u32) -> Result<Identity, i32> {
        Identity::parse(&proc_status(&format!("{tid}/status"))?)
    }

    /// The calling thread's credentials.
    pub(crate) fn own() -> Result<Identity, i32> {
        Identity::parse(&proc_status("thread-self/status")?)
    }

    /// The calling thread's credentials, asked of the kernel directly (cheaper
    /// than its `status`, and the same fields).
    pub(crate) fn current() -> Result<Identity, i32> {
        let (mut real, mut uid, mut saved) = (0, 0, 0);
        let (mut real_gid, mut gid, mut saved_gid) = (0, 0, 0);
        // SAFETY: each call fills three ids.
        let ids = unsafe {
            libc::getresuid(&raw mut real, &raw mut uid, &raw mut saved) == 0
                && libc::getresgid(&raw mut real_gid, &raw mut gid, &raw mut saved_gid) == 0
        };
        if !ids {
            return Err(last_errno());
        }
        // SAFETY: with a size of 0, getgroups returns the count and writes nothing.
        let count = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
        let mut groups = vec![0; usize::try_from(count).map_err(|_| last_errno())?];
        // SAFETY: the buffer holds `count` gids.
        let count = unsafe { libc::getgroups(count, groups.as_mut_ptr()) };
        groups.truncate(usize::try_from(count).map_err(|_| last_errno())?);
        groups.sort_unstable();
        Ok(Identity {
            uid,
            gid,
            groups,
            effective: capability_sets()?.0,
        })
    }

    /// The credentials in a thread's `status`.
    pub(crate) fn parse(status: &str) -> Result<Identity, i32> {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .ok_or(libc::ESRCH)
        };
        // `Uid:` and `Gid:` list real, effective, saved and file system ids.
        let effective_id = |name: &str| -> Result<u32, i32> {
            field(name)?
                .split_whitespace()
                .nth(1)
                .and_then(|id| id.parse().ok())
                .ok_or(libc::ESRCH)
        };
        let mut groups: Vec<u32> = field("Groups:")?
            .split_whitespace()
            .map(|group| group.parse().map_err(|_| libc::ESRCH))
            .collect::<Result<_, _>>()?;
        groups.sort_unstable();
        Ok(Identity {
            uid: effective_id("Uid:")?,
            gid: effective_id("Gid:")?,
            groups,
            effective: u64::from_str_radix(field("CapEff:")?.trim(), 16)
                .map_err(|_| libc::ESRCH)?,
        })
    }
}

/// Reads `path` below toolsmith's `/proc`, through a descriptor opened once:
/// a supervisor thread may be inside a run's root (`creations/`), where
/// `/proc` is the run's own.
pub(crate) fn proc_status(path: &str) -> Result<String, i32> {
    use std::io::Read;
    let proc = host_proc().ok_or(libc::ESRCH)?;
    let path = std::ffi::CString::new(path).map_err(|_| libc::EINVAL)?;
    // SAFETY: a descriptor and a NUL-terminated path; a fresh descriptor or -1.
    let fd = unsafe { libc::openat(proc, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(libc::ESRCH);
    }
    // SAFETY: fresh and ours.
    let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // A status is about 1.5 KiB: one read of a buffer that holds it, not a
    // growing string's many (each generates the whole file again).
    let mut bytes = Vec::with_capacity(4096);
    file.read_to_end(&mut bytes).map_err(|_| libc::ESRCH)?;
    String::from_utf8(bytes).map_err(|_| libc::ESRCH)
}

/// toolsmith's `/proc`, opened by the first thread that asks (in toolsmith's root).
pub(crate) fn host_proc() -> Option<libc::c_int> {
    static PROC: std::sync::OnceLock<Option<std::os::fd::OwnedFd>> = std::sync::OnceLock::new();
    PROC.get_or_init(|| {
        std::fs::File::open("/proc")
            .ok()
            .map(std::os::fd::OwnedFd::from)
    })
    .as_ref()
    .map(std::os::fd::AsRawFd::as_raw_fd)
}

/// Why [`as_caller`] did not run its action, or did and could not restore.
#[derive(Debug)]
pub(crate) enum Switch {
    /// Taking on the caller's identity failed (restored): the errno.
    Refused(i32),
    /// The thread could not take its own identity back: it must stop.
    Stuck,
}

/// Runs `action` on the calling thread with `caller`'s identity, then takes
/// `own` back.
pub(crate) fn as_caller<T>(
    caller: &Identity,
    own: &Identity,
    action: impl FnOnce() -> T,
) -> Result<T, Switch> {
    let Ok((permitted, inheritable)) = capabilities() else {
        return Err(Switch::Refused(libc::EPERM));
    };
    let narrowed = Identity {
        effective: caller.effective & permitted,
        ..caller.clone()
    };
    if narrowed == *own {
        return Ok(action());
    }
    let switched = enter(&narrowed, own, permitted, inheritable);
    let result = switched.is_ok().then(action);
    if leave(own, &narrowed, permitted, inheritable).is_err()
        || Identity::current().as_ref() != Ok(own)
    {
        return Err(Switch::Stuck);
    }
    match (switched, result) {
        (Ok(()), Some(result)) => Ok(result),
        (Err(errno), _) => Err(Switch::Refused(errno)),
        (Ok(()), None) => Err(Switch::Refused(libc::EPERM)),
    }
}

/// Moves the thread from `own` to `caller`: groups and gid while it still
/// has `CAP_SETGID`, then the uid, then the capabilities (a change of
/// effective uid from 0 clears them). Raw system calls: they change this
/// thread alone.
fn enter(caller: &Identity, own: &Identity, permitted: u64, inheritable: u64) -> Result<(), i32> {
    set_groups(caller, own)?;
    set_gid(caller, own)?;
    set_uid(caller, own)?;
    set_effective(caller.effective, permitted, inheritable)
}

/// Moves the thread back from `caller` to `own`, in the reverse order: the
/// capabilities first, which the other steps need.
fn leave(own: &Identity, caller: &Identity, permitted: u64, inheritable: u64) -> Result<(), i32> {
    set_effective(own.effective, permitted, inheritable)?;
    set_uid(own, caller)?;
    set_gid(own, caller)?;
    set_groups(own, caller)
}

fn check(result: libc::c_long) -> Result<(), i32> {
    if result == 0 {
        Ok(())
    } else {
        Err(last_errno())
    }
}

/// `setresuid`/`setresgid`'s "leave unchanged".
const KEEP: libc::c_ulong = libc::c_ulong::MAX;

fn set_groups(to: &Identity, from: &Identity) -> Result<(), i32> {
    if to.groups == from.groups {
        return Ok(());
    }
    // SAFETY: setgroups reads `len` gids.
    check(unsafe { libc::syscall(libc::SYS_setgroups, to.groups.len(), to.groups.as_ptr()) })
}

fn set_gid(to: &Identity, from: &Identity) -> Result<(), i32> {
    if to.gid == from.gid {
        return Ok(());
    }
    // SAFETY: plain ids.
    check(unsafe { libc::syscall(libc::SYS_setresgid, KEEP, libc::c_ulong::from(to.gid), KEEP) })
}

fn set_uid(to: &Identity, from: &Identity) -> Result<(), i32> {
    if to.uid == from.uid {
        return Ok(());
    }
    // SAFETY: plain ids.
    check(unsafe { libc::syscall(libc::SYS_setresuid, KEEP, libc::c_ulong::from(to.uid), KEEP) })
}

/// The thread's permitted and inheritable capability sets.
fn capabilities() -> Result<(u64, u64), i32> {
    let (_, permitted, inheritable) = capability_sets()?;
    Ok((permitted, inheritable))
}

/// The thread's effective, permitted and inheritable capability sets.
fn capability_sets() -> Result<(u64, u64, u64), i32> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    // SAFETY: zeroed plain C structures.
    let mut data: [CapData; 2] = unsafe { zeroed() };
    // SAFETY: capget fills two CapData for version 3.
    if unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) } != 0 {
        return Err(last_errno());
    }
    let join = |low: u32, high: u32| u64::from(low) | (u64::from(high) << 32);
    Ok((
        join(data[0].effective, data[1].effective),
        join(data[0].permitted, data[1].permitted),
        join(data[0].inheritable, data[1].inheritable),
    ))
}

fn set_effective(effective: u64, permitted: u64, inheritable: u64) -> Result<(), i32> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let split = |set: u64| ((set & 0xffff_ffff) as u32, (set >> 32) as u32);
    let (effective, permitted, inheritable) =
        (split(effective), split(permitted), split(inheritable));
    let data = [
        CapData {
            effective: effective.0,
            permitted: permitted.0,
            inheritable: inheritable.0,
        },
        CapData {
            effective: effective.1,
            permitted: permitted.1,
            inheritable: inheritable.1,
        },
    ];
    // SAFETY: capset reads two CapData for version 3.
    if unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) } != 0 {
        return Err(last_errno());
    }
    Ok(())
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

#[cfg(test)]
mod tests {
    use super::Identity;

    #[test]
    fn status_gives_the_effective_ids_groups_and_capabilities() {
        let status = "Name:\tx\nUid:\t0\t65534\t0\t65534\nGid:\t0\t100\t0\t100\nGroups:\t27 4 \nCapEff:\t0000000000000400\n";
        assert_eq!(
            Identity::parse(status),
            Ok(Identity {
                uid: 65534,
                gid: 100,
                groups: vec![4, 27],
                effective: 0x400,
            })
        );
        assert!(Identity::parse("Uid:\t0\n").is_err());
    }

    /// The check after a switch back asks the kernel directly; it must read what
    /// the thread's `status` says.
    #[test]
    fn the_kernel_and_the_status_agree_on_the_threads_identity() {
        assert_eq!(Identity::current(), Identity::own());
    }
}
