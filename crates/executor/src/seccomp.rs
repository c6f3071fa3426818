//! The system-call filter of a run: a seccomp allow-list in the spirit of
//! Docker's default profile (`allowed.rs`), with refusals and argument
//! checks for the calls that need a reason of their own, built once in the
//! parent as classic BPF and installed by the clone child as the last step
//! before `execve`.
//!
//! The program is written by hand rather than with a crate (seccompiler,
//! libseccomp): runs of numbers with one verdict, a few with an argument check, found
//! by a balanced binary search over the number (`bpf.rs` compiles this
//! module's table of rules into it), the child must
//! install it with one system call and no allocation, and every rule is
//! listed with its reason in `docs/security.md`, which a generated program
//! would hide. The tests run the program in an interpreter of classic BPF
//! for every number and the arguments that matter, against a model of what
//! each call must get written apart from it.
//!
//! A call no list names fails with `ENOSYS`, as on a kernel without it, so
//! a call a newer kernel adds is refused until someone classifies it.
//! Denied calls fail with `EPERM`, as they would for a process without the
//! capability they need, so programs take their usual error path; `clone3`
//! fails with `ENOSYS`, so that libc falls back to `clone`, whose flags the
//! filter can read (`clone3` passes them in memory a filter cannot read).
//! A call of a foreign architecture (32-bit `int 0x80` from a 64-bit
//! process) kills the process: the numbers below mean other calls there.

use std::sync::OnceLock;

use crate::bpf::{build_deny_list, build_for};

/// Whether the filter of a network-denied run refuses `socket` for every
/// family, and `socketpair` but for connected Unix stream and seqpacket
/// pairs. No isolation rests on it any more (every network-denied run has a
/// network namespace of its own); a test holds it to what the program does.
#[cfg(test)]
pub(crate) const REFUSES_EVERY_SOCKET_UNDER_DENY: bool = true;

/// Whether this build has a filter for its architecture.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) const SUPPORTED: bool = true;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const SUPPORTED: bool = false;

/// `seccomp(2)`'s operation that installs a filter.
const SECCOMP_SET_MODE_FILTER: libc::c_ulong = 1;

/// Every `CLONE_NEW*` flag `clone` takes: mount, cgroup, UTS, IPC, user,
/// PID, network (Docker's mask 0x7E020000). `CLONE_NEWTIME` (0x80) lies in
/// the exit-signal byte of `clone`, so it is only checked for `unshare`.
pub(crate) const CLONE_NAMESPACES: u32 = 0x7E02_0000;
pub(crate) const CLONE_NEWTIME: u32 = 0x80;

/// `AF_VSOCK`: sockets to the hypervisor, which no network namespace covers.
const AF_VSOCK: u32 = 40;

/// The `personality` values a program may set: the default (`PER_LINUX`),
/// `PER_LINUX32` (8), `ADDR_NO_RANDOMIZE` with either (used by `setarch -R`
/// and debuggers), and the query `0xffffffff`: Docker's list.
pub(crate) const PERSONALITIES: [u32; 5] = [0, 8, 0x0002_0000, 0x0002_0008, 0xffff_ffff];

/// Calls that fail with `EPERM`, in three groups: what needs a capability
/// the run does not have (denied anyway, but the kernel code behind the
/// check is attack surface), what reaches outside the run whatever its
/// privileges, and what has a record of kernel bugs with no use in a tool.
/// `docs/security.md` gives the reason for each line.
pub(crate) const DENIED: &[libc::c_long] = &[
    // Kernel keyrings are not namespaced: keys outlive the call and are shared.
    libc::SYS_add_key,
    libc::SYS_keyctl,
    libc::SYS_request_key,
    // Kernel programs and performance counters: a large attack surface.
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    // The mount family: a tool must not change the mounts of its call.
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    SYS_OPEN_TREE_ATTR,
    // Entering other namespaces.
    libc::SYS_setns,
    // Other processes' memory and descriptors (`ptrace` and `process_vm_*`:
    // `TRACING`, outside a private PID namespace only).
    libc::SYS_process_madvise,
    libc::SYS_pidfd_getfd,
    libc::SYS_kcmp,
    // The kernel itself.
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_quotactl_fd,
    libc::SYS_lookup_dcookie,
    libc::SYS_vhangup,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    // The system clock is shared by every process.
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_settimeofday,
    libc::SYS_adjtimex,
    // File handles bypass path checks (the "shocker" container escape).
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_fanotify_init,
    // Raw I/O ports.
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

fn number(call: libc::c_long) -> u32 {
    u32::try_from(call).expect("system call numbers are small and positive")
}

/// `S_ISUID | S_ISGID`: a mode with either bit makes a file that runs with its
/// owner's (or group's) identity. A tool of a root toolsmith is uid 0 without
/// capabilities, and the owner of what it writes: a `chmod 4755` of its own
/// copy of a shell would leave a setuid-root program in the project for the
/// next user to run (`b08` in the hostile corpus). No capability covers that:
/// the owner may always set these bits, so the filter refuses them.
pub(crate) const SET_ID_BITS: u32 = 0o6000;

/// `AF_UNIX`: the one family `socketpair` may make under `network = deny`.
pub(crate) const AF_UNIX: u32 = 1;

/// Tracing: refused only to a run without a private PID namespace. In one, a
/// tool sees nothing but its own tree and toolsmith's init, which is not
/// dumpable and which a tool without `CAP_SYS_PTRACE` cannot trace, so a
/// debugger, `strace` or the leak checker of AddressSanitizer (which traces
/// its own threads) work as in a shell. Outside one, other processes of the
/// same uid would be in reach.
pub(crate) const TRACING: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
];

/// `fchmodat2` (Linux 6.6), the same number on every architecture.
const SYS_FCHMODAT2: libc::c_long = 452;

/// `open_tree_attr` (Linux 6.15), the same number on every architecture: a
/// mount call like `open_tree`.
const SYS_OPEN_TREE_ATTR: libc::c_long = 467;

/// The rules and the allow-list classify every number up to this one; the
/// program refuses every higher one with `ENOSYS` (`bpf::build`).
pub const LAST_CLASSIFIED: u32 = 1023;

