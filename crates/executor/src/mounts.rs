//! The mount layout of one run, set up in the clone child inside its own
//! mount namespace, and its hostname in its own UTS namespace.
//!
//! Everything is decided and every string is prepared by the parent
//! ([`MountPlan`]); the child ([`set_up`]) only makes system calls. The new
//! mount API does the heavy lifting cheaply: one recursive `mount_setattr`
//! makes every mount `nodev,nosuid` (and read-only under a filesystem
//! restriction) instead of one remount per host mount, and `open_tree` clones
//! the few mounts that must stay as the host has them (the device nodes and
//! the project) before that, to be attached again after it.
//!
//! The layout, in order:
//! 1. every mount private (`MS_REC | MS_PRIVATE`): nothing propagates to the host;
//! 2. clones of `/dev/{null,zero,full,random,urandom,tty}`, under
//!    "project" of the project directory, and of the run's own directory (made
//!    `nodev,nosuid`);
//! 3. `/` and every mount below it `nodev,nosuid`, and read-only under
//!    "read-only" and "project": the metadata of files outside the writable
//!    roots (mode, owner, xattrs, flags, times) cannot change, and no device
//!    node can be made or opened anywhere;
//! 4. the project clone attached on the project; then, for each protected path
//!    that does not exist, its nearest existing directory "sealed": bound
//!    read-only, and each of its entries bound writable again, so that no new
//!    entry (the missing `.git`, `.toolsmith`) can be made there and nothing is
//!    left on the host; then each existing protected path bound onto itself
//!    read-only (`.git`, `.toolsmith`, tool layers, config); then the read masks and the
//!    cover of the runs' directory (see `masks.rs`);
//! 5. the run's own directory (a tool's cache), cloned in step 2 and attached in an empty
//!    `tmpfs` over its parent, made read-only after, so its siblings are out of sight;
//!    then the private TMPDIR: a `tmpfs` (`nodev,nosuid`, mode 0700, size capped by
//!    `Limits::tmp_size`) whose pages are charged to the run's memory cgroup,
//!    with a Landlock rule of its own (the parent's rule names the host
//!    directory underneath);
//! 6. a minimal `/dev`: a read-only `tmpfs` holding the six cloned nodes,
//!    `fd`, `stdin`, `stdout`, `stderr`, a private `devpts` with `ptmx`, and
//!    `shm` (the TMPDIR tmpfs again, or a capped tmpfs of its own);
//! 7. a fresh `/proc` (with a private PID namespace), then Docker's masks:
//!    `/proc/{bus,fs,irq,sys,sysrq-trigger}` read-only, `/proc/{kcore,keys,
//!    timer_list,...}` hidden behind `/dev/null` or an empty read-only tmpfs;
//! 8. `/sys` and every cgroup filesystem below it read-only, with
//!    `/sys/firmware` and `/sys/devices/virtual/powercap` hidden;
//!
//! With a UTS namespace, [`set_hostname`] names the host `toolsmith`.

use std::ffi::{CStr, CString, c_int, c_uint};
use std::ptr;

/// `AT_RECURSIVE` of `mount_setattr` and `open_tree`.
const AT_RECURSIVE: c_uint = 0x8000;
const OPEN_TREE_CLONE: c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: c_uint = 0x4;
pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub(crate) const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub(crate) const MOUNT_ATTR_NODEV: u64 = 0x4;
pub(crate) const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// The kernel's `struct mount_attr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// The device nodes of the minimal `/dev`, bound from the host's.
const DEVICES: [&CStr; 6] = [
    c"/dev/null",
    c"/dev/zero",
    c"/dev/full",
    c"/dev/random",
    c"/dev/urandom",
    c"/dev/tty",
];

/// The symbolic links of the minimal `/dev`: (target, link).
const DEV_LINKS: [(&CStr, &CStr); 5] = [
    (c"/proc/self/fd", c"/dev/fd"),
    (c"/proc/self/fd/0", c"/dev/stdin"),
    (c"/proc/self/fd/1", c"/dev/stdout"),
    (c"/proc/self/fd/2", c"/dev/stderr"),
    (c"pts/ptmx", c"/dev/ptmx"),
];

