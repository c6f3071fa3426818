//! Taking every privilege away from a run: the identity it runs as
//! (`[sandbox] user`) and its capabilities, dropped in the clone child right
//! before `execve`.
//!
//! A root executor would otherwise hand every tool all of root's
//! capabilities, and a tool could take its own sandbox apart (unmount its
//! `/proc`, `setns` into the executor's namespaces, `mknod`, `chattr +i`,
//! load modules). Under a user namespace (executor not root) the tool is root
//! *inside* it, and could still unmount the mounts of its own call, as
//! bubblewrap knows; so the capabilities are dropped there too.
//!
//! What the parent prepares ([`PrivilegePlan`]) is plain data; the child's
//! part ([`drop_privileges`]) only makes system calls.

use std::fmt;
use std::io;

use crate::Error;

/// The uid and gid a run's processes get, with no supplementary group.
/// Only a root executor can switch to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunAs {
    uid: libc::uid_t,
    gid: libc::gid_t,
}

impl RunAs {
    /// A numeric identity.
    pub fn new(uid: libc::uid_t, gid: libc::gid_t) -> RunAs {
        RunAs { uid, gid }
    }

    /// Parses `UID:GID` (numbers), `UID` (the gid is the same number), or a
    /// user name, looked up in the user database (its primary group).
    pub fn resolve(text: &str) -> Result<RunAs, Error> {
        let invalid = |reason: String| Error::InvalidUser {
            user: text.to_owned(),
            reason,
        };
        let number = |part: &str| -> Result<u32, Error> {
            let value: u32 = part
                .parse()
                .map_err(|_| invalid(format!("`{part}` is not a number")))?;
            // -1 means "unchanged" to setresuid; it is never an identity.
            if value == u32::MAX {
                return Err(invalid("4294967295 is not a valid id".to_owned()));
            }
            Ok(value)
        };
        if let Some((uid, gid)) = text.split_once(':') {
            return Ok(RunAs::new(number(uid)?, number(gid)?));
        }
        if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
            let id = number(text)?;
            return Ok(RunAs::new(id, id));
        }
        lookup_user(text).map_err(invalid)
    }

    /// The user id.
    pub fn uid(self) -> libc::uid_t {
        self.uid
    }

    /// The group id.
    pub fn gid(self) -> libc::gid_t {
        self.gid
    }
}

impl fmt::Display for RunAs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.uid, self.gid)
    }
}

fn lookup_user(name: &str) -> Result<RunAs, String> {
    if name.contains('\0') {
        return Err("the name contains a NUL byte".to_owned());
    }
    match nix::unistd::User::from_name(name) {
        Ok(Some(user)) => Ok(RunAs::new(user.uid.as_raw(), user.gid.as_raw())),
        Ok(None) => Err("no such user (give UID:GID for a user without an entry)".to_owned()),
        Err(errno) => Err(format!(
            "the user database could not be read: {}",
            io::Error::from(errno)
        )),
    }
}

/// The effective uid of the calling process: 0 when it may set a run's
/// identity ([`Privileges::Drop`] with a [`RunAs`]).
pub fn effective_uid() -> libc::uid_t {
    nix::unistd::geteuid().as_raw()
}

/// Whether a run keeps the executor's privileges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Privileges {
    /// The executor's uid, gid and capabilities (as a plain `fork`/`exec`).
    Keep,
    /// No capability at all, in whatever user namespace the run is; with
    /// `Some`, first switch to that identity (the executor must be root).
    Drop(Option<RunAs>),
}

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;

/// The securebits a run gets, each with its lock, so that nothing it
/// executes can get capabilities back: uid 0 gains none at `execve`
/// (NOROOT), a change of uid does not touch the capability sets
/// (NO_SETUID_FIXUP; there are none left to touch), capabilities are not
/// kept across `setuid` (KEEP_CAPS off, locked), and no ambient capability
/// can be raised.
const SECUREBITS: libc::c_ulong = {
    const NOROOT: libc::c_ulong = 1 << 0;
    const NOROOT_LOCKED: libc::c_ulong = 1 << 1;
    const NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
    const NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
    const KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
    const NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
    const NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;
    NOROOT
        | NOROOT_LOCKED
        | NO_SETUID_FIXUP
        | NO_SETUID_FIXUP_LOCKED
        | KEEP_CAPS_LOCKED
        | NO_CAP_AMBIENT_RAISE
        | NO_CAP_AMBIENT_RAISE_LOCKED
};

#[repr(C)]
struct CapabilityHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapabilityData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// What the child needs to drop its privileges, prepared in the parent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PrivilegePlan {
    /// The identity to switch to, if any.
    pub(crate) run_as: Option<RunAs>,
    /// The highest capability number this kernel knows
    /// (`/proc/sys/kernel/cap_last_cap`): the bounding set is emptied up to it.
    pub(crate) last_capability: u32,
}

/// The highest capability number of the running kernel.
pub(crate) fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        // CAP_CHECKPOINT_RESTORE, the last one of Linux 5.9 to 6.x; a
        // higher number than the kernel knows is skipped (EINVAL) below.
        .unwrap_or(40)
}