/// The `fallocate` modes a program may use: plain allocation (0), which
/// extends the file and so is bounded by `RLIMIT_FSIZE` (every file system
/// checks `inode_newsize_ok` for it), and `FALLOC_FL_PUNCH_HOLE |
/// FALLOC_FL_KEEP_SIZE` (3), which only frees blocks. Every other mode can
/// allocate blocks that no file size counts (`KEEP_SIZE` past the end,
/// `ZERO_RANGE`, `INSERT_RANGE`, `UNSHARE_RANGE`, `WRITE_ZEROES`) and fails
/// with `EOPNOTSUPP`, as on a file system without it: `posix_fallocate` and
/// programs fall back to writing, which `RLIMIT_FSIZE` bounds.
pub(crate) const FALLOCATE_MODES: [u32; 2] = [0, 3];

/// `socketpair`'s types under `network = deny`, `SOCK_STREAM` (1) and
/// `SOCK_SEQPACKET` (5) (the type argument masked with `SOCK_TYPE_MASK`, so
/// `SOCK_NONBLOCK` and `SOCK_CLOEXEC` do not matter): a
/// pair of connected stream or seqpacket sockets has no way to address any
/// other socket (a stream socket refuses an address on `sendto` and
/// `connect` with `EISCONN`, a seqpacket socket ignores it). A datagram
/// socket of a pair may `sendto` any named datagram socket: `/dev/log`,
/// journald's socket, a listener in `/tmp`, an abstract name of the network
/// namespace, so `SOCK_DGRAM` (and every other type) is refused.
pub(crate) const SOCK_TYPE_MASK: u32 = 0xf;
pub(crate) const SOCKETPAIR_TYPES: [u32; 2] = [1, 5];

/// What the filter does with one system-call number the search finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Fails with this errno.
    Refuse(i32),
    /// Fails with `EPERM` when the low 32 bits of argument `argument` have a
    /// bit of `mask` set.
    RefuseBits { argument: u32, mask: u32 },
    /// Fails with `EPERM` when the first argument (a socket family) is `family`.
    RefuseFamily(u32),
    /// `socketpair` under `network = deny`: only `AF_UNIX` pairs of the
    /// `SOCKETPAIR_TYPES`.
    UnixStreamPairsOnly,
    /// Fails with `errno` unless the low 32 bits of argument `argument`
    /// are one of `values` (`personality`: the `PERSONALITIES`;
    /// `fallocate`: the `FALLOCATE_MODES`).
    AllowOnly {
        argument: u32,
        values: &'static [u32],
        errno: i32,
    },
    /// `socket` in a run with Unix socket grants: the `PROXIED_FAMILIES`,
    /// and `AF_UNIX` of the `SOCKETPAIR_TYPES` only (never `SOCK_DGRAM`,
    /// which could `sendto` any named socket without a `connect`).
    ProxiedOrUnixStream,
    /// Sent to toolsmith's supervisor (`SECCOMP_RET_USER_NOTIF`), which
    /// answers it: `connect` in a run with Unix socket grants (`egress/unix.rs`),
    /// the calls that make a name in a run with supervised creations (`creations/`).
    Notify,
    /// `open`/`openat` in a run with supervised creations: sent to the
    /// supervisor when argument `flags` has `O_CREAT`; else refused with
    /// `EPERM` when argument `mode` has a `SET_ID_BITS` bit (`O_TMPFILE`).
    NotifyCreate { flags: u32, mode: u32 },
}

/// Which sockets a run may make: the filter's one network-dependent part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sockets {
    /// Every family but `AF_VSOCK` (`network = allow`).
    Any,
    /// Only `PROXIED_FAMILIES` (`Network::Proxy`): IPv4 and IPv6 sockets,
    /// which reach nothing but the run's own namespace and its proxy, and
    /// netlink for the resolver's interface queries. No `AF_UNIX` socket:
    /// a pathname Unix socket of the host (a container engine's, the D-Bus
    /// system bus, `/dev/log`) is reachable from any network namespace.
    Proxied,
    /// As [`Sockets::Proxied`], plus `AF_UNIX` stream and seqpacket sockets,
    /// for a run granted Unix socket paths: every `connect` goes to
    /// toolsmith's supervisor (`egress/unix.rs`), which connects a Unix
    /// socket only to a granted path, itself.
    ProxiedUnix,
    /// None (`network = deny`).
    None,
}

impl From<bool> for Sockets {
    /// `network_denied` as it was before the proxy: `true` is [`Sockets::None`].
    fn from(network_denied: bool) -> Sockets {
        if network_denied {
            Sockets::None
        } else {
            Sockets::Any
        }
    }
}

/// The socket families a proxied run may make: `AF_INET`, `AF_INET6`, `AF_NETLINK`.
pub(crate) const PROXIED_FAMILIES: [u32; 3] = [2, 10, 16];

/// The filter program, built once per kind: with `network_denied`, sockets
/// are refused too; without `private_pids`, tracing (`TRACING`) too; with
/// `creations`, the calls that make a name go to the supervisor
/// (`supervise_creations`).
pub(crate) fn program(
    sockets: impl Into<Sockets>,
    private_pids: bool,
    creations: bool,
) -> &'static [libc::sock_filter] {
    static PROGRAMS: [OnceLock<Vec<libc::sock_filter>>; 16] = [const { OnceLock::new() }; 16];
    let sockets = sockets.into();
    let index = (sockets as usize * 2 + usize::from(private_pids)) * 2 + usize::from(creations);
    PROGRAMS[index].get_or_init(|| build_for(sockets, private_pids, creations))
}

/// Every number up to [`LAST_CLASSIFIED`] the filter does not simply allow,
/// with its rule, sorted by number: the refusals and argument checks, and
/// `ENOSYS` for each number neither they nor the allow-list name.
pub(crate) fn rules(sockets: impl Into<Sockets>, private_pids: bool) -> Vec<(u32, Rule)> {
    rules_for(sockets, private_pids, false)
}

/// [`rules`], with the calls that make a name sent to the supervisor when `creations`.
pub(crate) fn rules_for(
    sockets: impl Into<Sockets>,
    private_pids: bool,
    creations: bool,
) -> Vec<(u32, Rule)> {
    let sockets = sockets.into();
    let mut rules = named_rules(sockets, private_pids);
    if creations {
        supervise_creations(&mut rules);
    }
    let mut allowed: Vec<u32> = crate::allowed::ALLOWED
        .iter()
        .map(|&call| number(call))
        .collect();
    if private_pids {
        allowed.extend(TRACING.iter().map(|&call| number(call)));
    }
    if sockets == Sockets::Any {
        allowed.push(number(libc::SYS_socketpair));
    }
    let named: Vec<u32> = rules.iter().map(|&(call, _)| call).collect();
    rules.extend(
        (0..=LAST_CLASSIFIED)
            .filter(|call| !allowed.contains(call) && !named.contains(call))
            .map(|call| (call, Rule::Refuse(libc::ENOSYS))),
    );
    rules.sort_unstable_by_key(|&(call, _)| call);
    rules
}