/// Made read-only, as Docker does: `/proc/sys` holds files whose owner check a
/// root tool passes even without capabilities.
const PROC_READ_ONLY: [&CStr; 5] = [
    c"/proc/bus",
    c"/proc/fs",
    c"/proc/irq",
    c"/proc/sys",
    c"/proc/sysrq-trigger",
];

/// Hidden, as Docker does: a file behind `/dev/null`, a directory behind an
/// empty read-only tmpfs. And toolsmith's init's descriptors (`/proc/1/fd`,
/// `/proc/1/fdinfo`): the init shares toolsmith's descriptor table, and a
/// uid-0 tool may list a non-dumpable process's `fd` directory (only opening
/// an entry needs ptrace access), which would show toolsmith's open
/// descriptors (`b18`).
const MASKED: [&CStr; 13] = [
    c"/proc/1/fd",
    c"/proc/1/fdinfo",
    c"/proc/acpi",
    c"/proc/asound",
    c"/proc/kcore",
    c"/proc/keys",
    c"/proc/latency_stats",
    c"/proc/sched_debug",
    c"/proc/scsi",
    c"/proc/timer_list",
    c"/proc/timer_stats",
    c"/sys/firmware",
    c"/sys/devices/virtual/powercap",
];

/// The most writable roots a run may have (`Filesystem::Paths`), so that the child keeps
/// their clones in a fixed array.
pub(crate) const MAX_WRITABLE_ROOTS: usize = 32;

/// The hostname of every run with a UTS namespace.
pub(crate) const HOSTNAME: &[u8] = b"toolsmith";

/// Everything [`set_up`] needs, prepared by the parent.
#[derive(Debug)]
pub(crate) struct MountPlan {
    /// Mount a fresh `/proc` (the run has its own PID namespace).
    pub(crate) proc: bool,
    /// Without a PID namespace of its own, try a fresh `/proc` of the host's PID namespace
    /// with `hidepid=4`, in which toolsmith's process and threads (not dumpable) do not show:
    /// else a tool (uid 0) could read toolsmith's command line and raise its
    /// `oom_score_adj` through `/proc/<pid>` or any `/proc/<tid>`. Best effort: a kernel that
    /// refuses the mount leaves the host's `/proc`.
    pub(crate) host_proc: bool,
    /// Make every mount read-only ("read-only" and "project").
    pub(crate) read_only: bool,
    /// The writable roots (the project directory under "project", each listed path under a
    /// list), cloned before the read-only step and attached again after it.
    pub(crate) writable: Vec<CString>,
    /// Directories inside the project bound read-only, before `reopened`: each is the
    /// nearest existing directory of a protected path that does not exist.
    pub(crate) sealed: Vec<CString>,
    /// The entries of the `sealed` directories bound writable again (neither protected nor
    /// sealed themselves), before `protected`.
    pub(crate) reopened: Vec<CString>,
    /// Paths inside the project bound read-only onto themselves.
    pub(crate) protected: Vec<CString>,
    /// The private TMPDIR's mount point, and the tmpfs options (size, mode).
    pub(crate) temp_dir: Option<(CString, CString)>,
    /// The options of `/dev/shm` when there is no TMPDIR to share.
    pub(crate) shm_options: CString,
    /// A Landlock ruleset and the rights to grant below the TMPDIR tmpfs.
    pub(crate) landlock: Option<(c_int, u64)>,
    /// The run's own directory and its parent: the directory is cloned before the read-only
    /// step, the parent covered by an empty `tmpfs`, and the clone attached in it (step 5).
    pub(crate) own_dir: Option<(CString, CString)>,
    /// The read masks and the cover of the runs' directory (`masks.rs`), set up after the
    /// protected paths and before the run's own directory and TMPDIR.
    pub(crate) masks: Option<crate::masks::MaskPlan>,
}

