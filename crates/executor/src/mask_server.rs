//! The read-mask server: the masks of [`Sandbox::hidden`](crate::Sandbox::hidden) served by a
//! tiny FUSE filesystem of toolsmith's own, so that a run's attempt to read a masked path is
//! seen and reported ([`ReadAttempt`], in [`Outcome::reads_denied`](crate::Outcome)), where an
//! empty `tmpfs` would refuse it in silence (a lookup makes no inotify or fanotify event).
//!
//! - One filesystem per process, mounted *detached* (`fsopen("fuse")`, `fsconfig`,
//!   `fsmount`): nothing is attached in the host's mount namespace, and nothing stays behind
//!   when toolsmith dies (its `/dev/fuse` descriptor closes, the connection aborts, and any
//!   request still waiting fails with `ENOTCONN`). The device lives only in the server
//!   thread's own descriptor table ([`keep_only`]): no process that could wait on a mask
//!   (toolsmith's other threads, a run's init sharing its table) holds it.
//! - One node per masked path, interned: the root holds the node `<id>` for every path any
//!   run ever masked, a directory or an empty file as the path was. A run's child clones its
//!   nodes (`open_tree(OPEN_TREE_CLONE)`) and attaches each exactly where `masks.rs` puts an
//!   empty `tmpfs` or file otherwise. The kernel keeps each node's entry and attributes for a
//!   year, so setting a run's masks up costs no FUSE round trip once a path was seen.
//! - Every `LOOKUP` inside a masked directory answers `ENOENT` (never cached, so the next
//!   is seen too), every `OPEN`/`OPENDIR` of a mask succeeds on an empty file or directory,
//!   and each is recorded for the run whose cgroup leaf holds the requesting process
//!   (`/proc/<pid>/cgroup`, read while the process waits for the answer, so it cannot be
//!   another's); a process in no watched leaf is answered the same and not recorded.
//! - The server is one dedicated thread. It answers every request at once, never waits on
//!   the call path, and holds its one lock (the watched runs) only to add a record; the call
//!   path holds it only to add or take a run. The mounts are read-only, so no write ever
//!   reaches it.
//!
//! Without `/dev/fuse`, or when the mount fails, [`server`] says why and the masks are the
//! empty `tmpfs` and file of `masks.rs`, with no record of the attempts.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// At most this many attempts are kept for a run; more are counted.
pub const MAX_READ_ATTEMPTS: usize = 32;

/// A run's attempt to read a masked path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReadAttempt {
    /// The entry of [`Sandbox::hidden`](crate::Sandbox::hidden) whose mask refused it.
    pub hidden: PathBuf,
    /// What the run tried: the masked path itself (listed or opened) or a path inside it.
    pub path: PathBuf,
}

/// How long the kernel keeps an answer of the root: a year.
const FOREVER: u64 = 365 * 24 * 3600;
/// The root's node id (`FUSE_ROOT_ID`).
const ROOT: u64 = 1;

/// The process's one mask filesystem and its server.
#[derive(Debug)]
pub(crate) struct MaskServer {
    /// The detached mount of the filesystem's root.
    mount: OwnedFd,
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    nodes: Mutex<Nodes>,
    runs: Mutex<Vec<Watched>>,
}

/// The interned nodes: id `index + 2`.
#[derive(Debug, Default)]
struct Nodes {
    by_path: HashMap<(PathBuf, bool), u64>,
    is_dir: Vec<bool>,
}

/// A run being watched: its cgroup leaf, its nodes with the entries they mask, what it tried.
#[derive(Debug)]
struct Watched {
    id: u64,
    leaf: PathBuf,
    entries: Vec<(u64, PathBuf)>,
    attempts: Vec<ReadAttempt>,
    more: usize,
}

static SERVER: OnceLock<Result<MaskServer, String>> = OnceLock::new();

/// The mask server, started on first use; why it is unavailable otherwise.
pub(crate) fn server() -> Result<&'static MaskServer, &'static str> {
    SERVER
        .get_or_init(MaskServer::start)
        .as_ref()
        .map_err(String::as_str)
}