/// The system-call numbers up to [`LAST_CLASSIFIED`] that someone
/// classified for a run of this kind: the allowed calls and those with a
/// rule of their own (a refusal with its reason, or an argument check).
/// Every other number fails with `ENOSYS` in the run, which a test checks
/// from inside a sandbox, number by number, against the running kernel.
pub fn classified_system_calls(network_denied: bool, private_pids: bool) -> Vec<u32> {
    let mut classified: Vec<u32> = rules(network_denied, private_pids)
        .into_iter()
        .filter(|&(_, rule)| rule != Rule::Refuse(libc::ENOSYS))
        .map(|(call, _)| call)
        .collect();
    classified.extend(crate::allowed::ALLOWED.iter().map(|&call| number(call)));
    if private_pids {
        classified.extend(TRACING.iter().map(|&call| number(call)));
    }
    if !network_denied {
        classified.push(number(libc::SYS_socketpair));
    }
    classified.sort_unstable();
    classified.dedup();
    classified
}

/// The two filter programs `cargo xtask bench` compares, for a run of this
/// kind: the allow-list every filtered run gets, and the deny-list it
/// replaced (issue 22, finding 7), built by the same compiler from the calls
/// with a rule of their own, every other number allowed. Not for runs: the
/// executor installs only the allow-list.
#[doc(hidden)]
pub fn filters_for_bench(network_denied: bool, private_pids: bool) -> FiltersForBench {
    FiltersForBench {
        allow_list: program(network_denied, private_pids, false).to_vec(),
        deny_list: build_deny_list(network_denied, private_pids),
    }
}

/// What [`filters_for_bench`] returns: two classic BPF programs for
/// `seccomp(SECCOMP_SET_MODE_FILTER)`.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct FiltersForBench {
    /// The filter of every filtered run: unnamed calls fail with `ENOSYS`.
    pub allow_list: Vec<libc::sock_filter>,
    /// The filter before issue 22: unnamed calls reach the kernel.
    pub deny_list: Vec<libc::sock_filter>,
}

/// The numbers with a rule of their own (a refusal with its reason, or an
/// argument check), sorted by number.
pub(crate) fn named_rules(sockets: impl Into<Sockets>, private_pids: bool) -> Vec<(u32, Rule)> {
    let sockets = sockets.into();
    let tracing: &[libc::c_long] = if private_pids { &[] } else { TRACING };
    let mut rules: Vec<(libc::c_long, Rule)> = DENIED
        .iter()
        .chain(tracing)
        .map(|&call| (call, Rule::Refuse(libc::EPERM)))
        .collect();
    rules.push((libc::SYS_clone3, Rule::Refuse(libc::ENOSYS)));
    rules.push((
        libc::SYS_clone,
        Rule::RefuseBits {
            argument: 0,
            mask: CLONE_NAMESPACES,
        },
    ));
    rules.push((
        libc::SYS_unshare,
        Rule::RefuseBits {
            argument: 0,
            mask: CLONE_NAMESPACES | CLONE_NEWTIME,
        },
    ));
    if sockets == Sockets::Proxied {
        // Under a proxy the run's namespace holds only loopback and the proxy's
        // port (see `Sockets::Proxied`); a datagram pair still could `sendto` a
        // named datagram socket of the host, so pairs are as under deny.
        rules.push((
            libc::SYS_socket,
            Rule::AllowOnly {
                argument: 0,
                values: &PROXIED_FAMILIES,
                errno: libc::EPERM,
            },
        ));
        rules.push((libc::SYS_socketpair, Rule::UnixStreamPairsOnly));
    } else if sockets == Sockets::ProxiedUnix {
        // A Unix socket reaches whatever pathname socket of the host its
        // `connect` names, and the filter cannot read the name: every
        // `connect` (of every family: the filter cannot tell a descriptor's
        // family either) goes to the supervisor, which decides on its own
        // copy of the address and connects the socket itself. Stream and
        // seqpacket sockets address nothing but through `connect`: a stream
        // socket refuses an address on `sendto`/`sendmsg` (`EOPNOTSUPP` or
        // `EISCONN`), a seqpacket socket ignores it.
        rules.push((libc::SYS_socket, Rule::ProxiedOrUnixStream));
        rules.push((libc::SYS_socketpair, Rule::UnixStreamPairsOnly));
        rules.push((libc::SYS_connect, Rule::Notify));
    } else if sockets == Sockets::None {
        // Under deny the run's network namespace is empty (loopback down),
        // but a socket is still a door. A Unix socket reaches the host's
        // pathname sockets (a container engine's socket, the D-Bus system
        // bus, an ssh agent, `/dev/log`), which no network namespace closes,
        // and every family reaches what shares the namespace: abstract Unix
        // names, netlink ports, TIPC names, which would be other runs' if
        // runs shared one empty namespace. No tool needs a socket of its own
        // there, so `socket` is refused for every family, and `socketpair`
        // makes only connected pairs that can address nothing else
        // (`SOCKETPAIR_TYPES`), for a tool's own processes to talk.
        rules.push((libc::SYS_socket, Rule::Refuse(libc::EPERM)));
        rules.push((libc::SYS_socketpair, Rule::UnixStreamPairsOnly));
    } else {
        rules.push((libc::SYS_socket, Rule::RefuseFamily(AF_VSOCK)));
    }
    // The mode argument of every call that sets a file's mode: no setuid or
    // setgid bit (`SET_ID_BITS`). `open`/`openat` take a mode only with
    // `O_CREAT` or `O_TMPFILE`; libc passes 0 otherwise.
    let mode_check = |argument: u32| Rule::RefuseBits {
        argument,
        mask: SET_ID_BITS,
    };
    #[cfg(target_arch = "x86_64")]
    rules.extend([
        (libc::SYS_chmod, mode_check(1)),
        (libc::SYS_creat, mode_check(1)),
        (libc::SYS_open, mode_check(2)),
        (libc::SYS_mknod, mode_check(1)),
    ]);
    rules.extend([
        (libc::SYS_fchmod, mode_check(1)),
        (libc::SYS_fchmodat, mode_check(2)),
        (SYS_FCHMODAT2, mode_check(2)),
        (libc::SYS_openat, mode_check(3)),
        (libc::SYS_mknodat, mode_check(2)),
    ]);
    // `openat2` passes its mode in a structure the filter cannot read: ENOSYS
    // sends libc and programs back to `openat`.
    rules.push((libc::SYS_openat2, Rule::Refuse(libc::ENOSYS)));
    rules.push((
        libc::SYS_personality,
        Rule::AllowOnly {
            argument: 0,
            values: &PERSONALITIES,
            errno: libc::EPERM,
        },
    ));
    // `fallocate`'s mode (its second argument): only the modes whose blocks
    // a file size counts (`FALLOCATE_MODES`), so `max_file_size` bounds
    // what a call allocates in a file whatever the mode.
    rules.push((
        libc::SYS_fallocate,
        Rule::AllowOnly {
            argument: 1,
            values: &FALLOCATE_MODES,
            errno: libc::EOPNOTSUPP,
        },
    ));
    let mut rules: Vec<(u32, Rule)> = rules
        .into_iter()
        .map(|(call, rule)| (number(call), rule))
        .collect();
    rules.sort_unstable_by_key(|&(call, _)| call);
    rules
}