impl MountPlan {
    /// The tmpfs options of a private TMPDIR of at most `size` bytes (`None`: the
    /// kernel's default, half of RAM).
    /// With `owner` (the `[sandbox] user` of the run) the tmpfs's root belongs to it, so a
    /// tool running as that uid can write its TMPDIR.
    pub(crate) fn tmpfs_options(
        size: Option<u64>,
        mode: &str,
        owner: Option<(libc::uid_t, libc::gid_t)>,
    ) -> CString {
        let mut text = match size {
            // tmpfs rounds up to whole pages; size=0 would mean unlimited.
            Some(size) => format!("size={},mode={mode}", size.max(4096)),
            None => format!("mode={mode}"),
        };
        if let Some((uid, gid)) = owner {
            text.push_str(&format!(",uid={uid},gid={gid}"));
        }
        CString::new(text).unwrap_or_default()
    }
}

/// Sets up the run's mounts in the calling process, which is in a new mount
/// namespace.
/// Returns false with errno set on the first failure.
///
/// # Safety
/// Async-signal-safe and allocation-free: only system calls on the plan's
/// strings and stack buffers. Must run in a new mount namespace, or it would
/// change the host's mounts.
pub(crate) unsafe fn set_up(plan: &MountPlan) -> bool {
    // SAFETY: system calls on NUL-terminated strings prepared by the parent,
    // in the child's own mount namespace.
    unsafe {
        if libc::mount(
            ptr::null(),
            c"/".as_ptr(),
            ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            ptr::null(),
        ) != 0
        {
            return false;
        }
        // Clones taken before the whole tree turns nodev (and read-only).
        // The child shares the server's descriptor table: every clone is closed on every
        // path, failures included, or a failed set-up leaves it in the server.
        let mut devices = Trees([-1 as c_int; DEVICES.len()]);
        for (slot, device) in devices.0.iter_mut().zip(DEVICES) {
            *slot = clone_tree(device, false);
            if *slot < 0 && errno() != libc::ENOENT {
                return false;
            }
        }
        // At most a few roots: a fixed array keeps the child allocation-free.
        let mut writable = Trees([-1 as c_int; MAX_WRITABLE_ROOTS]);
        if plan.writable.len() > MAX_WRITABLE_ROOTS {
            return false;
        }
        for (slot, path) in writable.0.iter_mut().zip(&plan.writable) {
            match clone_writable(path) {
                tree if tree < 0 => return false,
                tree => *slot = tree,
            }
        }
        let mut own_tree = Trees([-1 as c_int; 1]);
        if let Some((path, _)) = &plan.own_dir {
            own_tree.0[0] = clone_writable(path);
            if own_tree.0[0] < 0 {
                return false;
            }
        }
        let mut everywhere = MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID;
        if plan.read_only {
            everywhere |= MOUNT_ATTR_RDONLY;
        }
        if !set_attributes(libc::AT_FDCWD, c"/", AT_RECURSIVE, everywhere) {
            return false;
        }
        for (slot, path) in writable.0.iter_mut().zip(&plan.writable) {
            if !attach(take_tree(slot).0, path) {
                return false;
            }
        }
        if !protect(plan) {
            return false;
        }
        if let Some(masks) = &plan.masks
            && !crate::masks::set_up(masks)
        {
            return false;
        }
        if let Some((path, parent)) = &plan.own_dir
            && !hide_siblings(take_tree(&mut own_tree.0[0]).0, path, parent)
        {
            return false;
        }
        if let Some((path, options)) = &plan.temp_dir {
            if libc::mount(
                c"tmpfs".as_ptr(),
                path.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                options.as_ptr().cast(),
            ) != 0
            {
                return false;
            }
            if let Some((ruleset, rights)) = plan.landlock
                && !crate::landlock::allow_beneath_in_child(ruleset, path, rights)
            {
                return false;
            }
        }
        if !minimal_dev(&mut devices, plan) {
            return false;
        }
        if plan.proc && !crate::child::mount_proc() {
            return false;
        }
        if plan.host_proc {
            crate::child::mount_proc();
        }
        for path in PROC_READ_ONLY {
            if !bind_read_only(path, MOUNT_ATTR_NOEXEC) {
                return false;
            }
        }
        if !set_attributes(
            libc::AT_FDCWD,
            c"/sys",
            AT_RECURSIVE,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
        ) && errno() != libc::ENOENT
        {
            return false;
        }
        for path in MASKED {
            if !mask(path) {
                return false;
            }
        }
        true
    }
}