fn sys(result: libc::c_long, call: &str) -> Result<libc::c_long, String> {
    if result < 0 {
        Err(format!("{call}: {}", io::Error::last_os_error()))
    } else {
        Ok(result)
    }
}

impl MaskServer {
    fn start() -> Result<MaskServer, String> {
        if crate::features::disabled("fuse").is_some() {
            return Err(format!(
                "disabled by {}",
                crate::features::DISABLE_FEATURES_VAR
            ));
        }
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .map_err(|error| format!("/dev/fuse: {error}"))?;
        let mount = mount_detached(dev.as_raw_fd())?;
        // A run's child clones its nodes from this detached mount, which the kernel allows
        // since Linux 6.15; the root, cloned here, needs no answer from the server.
        // SAFETY: open_tree on our descriptor; the clone is closed at once.
        let clone = unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                mount.as_raw_fd(),
                c"".as_ptr(),
                1 | libc::AT_EMPTY_PATH as libc::c_uint | libc::O_CLOEXEC as libc::c_uint,
            )
        };
        sys(clone, "cloning the detached mount (Linux 6.15 or later)")?;
        // SAFETY: a descriptor of ours.
        drop(unsafe { OwnedFd::from_raw_fd(clone as RawFd) });
        let state = Arc::new(State::default());
        let served = Arc::clone(&state);
        let device = dev.as_raw_fd();
        let (unshared, alone) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("toolsmith-masks".to_owned())
            .spawn(move || {
                let alone_with_the_device = keep_only(device);
                let _ = unshared.send(alone_with_the_device.clone());
                if alone_with_the_device.is_ok() {
                    // SAFETY: the device, in this thread's own table now.
                    let dev = unsafe { File::from_raw_fd(device) };
                    serve(&dev, &served);
                }
            })
            .map_err(|error| format!("starting the mask server: {error}"))?;
        match alone.recv() {
            // The process's table lets its copy go: the thread's is the only one left.
            Ok(Ok(())) => drop(dev),
            Ok(Err(error)) => return Err(error),
            Err(_) => return Err("the mask server's thread ended at once".to_owned()),
        }
        Ok(MaskServer { mount, state })
    }

    /// The descriptor of the filesystem's detached root, which a run's child clones from.
    pub(crate) fn root_fd(&self) -> RawFd {
        self.mount.as_raw_fd()
    }

    /// The name, in the root, of the node that masks `path` (a directory or not).
    pub(crate) fn node(&self, path: &Path, is_dir: bool) -> (u64, CString) {
        let mut nodes = lock(&self.state.nodes);
        let next = nodes.is_dir.len() as u64 + 2;
        let id = *nodes
            .by_path
            .entry((path.to_path_buf(), is_dir))
            .or_insert(next);
        if id == next {
            nodes.is_dir.push(is_dir);
        }
        (id, CString::new(id.to_string()).unwrap_or_default())
    }

    /// Starts recording the attempts of the run in cgroup leaf `leaf` on `entries` (node id,
    /// the hidden entry it masks).
    pub(crate) fn watch(&'static self, leaf: &Path, entries: Vec<(u64, PathBuf)>) -> Watch {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.state.runs).push(Watched {
            id,
            leaf: leaf.to_path_buf(),
            entries,
            attempts: Vec::new(),
            more: 0,
        });
        Watch { server: self, id }
    }
}

/// A watched run; dropping it stops the watch.
#[derive(Debug)]
pub(crate) struct Watch {
    server: &'static MaskServer,
    id: u64,
}