/// The calls that make a new name in a directory, besides `open`/`openat`
/// with `O_CREAT`: in a run with supervised creations each goes to the
/// supervisor, which makes the name itself or refuses it (`creations/`).
/// `openat2` is refused with `ENOSYS` in every run (its flags are out of the
/// filter's reach), and `io_uring` with `EPERM`, so no other door makes a name.
pub(crate) const CREATING: &[libc::c_long] = &[
    libc::SYS_mkdirat,
    libc::SYS_mknodat,
    libc::SYS_renameat2,
    libc::SYS_linkat,
    libc::SYS_symlinkat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_renameat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_mkdir,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_mknod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_rename,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_link,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_symlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_creat,
];

/// Replaces the rules of the calls that make a name (`CREATING`, and
/// `open`/`openat` with `O_CREAT`) by the supervisor's notification. The
/// supervisor checks the set-id bits of their modes itself.
fn supervise_creations(rules: &mut Vec<(u32, Rule)>) {
    let mut supervised: Vec<(libc::c_long, Rule)> =
        CREATING.iter().map(|&call| (call, Rule::Notify)).collect();
    supervised.push((libc::SYS_openat, Rule::NotifyCreate { flags: 2, mode: 3 }));
    #[cfg(target_arch = "x86_64")]
    supervised.push((libc::SYS_open, Rule::NotifyCreate { flags: 1, mode: 2 }));
    for (call, rule) in supervised {
        let call = number(call);
        rules.retain(|&(other, _)| other != call);
        rules.push((call, rule));
    }
    rules.sort_unstable_by_key(|&(call, _)| call);
}

/// The program in the form `seccomp(2)` takes.
pub(crate) fn fprog(program: &'static [libc::sock_filter]) -> libc::sock_fprog {
    libc::sock_fprog {
        len: u16::try_from(program.len()).expect("the filter is well under 4096 instructions"),
        filter: program.as_ptr().cast_mut(),
    }
}

/// Installs `filter` on the calling thread. Needs `PR_SET_NO_NEW_PRIVS`
/// (or `CAP_SYS_ADMIN`).
///
/// # Safety
/// Async-signal-safe and allocation-free: one `seccomp` system call on a
/// program the parent built. Meant for the clone child.
pub(crate) unsafe fn install(filter: &libc::sock_fprog) -> bool {
    // SAFETY: the program is a valid classic BPF program that outlives the call.
    unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            0 as libc::c_ulong,
            std::ptr::from_ref(filter),
        ) == 0
    }
}

/// Installs `filter` on the calling thread with `SECCOMP_FILTER_FLAG_NEW_LISTENER`:
/// the descriptor (close-on-exec) of its notifications, or -1.
///
/// # Safety
/// As [`install`].
pub(crate) unsafe fn install_with_listener(filter: &libc::sock_fprog) -> libc::c_int {
    // Once the supervisor has received a call, only a fatal signal ends its
    // wait (Linux 5.19): else a signal restarts a `connect` the supervisor
    // may have made already, which then fails with `EISCONN`. Older kernels
    // refuse the flag (`EINVAL`) and get the filter without it.
    for flags in [
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
    ] {
        // SAFETY: as in `install`.
        let listener = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                SECCOMP_SET_MODE_FILTER,
                flags,
                std::ptr::from_ref(filter),
            )
        };
        if listener >= 0 {
            return libc::c_int::try_from(listener).unwrap_or(-1);
        }
    }
    -1
}

/// Sets `PR_SET_NO_NEW_PRIVS` on the calling process: `execve` grants no
/// privilege from then on, and a filter (or a Landlock ruleset) may be
/// installed without `CAP_SYS_ADMIN`. False when it failed.
///
/// # Safety
/// Async-signal-safe and allocation-free: one `prctl`. Meant for the clone
/// child and toolsmith's init (nix's wrapper is not for code after a clone).
pub(crate) unsafe fn set_no_new_privs() -> bool {
    // SAFETY: PR_SET_NO_NEW_PRIVS takes 1 and three zeros.
    unsafe {
        libc::prctl(
            libc::PR_SET_NO_NEW_PRIVS,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) == 0
    }
}