/// Which step of [`drop_privileges`] failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrivilegeStep {
    /// Emptying the bounding set or locking the securebits.
    Bounding,
    /// `setgroups`, `setresgid` or `setresuid`.
    Identity,
    /// Clearing the ambient, effective, permitted and inheritable sets.
    Capabilities,
}

/// Empties the calling process's bounding set up to capability `last` and
/// locks its securebits; false when the kernel refuses (no `CAP_SETPCAP`).
///
/// What is already done is only read, not done again: each drop replaces
/// the process's credentials, and an init that did this while it was
/// prepared (`InitPlan::bounding`) spares its programs the whole step.
///
/// # Safety
/// Async-signal-safe and allocation-free: only `prctl`.
pub(crate) unsafe fn lock_bounding_set(last: u32) -> bool {
    // SAFETY: plain system calls on the calling process's credentials.
    unsafe {
        for capability in 0..=last {
            // 1 when held; an error (EINVAL) for a number the kernel does
            // not know, which is not in the set either.
            let held = libc::prctl(
                libc::PR_CAPBSET_READ,
                libc::c_ulong::from(capability),
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            );
            if held == 1
                && libc::prctl(
                    libc::PR_CAPBSET_DROP,
                    libc::c_ulong::from(capability),
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                ) != 0
            {
                return false;
            }
        }
        let securebits = libc::prctl(
            libc::PR_GET_SECUREBITS,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        );
        libc::c_ulong::try_from(securebits) == Ok(SECUREBITS)
            || libc::prctl(
                libc::PR_SET_SECUREBITS,
                SECUREBITS,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            ) == 0
    }
}

/// Drops every privilege of the calling process: the bounding set is
/// emptied and the securebits locked (when it holds `CAP_SETPCAP`, which a
/// process that holds no capability does not need, and unless
/// `bounding_locked`: an init that did both while it was prepared leaves
/// its programs nothing to do there but inherit them), the identity is
/// switched (when asked), then the ambient, inheritable, permitted and
/// effective sets are cleared and checked empty.
///
/// # Safety
/// Async-signal-safe and allocation-free: only `capget`, `capset`, `prctl`,
/// `setgroups`, `setresgid` and `setresuid`. Meant for the clone child.
pub(crate) unsafe fn drop_privileges(
    plan: &PrivilegePlan,
    bounding_locked: bool,
) -> Result<(), PrivilegeStep> {
    // SAFETY: plain system calls on the calling process's credentials,
    // with headers and buffers on this stack.
    unsafe {
        let mut header = CapabilityHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let mut data = [CapabilityData::default(); 2];
        if libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) != 0 {
            return Err(PrivilegeStep::Capabilities);
        }
        if !bounding_locked
            && data[0].effective & (1 << CAP_SETPCAP) != 0
            && !lock_bounding_set(plan.last_capability)
        {
            return Err(PrivilegeStep::Bounding);
        }
        if let Some(run_as) = plan.run_as
            && (libc::setgroups(0, std::ptr::null()) != 0
                || libc::setresgid(run_as.gid, run_as.gid, run_as.gid) != 0
                || libc::setresuid(run_as.uid, run_as.uid, run_as.uid) != 0)
        {
            return Err(PrivilegeStep::Identity);
        }
        // Kernels before 4.3 have no ambient set (EINVAL): nothing to clear.
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) != 0
            && *libc::__errno_location() != libc::EINVAL
        {
            return Err(PrivilegeStep::Capabilities);
        }
        let empty = [CapabilityData::default(); 2];
        header.pid = 0;
        if libc::syscall(libc::SYS_capset, &raw mut header, empty.as_ptr()) != 0 {
            return Err(PrivilegeStep::Capabilities);
        }
        // Checked, not assumed: the tool must start with nothing.
        let mut left = [CapabilityData::default(); 2];
        if libc::syscall(libc::SYS_capget, &raw mut header, left.as_mut_ptr()) != 0
            || left
                .iter()
                .any(|set| set.effective | set.permitted | set.inheritable != 0)
        {
            *libc::__errno_location() = libc::EPERM;
            return Err(PrivilegeStep::Capabilities);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::RunAs;

    fn check(text: &str, expect: Result<(u32, u32), &str>) {
        let actual = RunAs::resolve(text)
            .map(|run_as| (run_as.uid(), run_as.gid()))
            .map_err(|error| error.to_string());
        assert_eq!(actual, expect.map_err(str::to_owned));
    }

    #[test]
    fn numeric_identities() {
        check("1000:1000", Ok((1000, 1000)));
        check("1000:50", Ok((1000, 50)));
        check("65534", Ok((65534, 65534)));
        check("0:0", Ok((0, 0)));
    }

    #[test]
    fn names_come_from_the_user_database() {
        check("root", Ok((0, 0)));
        check(
            "no-such-user-here",
            Err(
                "invalid user `no-such-user-here`: no such user (give UID:GID for a user without an entry)",
            ),
        );
    }

    #[test]
    fn malformed_identities_are_refused() {
        check(
            "1000:staff",
            Err("invalid user `1000:staff`: `staff` is not a number"),
        );
        check(
            "4294967295",
            Err("invalid user `4294967295`: 4294967295 is not a valid id"),
        );
    }
}