impl Watch {
    /// What the run tried (at most [`MAX_READ_ATTEMPTS`], in order), and how many more.
    pub(crate) fn finish(self) -> (Vec<ReadAttempt>, usize) {
        let mut runs = lock(&self.server.state.runs);
        match runs.iter().position(|run| run.id == self.id) {
            Some(index) => {
                let run = runs.swap_remove(index);
                (run.attempts, run.more)
            }
            None => (Vec::new(), 0),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        lock(&self.server.state.runs).retain(|run| run.id != self.id);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Mounts a FUSE filesystem served on `dev`, detached, read-only, `nodev,nosuid,noexec`.
fn mount_detached(dev: RawFd) -> Result<OwnedFd, String> {
    const FSCONFIG_SET_FLAG: libc::c_uint = 0;
    const FSCONFIG_SET_STRING: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    let attributes = crate::mounts::MOUNT_ATTR_RDONLY
        | crate::mounts::MOUNT_ATTR_NOSUID
        | crate::mounts::MOUNT_ATTR_NODEV
        | crate::mounts::MOUNT_ATTR_NOEXEC;
    let fd = CString::new(dev.to_string()).unwrap_or_default();
    // SAFETY: fsopen on a static name; the descriptor is owned at once.
    let context = unsafe {
        OwnedFd::from_raw_fd(sys(
            libc::syscall(libc::SYS_fsopen, c"fuse".as_ptr(), FSOPEN_CLOEXEC),
            "fsopen(fuse)",
        )? as RawFd)
    };
    let strings = [
        (c"fd", fd.as_c_str()),
        (c"rootmode", c"40755"),
        (c"user_id", c"0"),
        (c"group_id", c"0"),
    ];
    for (key, value) in strings {
        // SAFETY: NUL-terminated key and value on a live fs context.
        sys(
            unsafe {
                libc::syscall(
                    libc::SYS_fsconfig,
                    context.as_raw_fd(),
                    FSCONFIG_SET_STRING,
                    key.as_ptr(),
                    value.as_ptr(),
                    0,
                )
            },
            "fsconfig",
        )?;
    }
    for flag in [c"allow_other", c"default_permissions"] {
        // SAFETY: as above.
        sys(
            unsafe {
                libc::syscall(
                    libc::SYS_fsconfig,
                    context.as_raw_fd(),
                    FSCONFIG_SET_FLAG,
                    flag.as_ptr(),
                    std::ptr::null::<libc::c_char>(),
                    0,
                )
            },
            "fsconfig",
        )?;
    }
    // SAFETY: as above.
    sys(
        unsafe {
            libc::syscall(
                libc::SYS_fsconfig,
                context.as_raw_fd(),
                FSCONFIG_CMD_CREATE,
                std::ptr::null::<libc::c_char>(),
                std::ptr::null::<libc::c_char>(),
                0,
            )
        },
        "fsconfig(create) of a fuse filesystem",
    )?;
    // SAFETY: fsmount of the created context; the descriptor is owned at once.
    let mount = sys(
        unsafe {
            libc::syscall(
                libc::SYS_fsmount,
                context.as_raw_fd(),
                FSMOUNT_CLOEXEC,
                attributes,
            )
        },
        "fsmount",
    )?;
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(mount as RawFd) })
}

// Opcodes of the FUSE protocol (include/uapi/linux/fuse.h).
const LOOKUP: u32 = 1;
const FORGET: u32 = 2;
const GETATTR: u32 = 3;
const OPEN: u32 = 14;
const READ: u32 = 15;
const STATFS: u32 = 17;
const RELEASE: u32 = 18;
const FLUSH: u32 = 25;
const INIT: u32 = 26;
const OPENDIR: u32 = 27;
const READDIR: u32 = 28;
const RELEASEDIR: u32 = 29;
const INTERRUPT: u32 = 36;
const DESTROY: u32 = 38;
const BATCH_FORGET: u32 = 42;
const READDIRPLUS: u32 = 44;

/// The size of `fuse_in_header`.
const IN_HEADER: usize = 40;

/// Gives the calling thread a descriptor table of its own holding only stdio and `device`.
///
/// Why: a process that holds a FUSE device must never wait on a request of that device. A
/// request the server has read waits uninterruptibly for its answer, so if toolsmith is
/// killed while one of its threads, or a run's init (which shares toolsmith's descriptor
/// table, `CLONE_FILES`), waits on a lookup in a mask, that waiter keeps the table, hence the
/// device, hence the connection alive: nobody answers, nobody can kill it, and the process
/// stays in `D` state for good (seen: a registration killed mid-spawn left its init so).
/// With the device in the server thread's table alone, the server's death closes it, the
/// connection aborts, and every waiter gets `ENOTCONN`.
fn keep_only(device: RawFd) -> Result<(), String> {
    // SAFETY: unshare and close_range act on this thread's own table.
    unsafe {
        if libc::unshare(libc::CLONE_FILES) != 0 {
            return Err(format!(
                "a descriptor table of the mask server's own: {}",
                io::Error::last_os_error()
            ));
        }
        let ranges = [(3, device - 1), (device + 1, RawFd::MAX)];
        for (first, last) in ranges {
            if first <= last
                && libc::syscall(
                    libc::SYS_close_range,
                    first as libc::c_uint,
                    last as libc::c_uint,
                    0,
                ) != 0
            {
                return Err(format!(
                    "closing the mask server's copies: {}",
                    io::Error::last_os_error()
                ));
            }
        }
    }
    Ok(())
}

/// Answers requests until the connection ends (`ENODEV`: the filesystem is gone).
fn serve(dev: &File, state: &State) {
    let mut buffer = vec![0_u8; 64 * 1024];
    loop {
        let length = match (&*dev).read(&mut buffer) {
            Ok(length) => length,
            // ENOENT: the request was interrupted before it was read.
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::EINTR | libc::EAGAIN | libc::ENOENT)
                ) =>
            {
                continue;
            }
            Err(_) => return,
        };
        if let Some(request) = buffer.get(..length)
            && length >= IN_HEADER
        {
            answer(dev, state, request);
        }
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    bytes
        .get(at..at + 4)
        .and_then(|slice| slice.try_into().ok())
        .map_or(0, u32::from_ne_bytes)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    bytes
        .get(at..at + 8)
        .and_then(|slice| slice.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

/// Answers one request (FORGET, BATCH_FORGET and INTERRUPT take no answer).
fn answer(dev: &File, state: &State, request: &[u8]) {
    let opcode = u32_at(request, 4);
    let unique = u64_at(request, 8);
    let node = u64_at(request, 16);
    let pid = u32_at(request, 32);
    let body = request.get(IN_HEADER..).unwrap_or_default();
    let is_dir = |node: u64| -> Option<bool> {
        if node == ROOT {
            return Some(true);
        }
        let nodes = lock(&state.nodes);
        usize::try_from(node.wrapping_sub(2))
            .ok()
            .and_then(|index| nodes.is_dir.get(index).copied())
    };
    let reply: Result<Vec<u8>, i32> = match opcode {
        INIT => Ok(init_out(body)),
        LOOKUP => {
            let name = body.split(|&byte| byte == 0).next().unwrap_or_default();
            if node == ROOT {
                std::str::from_utf8(name)
                    .ok()
                    .and_then(|name| name.parse::<u64>().ok())
                    .and_then(|child| Some((child, is_dir(child)?)))
                    .filter(|(child, _)| *child != ROOT)
                    .map(|(child, dir)| entry_out(child, dir))
                    .ok_or(libc::ENOENT)
            } else {
                record(state, pid, node, Some(name));
                Err(libc::ENOENT)
            }
        }
        GETATTR => is_dir(node)
            .map(|dir| attr_out(node, dir))
            .ok_or(libc::ENOENT),
        OPEN | OPENDIR => {
            if node != ROOT {
                record(state, pid, node, None);
            }
            Ok(vec![0; 16])
        }
        READ | READDIR | READDIRPLUS | RELEASE | RELEASEDIR | FLUSH | DESTROY => Ok(Vec::new()),
        STATFS => Ok(statfs_out()),
        FORGET | BATCH_FORGET | INTERRUPT => return,
        _ => Err(libc::ENOSYS),
    };
    let (error, payload) = match reply {
        Ok(payload) => (0, payload),
        Err(errno) => (-errno, Vec::new()),
    };
    let mut message = Vec::with_capacity(16 + payload.len());
    message.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
    message.extend_from_slice(&error.to_ne_bytes());
    message.extend_from_slice(&unique.to_ne_bytes());
    message.extend_from_slice(&payload);
    // ENOENT: the request was interrupted meanwhile; nothing else is expected.
    let _ = (&*dev).write(&message);
}

/// `fuse_init_out`: protocol 7.31, no optional feature, small writes (there are none).
fn init_out(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&7_u32.to_ne_bytes());
    out.extend_from_slice(&31_u32.to_ne_bytes());
    out.extend_from_slice(&u32_at(body, 8).to_ne_bytes()); // max_readahead
    out.extend_from_slice(&0_u32.to_ne_bytes()); // flags
    out.extend_from_slice(&16_u16.to_ne_bytes()); // max_background
    out.extend_from_slice(&12_u16.to_ne_bytes()); // congestion_threshold
    out.extend_from_slice(&4096_u32.to_ne_bytes()); // max_write
    out.extend_from_slice(&1_u32.to_ne_bytes()); // time_gran
    out.resize(64, 0);
    out
}

/// `fuse_attr` of a node: a root-owned empty directory (0755) or empty file (0444).
fn attr(node: u64, is_dir: bool) -> Vec<u8> {
    let mut attr = Vec::with_capacity(88);
    attr.extend_from_slice(&node.to_ne_bytes()); // ino
    attr.resize(72 - 12, 0); // size, blocks, times: 0
    let mode: u32 = if is_dir {
        libc::S_IFDIR | 0o755
    } else {
        libc::S_IFREG | 0o444
    };
    attr.extend_from_slice(&mode.to_ne_bytes());
    attr.extend_from_slice(&(if is_dir { 2_u32 } else { 1 }).to_ne_bytes()); // nlink
    attr.resize(80, 0); // uid, gid, rdev
    attr.extend_from_slice(&4096_u32.to_ne_bytes()); // blksize
    attr.resize(88, 0);
    attr
}

fn entry_out(node: u64, is_dir: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(&node.to_ne_bytes());
    out.extend_from_slice(&0_u64.to_ne_bytes()); // generation
    out.extend_from_slice(&FOREVER.to_ne_bytes()); // entry_valid
    out.extend_from_slice(&FOREVER.to_ne_bytes()); // attr_valid
    out.extend_from_slice(&[0; 8]); // nsec parts
    out.extend_from_slice(&attr(node, is_dir));
    out
}

fn attr_out(node: u64, is_dir: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(104);
    out.extend_from_slice(&FOREVER.to_ne_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&attr(node, is_dir));
    out
}

fn statfs_out() -> Vec<u8> {
    let mut out = vec![0; 40];
    out.extend_from_slice(&4096_u32.to_ne_bytes()); // bsize
    out.extend_from_slice(&255_u32.to_ne_bytes()); // namelen
    out.extend_from_slice(&4096_u32.to_ne_bytes()); // frsize
    out.resize(80, 0);
    out
}

/// The cgroup (v2) of `pid`, relative to ours, without its leading `/`.
fn cgroup_of(pid: u32) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = text.lines().find_map(|line| line.strip_prefix("0::"))?;
    let relative = path.trim_start_matches('/');
    (!relative.is_empty()).then(|| PathBuf::from(relative))
}

/// Records, for the watched run `pid` belongs to, its attempt on `node` (`name` inside it).
fn record(state: &State, pid: u32, node: u64, name: Option<&[u8]>) {
    let Some(cgroup) = cgroup_of(pid) else {
        return;
    };
    let mut runs = lock(&state.runs);
    let Some(run) = runs.iter_mut().find(|run| run.leaf.ends_with(&cgroup)) else {
        return;
    };
    let Some((_, hidden)) = run.entries.iter().find(|(id, _)| *id == node) else {
        return;
    };
    let path = match name {
        Some(name) if !name.is_empty() => hidden.join(OsStr::from_bytes(name)),
        _ => hidden.clone(),
    };
    let attempt = ReadAttempt {
        hidden: hidden.clone(),
        path,
    };
    if run.attempts.contains(&attempt) {
        return;
    }
    if run.attempts.len() < MAX_READ_ATTEMPTS {
        run.attempts.push(attempt);
    } else {
        run.more += 1;
    }
}