/// Whether the filter can be installed here, proven by installing it in a
/// child that then checks that a denied call is refused.
pub(crate) fn probe() -> Result<(), String> {
    if !SUPPORTED {
        return Err(format!(
            "toolsmith has no system-call filter for {}",
            std::env::consts::ARCH
        ));
    }
    let filter = fprog(program(false, false, false));
    let mut stack = vec![0_u8; 64 * 1024];
    // SAFETY: a vfork-style clone whose child only makes system calls on
    // its own stack, then exits; the filter applies to the child alone.
    let pid = unsafe {
        libc::clone(
            probe_child,
            stack.as_mut_ptr().add(stack.len()).cast::<libc::c_void>(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::from_ref(&filter)
                .cast_mut()
                .cast::<libc::c_void>(),
        )
    };
    if pid < 0 {
        return Err(format!(
            "clone for the probe failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut status = 0;
    // SAFETY: pid is our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(()),
        Some(1) => Err(
            "seccomp(SECCOMP_SET_MODE_FILTER) was refused (Linux 3.17 or later with CONFIG_SECCOMP_FILTER)"
                .to_owned(),
        ),
        Some(2) => Err("the filter was installed but did not refuse a denied call".to_owned()),
        _ => Err(format!("the probe child ended with status {status:#x}")),
    }
}

extern "C" fn probe_child(argument: *mut libc::c_void) -> libc::c_int {
    // SAFETY: the parent passes a sock_fprog that outlives the child; the
    // calls below only touch this process's own state.
    unsafe {
        let filter = &*argument.cast::<libc::sock_fprog>();
        if !set_no_new_privs() || !install(filter) {
            libc::_exit(1);
        }
        // Without the filter, both calls fail with EFAULT (or EINVAL).
        let refused = libc::syscall(
            libc::SYS_add_key,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0_usize,
            0 as libc::c_int,
        ) != 0
            && *libc::__errno_location() == libc::EPERM
            && libc::syscall(libc::SYS_clone3, std::ptr::null::<libc::c_void>(), 0_usize) != 0
            && *libc::__errno_location() == libc::ENOSYS;
        libc::_exit(if refused { 0 } else { 2 })
    }
}

#[cfg(test)]
mod tests {
    use crate::allowed::ALLOWED;
    use crate::bpf::{
        AUDIT_ARCH, BPF_JA, LEAF_SIZE, Span, X32_SYSCALL_BIT, build, header, leaf, search, spans,
        table,
    };
    use crate::seccomp::{
        DENIED, REFUSES_EVERY_SOCKET_UNDER_DENY, Rule, TRACING, named_rules, rules,
    };

    /// What a call must get, as `seccomp(2)` returns it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Verdict {
        Allow,
        Errno(i32),
        Kill,
        Notify,
    }

    impl Verdict {
        fn from_return(value: u32) -> Verdict {
            match value & 0xffff_0000 {
                0x7fff_0000 => Verdict::Allow,
                0x0005_0000 => Verdict::Errno(i32::try_from(value & 0xffff).unwrap()),
                0x8000_0000 => Verdict::Kill,
                0x7fc0_0000 => Verdict::Notify,
                _ => panic!("unexpected return value {value:#x}"),
            }
        }
    }

    /// `struct seccomp_data` as the filter reads it.
    struct Data {
        nr: u32,
        arch: u32,
        args: [u64; 6],
    }

    impl Data {
        fn word(&self, offset: u32) -> u32 {
            assert!(
                offset.is_multiple_of(4) && offset < 64,
                "load at {offset} is outside seccomp_data"
            );
            match offset {
                0 => self.nr,
                4 => self.arch,
                // The instruction pointer: the filter has no business there.
                8 | 12 => 0xdead_beef,
                _ => {
                    let argument = self.args[usize::try_from(offset - 16).unwrap() / 8];
                    let bytes = argument.to_le_bytes();
                    let start = usize::try_from(offset % 8).unwrap();
                    u32::from_le_bytes(bytes[start..start + 4].try_into().unwrap())
                }
            }
        }
    }

    /// Classic BPF as the kernel runs a seccomp filter, for the instructions
    /// the filter may use; anything else, or a jump out of the program, fails
    /// the test.
    fn interpret(program: &[libc::sock_filter], data: &Data) -> u32 {
        let mut accumulator = 0_u32;
        let mut counter = 0_usize;
        loop {
            let instruction = program[counter];
            let k = instruction.k;
            let branch = |taken: bool| {
                usize::from(if taken {
                    instruction.jt
                } else {
                    instruction.jf
                })
            };
            counter += 1;
            match instruction.code {
                0x20 => accumulator = data.word(k),
                0x54 => accumulator &= k,
                0x15 => counter += branch(accumulator == k),
                0x35 => counter += branch(accumulator >= k),
                0x45 => counter += branch(accumulator & k != 0),
                0x05 => counter += usize::try_from(k).unwrap(),
                0x06 => return k,
                code => panic!("instruction {code:#x} at {} is not expected", counter - 1),
            }
        }
    }

    /// The reference: what each call must get, written from docs/security.md
    /// rather than from the tables the program is built from.
    fn model(network_denied: bool, private_pids: bool, data: &Data) -> Verdict {
        const EPERM: Verdict = Verdict::Errno(libc::EPERM);
        const ENOSYS: Verdict = Verdict::Errno(libc::ENOSYS);
        if data.arch != AUDIT_ARCH {
            return Verdict::Kill;
        }
        if cfg!(target_arch = "x86_64") && data.nr >= 0x4000_0000 {
            return EPERM;
        }
        let low = |argument: usize| data.args[argument] & 0xffff_ffff;
        let refuse_if = |refused: bool| if refused { EPERM } else { Verdict::Allow };
        let set_id = |argument: usize| refuse_if(low(argument) & 0o6000 != 0);
        let namespaces = 0x0200_0000 // CLONE_NEWCGROUP
            | 0x0400_0000 // CLONE_NEWUTS
            | 0x0800_0000 // CLONE_NEWIPC
            | 0x1000_0000 // CLONE_NEWUSER
            | 0x2000_0000 // CLONE_NEWPID
            | 0x4000_0000 // CLONE_NEWNET
            | 0x0002_0000; // CLONE_NEWNS
        let call = libc::c_long::from(data.nr);
        #[cfg(target_arch = "x86_64")]
        match call {
            libc::SYS_iopl | libc::SYS_ioperm => return EPERM,
            libc::SYS_chmod | libc::SYS_creat | libc::SYS_mknod => return set_id(1),
            libc::SYS_open => return set_id(2),
            _ => {}
        }
        match call {
            libc::SYS_add_key
            | libc::SYS_keyctl
            | libc::SYS_request_key
            | libc::SYS_bpf
            | libc::SYS_perf_event_open
            | libc::SYS_userfaultfd
            | libc::SYS_io_uring_setup
            | libc::SYS_io_uring_enter
            | libc::SYS_io_uring_register
            | libc::SYS_mount
            | libc::SYS_umount2
            | libc::SYS_pivot_root
            | libc::SYS_chroot
            | libc::SYS_move_mount
            | libc::SYS_open_tree
            | libc::SYS_fsopen
            | libc::SYS_fsconfig
            | libc::SYS_fsmount
            | libc::SYS_fspick
            | libc::SYS_mount_setattr
            | 467 // open_tree_attr
            | libc::SYS_setns
            | libc::SYS_process_madvise
            | libc::SYS_pidfd_getfd
            | libc::SYS_kcmp
            | libc::SYS_kexec_load
            | libc::SYS_kexec_file_load
            | libc::SYS_init_module
            | libc::SYS_finit_module
            | libc::SYS_delete_module
            | libc::SYS_reboot
            | libc::SYS_swapon
            | libc::SYS_swapoff
            | libc::SYS_syslog
            | libc::SYS_acct
            | libc::SYS_quotactl
            | libc::SYS_quotactl_fd
            | libc::SYS_lookup_dcookie
            | libc::SYS_vhangup
            | libc::SYS_sethostname
            | libc::SYS_setdomainname
            | libc::SYS_clock_settime
            | libc::SYS_clock_adjtime
            | libc::SYS_settimeofday
            | libc::SYS_adjtimex
            | libc::SYS_open_by_handle_at
            | libc::SYS_name_to_handle_at
            | libc::SYS_fanotify_init => EPERM,
            libc::SYS_ptrace | libc::SYS_process_vm_readv | libc::SYS_process_vm_writev => {
                refuse_if(!private_pids)
            }
            libc::SYS_clone3 | libc::SYS_openat2 => ENOSYS,
            libc::SYS_clone => refuse_if(low(0) & namespaces != 0),
            // CLONE_NEWTIME too.
            libc::SYS_unshare => refuse_if(low(0) & (namespaces | 0x80) != 0),
            libc::SYS_socket if network_denied => EPERM,
            // AF_VSOCK.
            libc::SYS_socket => refuse_if(low(0) == 40),
            // Only AF_UNIX pairs of SOCK_STREAM or SOCK_SEQPACKET, whatever
            // the flags.
            libc::SYS_socketpair if network_denied => {
                refuse_if(low(0) != 1 || !matches!(low(1) & 0xf, 1 | 5))
            }
            libc::SYS_fchmod => set_id(1),
            libc::SYS_fchmodat | 452 | libc::SYS_mknodat => set_id(2),
            libc::SYS_openat => set_id(3),
            libc::SYS_personality => {
                refuse_if(!matches!(low(0), 0 | 8 | 0x2_0000 | 0x2_0008 | 0xffff_ffff))
            }
            // Plain allocation and punching a hole, nothing that allocates
            // past the file's size.
            libc::SYS_fallocate if matches!(low(1), 0 | 3) => Verdict::Allow,
            libc::SYS_fallocate => Verdict::Errno(libc::EOPNOTSUPP),
            libc::SYS_socketpair => Verdict::Allow,
            _ if ALLOWED.contains(&call) => Verdict::Allow,
            // Every call nobody named, up to the largest number.
            _ => ENOSYS,
        }
    }

    /// Argument vectors that matter to some rule, each value in each of the
    /// first four positions (the model says which position counts).
    fn argument_sets() -> Vec<[u64; 6]> {
        let mut values: Vec<u64> = vec![
            0,
            // SIGCHLD, as fork passes it; the flags of a new thread.
            17,
            0x003d_0f00,
            // CLONE_FILES (unshare(CLONE_FILES) is fine), CLONE_NEWTIME.
            0x400,
            0x80,
            // Only the high half set: the filter reads the low one.
            0x4000_0000_0000_0000,
            0xffff_ffff,
            0xffff_fffe,
            // Personalities: READ_IMPLIES_EXEC, PER_LINUX32 | ADDR_NO_RANDOMIZE, PER_BSD.
            0x0040_0000,
            0x0002_0008,
            0x0002_0000,
            6,
        ];
        // Every namespace flag alone and with SIGCHLD.
        for bit in 17..31 {
            values.push(1 << bit);
            values.push((1 << bit) | 17);
        }
        // Socket families and types 0..=45 (AF_UNIX 1, AF_INET 2, AF_INET6
        // 10, AF_NETLINK 16, AF_PACKET 17, AF_TIPC 30, AF_VSOCK 40).
        values.extend(0..=45);
        // Modes with and without the set-id bits, and with them in the high half only.
        for mode in [0o644, 0o755, 0o1777, 0o4755, 0o2755, 0o6755, 0o4000, 0o2000] {
            values.push(mode);
            values.push(mode | 0x1_0000_0000);
            values.push((mode << 32) | 0o644);
        }
        let mut sets = Vec::new();
        for &value in &values {
            for position in 0..4 {
                let mut arguments = [0_u64; 6];
                arguments[position] = value;
                sets.push(arguments);
            }
        }
        // socketpair: family and type together, with the flags and junk in the high halves.
        for family in [0, 1, 2, 10, 16, 30, 40, 0x1_0000_0001] {
            for kind in 0..16 {
                for flags in [0, 0x800, 0x8_0000, 0x8_0800, 0x7_0000_0000] {
                    sets.push([family, kind | flags, 0, 0, 0, 0]);
                }
            }
        }
        sets
    }

    /// Numbers 0..=1023, a few above, the edges of the x32 range and -1.
    fn numbers() -> impl Iterator<Item = u32> {
        (0..=1023).chain([
            1024,
            1025,
            70_000,
            X32_SYSCALL_BIT - 1,
            X32_SYSCALL_BIT,
            X32_SYSCALL_BIT | 1,
            0xffff_ffff,
        ])
    }

    /// A foreign architecture: i386 beside x86_64, arm beside aarch64.
    const FOREIGN_ARCH: u32 = if cfg!(target_arch = "aarch64") {
        0x4000_0028
    } else {
        0x4000_0003
    };

    /// The bench's deny-list gives every call with a rule of its own what
    /// the allow-list gives it, and lets every other number reach the
    /// kernel: it is the filter before the allow-list, not a strawman.
    #[test]
    fn the_benchs_deny_list_differs_from_the_allow_list_only_on_unnamed_calls() {
        let sets = argument_sets();
        for network_denied in [false, true] {
            for private_pids in [false, true] {
                let filters = crate::seccomp::filters_for_bench(network_denied, private_pids);
                let named: Vec<u32> = named_rules(network_denied, private_pids)
                    .iter()
                    .map(|&(call, _)| call)
                    .collect();
                for nr in numbers() {
                    for args in &sets {
                        let data = Data {
                            nr,
                            arch: AUDIT_ARCH,
                            args: *args,
                        };
                        let deny = Verdict::from_return(interpret(&filters.deny_list, &data));
                        let allow = Verdict::from_return(interpret(&filters.allow_list, &data));
                        if nr >= X32_SYSCALL_BIT {
                            assert_eq!(deny, allow, "nr {nr:#x}");
                        } else if named.contains(&nr) {
                            assert_eq!(deny, allow, "nr {nr}, args {args:x?}");
                        } else {
                            assert_eq!(deny, Verdict::Allow, "nr {nr}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn each_program_gives_every_call_what_the_model_says() {
        let sets = argument_sets();
        for network_denied in [false, true] {
            for private_pids in [false, true] {
                let program = build(network_denied, private_pids);
                for nr in numbers() {
                    for x32 in [0, X32_SYSCALL_BIT] {
                        for arch in [AUDIT_ARCH, FOREIGN_ARCH, 0] {
                            // The arguments matter only to the native 64-bit calls.
                            let native = arch == AUDIT_ARCH && x32 == 0;
                            for args in if native { &sets[..] } else { &sets[..4] } {
                                let data = Data {
                                    nr: nr | x32,
                                    arch,
                                    args: *args,
                                };
                                assert_eq!(
                                    Verdict::from_return(interpret(&program, &data)),
                                    model(network_denied, private_pids, &data),
                                    "network_denied {network_denied}, private_pids {private_pids}, nr {:#x}, arch {arch:#x}, args {args:x?}",
                                    data.nr,
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// The same spans as a straight list: a second oracle for the search alone.
    fn linear(spans: &[Span]) -> Vec<libc::sock_filter> {
        let mut program = header();
        for &span in spans {
            // A leaf of one span: its own comparisons, check and returns,
            // entered only for a number of the span.
            let code = leaf(&[span]);
            let length = u8::try_from(code.len()).unwrap();
            match span.last.checked_add(1) {
                Some(above) => {
                    program.push(crate::bpf::jump(0x35, span.first, 0, length + 1));
                    program.push(crate::bpf::jump(0x35, above, length, 0));
                }
                None => program.push(crate::bpf::jump(0x35, span.first, 0, length)),
            }
            program.extend(code);
        }
        program.push(crate::bpf::statement(0x06, 0x7fff_0000));
        program
    }

    #[test]
    fn the_search_agrees_with_a_straight_list_of_the_same_rules() {
        let sets = argument_sets();
        for network_denied in [false, true] {
            for private_pids in [false, true] {
                let table = table(network_denied, private_pids);
                let (searched, listed) = (build(network_denied, private_pids), linear(&table));
                for nr in numbers() {
                    // A number without a rule is allowed whatever its arguments.
                    let has_rule = table
                        .iter()
                        .any(|span| (span.first..=span.last).contains(&nr));
                    for args in if has_rule { &sets[..] } else { &sets[..4] } {
                        let data = Data {
                            nr,
                            arch: AUDIT_ARCH,
                            args: *args,
                        };
                        assert_eq!(
                            interpret(&searched, &data),
                            interpret(&listed, &data),
                            "nr {nr}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_search_too_long_for_a_conditional_jump_takes_an_unconditional_one() {
        // Every other number up to 1500 refused, every seventh checked: the
        // lower half of the tree is far longer than 255 instructions.
        let rules: Vec<(u32, Rule)> = (0..1500)
            .step_by(2)
            .map(|call| {
                let rule = if call % 7 == 0 {
                    Rule::RefuseBits {
                        argument: 1,
                        mask: 0o6000,
                    }
                } else {
                    Rule::Refuse(libc::EPERM)
                };
                (call, rule)
            })
            .collect();
        let mut searched = header();
        searched.extend(search(&spans(&rules)));
        check_jumps(&searched);
        assert!(
            searched
                .iter()
                .any(|instruction| instruction.code == BPF_JA)
        );
        let listed = linear(&spans(&rules));
        for nr in 0..1600 {
            for mode in [0o755, 0o4755] {
                let data = Data {
                    nr,
                    arch: AUDIT_ARCH,
                    args: [0, mode, 0, 0, 0, 0],
                };
                assert_eq!(
                    interpret(&searched, &data),
                    interpret(&listed, &data),
                    "nr {nr}"
                );
            }
        }
    }

    #[test]
    fn the_program_is_within_the_kernels_limits_and_every_jump_lands_inside() {
        for network_denied in [false, true] {
            for private_pids in [false, true] {
                check_jumps(&build(network_denied, private_pids));
            }
        }
    }

    /// Under the kernel's limit of 4096 instructions, every jump (`JA` too)
    /// lands inside, every load is an aligned word of `seccomp_data`, and the
    /// last instruction returns.
    fn check_jumps(program: &[libc::sock_filter]) {
        assert!(program.len() < 4096);
        for (index, instruction) in program.iter().enumerate() {
            let furthest = match instruction.code {
                BPF_JA => index + 1 + usize::try_from(instruction.k).unwrap(),
                0x15 | 0x35 | 0x45 => index + 1 + usize::from(instruction.jt.max(instruction.jf)),
                0x20 => {
                    assert!(
                        instruction.k.is_multiple_of(4) && instruction.k < 64,
                        "load at {index}"
                    );
                    continue;
                }
                0x06 | 0x54 => continue,
                code => panic!("instruction {code:#x} at {index}"),
            };
            assert!(
                furthest < program.len(),
                "jump at {index} leaves the program"
            );
        }
        assert_eq!(program.last().unwrap().code, 0x06, "ends in a return");
    }

    #[test]
    fn the_longest_walk_is_short() {
        // The point of the search: the kernel walks the program for every
        // number of every architecture when it installs it.
        let program = build(true, false);
        let leaves = table(true, false).len().div_ceil(LEAF_SIZE);
        let depth = usize::try_from(leaves.next_power_of_two().trailing_zeros()).unwrap();
        for nr in 0..1024 {
            let data = Data {
                nr,
                arch: AUDIT_ARCH,
                args: [0; 6],
            };
            let mut steps = 0;
            let mut counter = 0;
            // The walk up to the first load of an argument or return.
            loop {
                let instruction = program[counter];
                steps += 1;
                counter += 1;
                match instruction.code {
                    0x06 => break,
                    0x20 if instruction.k >= 16 => break,
                    0x20 => {}
                    0x15 => {
                        let value = data.word(0);
                        counter += usize::from(if value == instruction.k {
                            instruction.jt
                        } else {
                            instruction.jf
                        });
                    }
                    0x35 => {
                        let value = data.word(0);
                        counter += usize::from(if value >= instruction.k {
                            instruction.jt
                        } else {
                            instruction.jf
                        });
                    }
                    0x05 => counter += usize::try_from(instruction.k).unwrap(),
                    code => panic!("{code:#x} before a load of an argument"),
                }
            }
            assert!(
                steps <= header().len() + 2 * depth + 2 * LEAF_SIZE + 1,
                "nr {nr} takes {steps} steps"
            );
        }
    }

    #[test]
    fn under_deny_no_socket_can_name_another_as_prepared_runs_rely_on() {
        let refused = Verdict::Errno(libc::EPERM);
        let mut every_socket_refused = true;
        for private_pids in [false, true] {
            let program = build(true, private_pids);
            for family in 0..=64 {
                for kind in 0..16 {
                    let call = |nr: libc::c_long| {
                        let data = Data {
                            nr: u32::try_from(nr).unwrap(),
                            arch: AUDIT_ARCH,
                            args: [family, kind | 0x8_0800, 0, 0, 0, 0],
                        };
                        Verdict::from_return(interpret(&program, &data))
                    };
                    let connected_pair = family == 1 && matches!(kind, 1 | 5);
                    every_socket_refused &= call(libc::SYS_socket) == refused
                        && (connected_pair || call(libc::SYS_socketpair) == refused);
                }
            }
        }
        assert_eq!(every_socket_refused, REFUSES_EVERY_SOCKET_UNDER_DENY);
    }

    #[test]
    fn no_call_is_listed_twice() {
        let mut calls = DENIED.to_vec();
        calls.extend(TRACING);
        calls.extend(ALLOWED);
        calls.sort_unstable();
        calls.dedup();
        assert_eq!(calls.len(), DENIED.len() + TRACING.len() + ALLOWED.len());
        // An allowed call has no rule of its own either.
        for network_denied in [false, true] {
            for (call, rule) in named_rules(network_denied, false) {
                assert!(
                    !ALLOWED.contains(&libc::c_long::from(call)),
                    "{call} is allowed and has the rule {rule:?}"
                );
            }
        }
        for network_denied in [false, true] {
            let mut numbers: Vec<u32> = rules(network_denied, false)
                .iter()
                .map(|&(call, _)| call)
                .collect();
            let count = numbers.len();
            numbers.dedup();
            assert_eq!(numbers.len(), count);
        }
    }

    #[test]
    fn with_unix_grants_only_stream_unix_sockets_are_made_and_every_connect_is_supervised() {
        use crate::seccomp::Sockets;
        for private_pids in [false, true] {
            let program = build(Sockets::ProxiedUnix, private_pids);
            let proxied = build(Sockets::Proxied, private_pids);
            check_jumps(&program);
            for nr in 0..1024 {
                for args in [[0; 6], [1, 1, 0, 0, 0, 0], [2, 2, 16, 0, 0, 0]] {
                    let data = Data {
                        nr,
                        arch: AUDIT_ARCH,
                        args,
                    };
                    let verdict = Verdict::from_return(interpret(&program, &data));
                    let call = libc::c_long::from(nr);
                    if call == libc::SYS_connect {
                        assert_eq!(verdict, Verdict::Notify);
                    } else if call != libc::SYS_socket {
                        // Every other call as under the proxy without Unix grants.
                        let without = Verdict::from_return(interpret(&proxied, &data));
                        assert_eq!(verdict, without, "nr {nr}");
                    }
                }
            }
            for family in 0..=64 {
                for kind in 0..16 {
                    let data = Data {
                        nr: u32::try_from(libc::SYS_socket).unwrap(),
                        arch: AUDIT_ARCH,
                        args: [family, kind | 0x8_0800, 0, 0, 0, 0],
                    };
                    let allowed =
                        matches!(family, 2 | 10 | 16) || (family == 1 && matches!(kind, 1 | 5));
                    let expected = if allowed {
                        Verdict::Allow
                    } else {
                        Verdict::Errno(libc::EPERM)
                    };
                    let verdict = Verdict::from_return(interpret(&program, &data));
                    assert_eq!(verdict, expected, "socket({family}, {kind})");
                }
            }
        }
    }

    /// With supervised creations, every call that makes a name goes to the
    /// supervisor (`open`/`openat` only with `O_CREAT`), and every other call
    /// gets what the same kind of run without supervision gets.
    #[test]
    fn with_supervised_creations_every_call_that_makes_a_name_is_supervised() {
        use crate::bpf::build_for;
        use crate::seccomp::{CREATING, Sockets};
        let open_calls: Vec<(libc::c_long, usize)> = {
            let mut calls = vec![(libc::SYS_openat, 2)];
            #[cfg(target_arch = "x86_64")]
            calls.push((libc::SYS_open, 1));
            calls
        };
        for sockets in [
            Sockets::Any,
            Sockets::Proxied,
            Sockets::ProxiedUnix,
            Sockets::None,
        ] {
            for private_pids in [false, true] {
                let supervised = build_for(sockets, private_pids, true);
                let plain = build(sockets, private_pids);
                check_jumps(&supervised);
                for nr in numbers() {
                    for args in argument_sets() {
                        let data = Data {
                            nr,
                            arch: AUDIT_ARCH,
                            args,
                        };
                        let verdict = Verdict::from_return(interpret(&supervised, &data));
                        let call = libc::c_long::from(nr);
                        let expected = if CREATING.contains(&call) {
                            Verdict::Notify
                        } else if let Some(&(_, flags)) =
                            open_calls.iter().find(|&&(open, _)| open == call)
                        {
                            if args[flags] & 0o100 != 0 {
                                Verdict::Notify
                            } else {
                                Verdict::from_return(interpret(&plain, &data))
                            }
                        } else {
                            Verdict::from_return(interpret(&plain, &data))
                        };
                        assert_eq!(verdict, expected, "{sockets:?}, nr {nr}, args {args:x?}");
                    }
                }
            }
        }
    }

    #[test]
    fn runs_without_unix_grants_never_wait_for_the_supervisor() {
        use crate::seccomp::Sockets;
        for sockets in [Sockets::Any, Sockets::Proxied, Sockets::None] {
            for private_pids in [false, true] {
                assert!(
                    build(sockets, private_pids)
                        .iter()
                        .all(|instruction| instruction.code != 0x06 || instruction.k != 0x7fc0_0000),
                    "{sockets:?}"
                );
            }
        }
    }
}