/// Sets the hostname of the calling process's new UTS namespace to [`HOSTNAME`].
///
/// # Safety
/// Async-signal-safe. Must run in a new UTS namespace, or it would rename the host.
pub(crate) unsafe fn set_hostname() -> bool {
    // SAFETY: a static buffer of the given length.
    unsafe { libc::sethostname(HOSTNAME.as_ptr().cast(), HOSTNAME.len()) == 0 }
}

/// A `tmpfs` on `/dev` with the cloned nodes, links, `pts` and `shm`, then
/// read-only. Consumes (closes) the clones.
///
/// # Safety
/// As [`set_up`].
unsafe fn minimal_dev(devices: &mut Trees<{ DEVICES.len() }>, plan: &MountPlan) -> bool {
    // SAFETY: as set_up.
    unsafe {
        if libc::mount(
            c"tmpfs".as_ptr(),
            c"/dev".as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            c"mode=0755,size=64k,nr_inodes=64".as_ptr().cast(),
        ) != 0
        {
            return false;
        }
        for (slot, device) in devices.0.iter_mut().zip(DEVICES) {
            if *slot < 0 {
                continue;
            }
            let made = libc::mknod(device.as_ptr(), libc::S_IFREG | 0o666, 0) == 0
                && attach(take_tree(slot).0, device);
            if !made {
                return false;
            }
        }
        for (target, link) in DEV_LINKS {
            if libc::symlink(target.as_ptr(), link.as_ptr()) != 0 {
                return false;
            }
        }
        // A private devpts instance, so the host's terminals stay out of reach.
        // Optional: a kernel that refuses it leaves /dev/ptmx dangling.
        if libc::mkdir(c"/dev/pts".as_ptr(), 0o755) != 0 {
            return false;
        }
        libc::mount(
            c"devpts".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"newinstance,ptmxmode=0666,mode=0620".as_ptr().cast(),
        );
        if libc::mkdir(c"/dev/shm".as_ptr(), 0o1777) != 0 {
            return false;
        }
        // POSIX shared memory and semaphores share the TMPDIR's cap (and its
        // Landlock rule) when there is one.
        let shm = match &plan.temp_dir {
            Some((path, _)) => libc::mount(
                path.as_ptr(),
                c"/dev/shm".as_ptr(),
                ptr::null(),
                libc::MS_BIND,
                ptr::null(),
            ),
            None => libc::mount(
                c"tmpfs".as_ptr(),
                c"/dev/shm".as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                plan.shm_options.as_ptr().cast(),
            ),
        };
        shm == 0 && set_attributes(libc::AT_FDCWD, c"/dev", 0, MOUNT_ATTR_RDONLY)
    }
}

/// Binds `path` onto itself and makes the bind (and every mount below it)
/// read-only, `nodev` and `nosuid`, plus `extra`. A path that does not exist
/// is skipped.
///
/// # Safety
/// As [`set_up`].
unsafe fn bind_read_only(path: &CStr, extra: u64) -> bool {
    // SAFETY: as set_up.
    unsafe {
        if libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            ptr::null(),
        ) != 0
        {
            return errno() == libc::ENOENT;
        }
        set_attributes(
            libc::AT_FDCWD,
            path,
            AT_RECURSIVE,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | extra,
        )
    }
}

/// Step 4 after the project is attached: the sealed directories read-only, their entries
/// writable again, then the existing protected paths read-only.
///
/// # Safety
/// As [`set_up`].
unsafe fn protect(plan: &MountPlan) -> bool {
    // SAFETY: as set_up.
    unsafe {
        plan.sealed.iter().all(|path| bind_read_only(path, 0))
            && plan.reopened.iter().all(|path| bind_writable(path))
            && plan.protected.iter().all(|path| bind_read_only(path, 0))
    }
}

/// A detached recursive clone of the mount tree at `path`, made `nodev,nosuid` (and left
/// writable: it is attached again after the read-only step), or -1.
///
/// # Safety
/// As [`set_up`].
unsafe fn clone_writable(path: &CStr) -> c_int {
    // SAFETY: as set_up.
    unsafe {
        let tree = clone_tree(path, true);
        if tree >= 0
            && !set_attributes(
                tree,
                c"",
                libc::AT_EMPTY_PATH as c_uint | AT_RECURSIVE,
                MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID,
            )
        {
            libc::close(tree);
            return -1;
        }
        tree
    }
}

/// Covers `parent` with an empty `tmpfs`, attaches the clone `tree` of the run's own
/// directory at `path` in it, then makes the `tmpfs` read-only: the run sees its own
/// directory, writable, and nothing else of `parent`. The mount point lives in the
/// namespace's `tmpfs`, so nothing is left on the host.
///
/// # Safety
/// As [`set_up`].
unsafe fn hide_siblings(tree: c_int, path: &CStr, parent: &CStr) -> bool {
    // SAFETY: as set_up.
    unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            parent.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            c"size=4k,nr_inodes=4,mode=0755".as_ptr().cast(),
        ) == 0
            && libc::mkdir(path.as_ptr(), 0o700) == 0
            && attach(tree, path)
            && set_attributes(libc::AT_FDCWD, parent, 0, MOUNT_ATTR_RDONLY)
    }
}

/// Binds `path` onto itself writable again (below a sealed, read-only directory), still
/// `nodev,nosuid`. A path that no longer exists is skipped.
///
/// # Safety
/// As [`set_up`].
unsafe fn bind_writable(path: &CStr) -> bool {
    // SAFETY: as set_up.
    unsafe {
        if libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            ptr::null(),
        ) != 0
        {
            return errno() == libc::ENOENT;
        }
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID,
            attr_clr: MOUNT_ATTR_RDONLY,
            propagation: 0,
            userns_fd: 0,
        };
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            AT_RECURSIVE,
            &raw const attr,
            size_of::<MountAttr>(),
        ) == 0
    }
}

/// The sealing of the protected paths below `root` that do not exist (issue 22, finding 2):
/// the nearest existing directory of each (inside `root`), shallowest first, and the
/// entries of those directories to bind writable again: every entry but a symbolic link
/// (binding it would follow it), a protected path, or another sealed directory.
///
/// A placeholder bound over the missing path itself would need a mount point, which cannot
/// be made without leaving a file on the host; a sealed directory refuses every new entry
/// instead (`EROFS`), the missing protected one among them, and the existing entries stay
/// as writable as the rest of the project.
pub(crate) fn sealing(
    root: &std::path::Path,
    protected: &[std::path::PathBuf],
) -> (Vec<std::path::PathBuf>, Vec<std::path::PathBuf>) {
    let exists = |path: &std::path::Path| path.symlink_metadata().is_ok();
    let mut sealed: Vec<std::path::PathBuf> = Vec::new();
    for path in protected.iter().filter(|path| !exists(path)) {
        let nearest = path
            .ancestors()
            .skip(1)
            .find(|ancestor| exists(ancestor))
            .filter(|ancestor| ancestor.starts_with(root))
            .filter(|ancestor| !protected.iter().any(|other| ancestor.starts_with(other)));
        if let Some(nearest) = nearest
            && nearest.is_dir()
            && !sealed.iter().any(|other| other == nearest)
        {
            sealed.push(nearest.to_path_buf());
        }
    }
    sealed.sort_by_key(|dir| dir.components().count());
    let mut reopened = Vec::new();
    for dir in &sealed {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<std::path::PathBuf> =
            entries.flatten().map(|entry| entry.path()).collect();
        names.sort();
        for entry in names {
            let is_link = entry
                .symlink_metadata()
                .is_ok_and(|metadata| metadata.file_type().is_symlink());
            let covered = protected.iter().any(|path| entry.starts_with(path))
                || sealed.iter().any(|other| other == &entry);
            if !is_link && !covered {
                reopened.push(entry);
            }
        }
    }
    (sealed, reopened)
}

/// Hides `path`: a directory behind an empty read-only tmpfs, anything else
/// behind `/dev/null`. A path that does not exist is skipped.
///
/// # Safety
/// As [`set_up`].
unsafe fn mask(path: &CStr) -> bool {
    // SAFETY: as set_up; stat fills a stack buffer.
    unsafe {
        let mut status: libc::stat = std::mem::zeroed();
        if libc::stat(path.as_ptr(), &mut status) != 0 {
            return errno() == libc::ENOENT;
        }
        let mounted = if status.st_mode & libc::S_IFMT == libc::S_IFDIR {
            libc::mount(
                c"tmpfs".as_ptr(),
                path.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"size=0,nr_inodes=1,mode=0555".as_ptr().cast(),
            )
        } else {
            libc::mount(
                c"/dev/null".as_ptr(),
                path.as_ptr(),
                ptr::null(),
                libc::MS_BIND,
                ptr::null(),
            )
        };
        mounted == 0
    }
}

/// A detached clone of the mount at `path` (and, when `recursive`, of every
/// mount below it), or -1.
///
/// # Safety
/// As [`set_up`].
unsafe fn clone_tree(path: &CStr, recursive: bool) -> c_int {
    let flags =
        OPEN_TREE_CLONE | libc::O_CLOEXEC as c_uint | if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: path is NUL-terminated.
    unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) as c_int }
}

/// Detached mount trees a set-up holds, closed when dropped (failures included): the
/// child shares the server's descriptor table, so a tree left open outlives the run in the
/// server. A slot of -1 is empty.
pub(crate) struct Trees<const N: usize>(pub(crate) [c_int; N]);

impl<const N: usize> Drop for Trees<N> {
    fn drop(&mut self) {
        for slot in &mut self.0 {
            drop(take_tree(slot));
        }
    }
}

/// Takes the tree out of `slot`, leaving the slot empty: the tree closes when the result drops.
fn take_tree(slot: &mut c_int) -> OwnedTree {
    OwnedTree(std::mem::replace(slot, -1))
}

/// One detached mount tree, closed when dropped (errno kept, for the caller's report).
pub(crate) struct OwnedTree(c_int);

impl Drop for OwnedTree {
    fn drop(&mut self) {
        if self.0 >= 0 {
            // SAFETY: a descriptor this set-up opened and nobody else closes; errno is
            // restored so a failure's cause survives the clean-up. Async-signal-safe.
            unsafe {
                let saved = errno();
                libc::close(self.0);
                *libc::__errno_location() = saved;
            }
        }
    }
}

/// Attaches the detached mount `tree` on `target`.
///
/// # Safety
/// As [`set_up`].
pub(crate) unsafe fn attach(tree: c_int, target: &CStr) -> bool {
    // SAFETY: both paths are NUL-terminated.
    unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        ) == 0
    }
}

/// `mount_setattr(dirfd, path, flags, {attr_set: set})`.
///
/// # Safety
/// As [`set_up`].
pub(crate) unsafe fn set_attributes(dirfd: c_int, path: &CStr, flags: c_uint, set: u64) -> bool {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: attr is a valid mount_attr of the given size; path is NUL-terminated.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &raw const attr,
            size_of::<MountAttr>(),
        ) == 0
    }
}

pub(crate) fn errno() -> c_int {
    // SAFETY: __errno_location is thread-local and async-signal-safe.
    unsafe { *libc::__errno_location() }
}
