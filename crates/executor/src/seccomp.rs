//! The system-call filter of a run: a seccomp deny-list in the spirit of
//! Docker's default profile, built once in the parent as classic BPF and
//! installed by the clone child as the last step before `execve`.
//!
//! The program is written by hand rather than with a crate (seccompiler,
//! libseccomp): it is a straight list of about fifty comparisons with four
//! argument checks, the child must install it with one system call and no
//! allocation, and every instruction is listed with its reason in
//! `docs/security.md`, which a generated program would hide.
//!
//! Denied calls fail with `EPERM`, as they would for a process without the
//! capability they need, so programs take their usual error path; `clone3`
//! fails with `ENOSYS`, so that libc falls back to `clone`, whose flags the
//! filter can read (`clone3` passes them in memory a filter cannot read).
//! A call of a foreign architecture (32-bit `int 0x80` from a 64-bit
//! process) kills the process: the numbers below mean other calls there.

use std::sync::OnceLock;

/// Whether the filter of a network-denied run refuses `socket` for every
/// family, so that a run cannot make a socket at all (`prepared.rs` lets such
/// runs share one empty network namespace).
pub(crate) const REFUSES_EVERY_SOCKET_UNDER_DENY: bool = false;

/// Whether this build has a filter for its architecture.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) const SUPPORTED: bool = true;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const SUPPORTED: bool = false;

/// `AUDIT_ARCH_X86_64`: EM_X86_64 | 64-bit | little-endian.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
/// `AUDIT_ARCH_AARCH64`: EM_AARCH64 | 64-bit | little-endian.
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: u32 = 0;

/// x32 system calls are numbered from this bit on x86_64; each is another
/// entry point to a call the list below names by its 64-bit number.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `BPF_LD | BPF_W | BPF_ABS` (0x00, 0x00, 0x20).
const BPF_LD_W_ABS: u16 = 0x20;
/// `BPF_JMP | BPF_JEQ | BPF_K`, and the same with `BPF_JGE` and `BPF_JSET`.
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;

const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_SET_MODE_FILTER: libc::c_ulong = 1;

/// Offsets in `struct seccomp_data`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
/// The low 32 bits of the first argument (little-endian).
const OFFSET_ARG0_LOW: u32 = 16;

/// Every `CLONE_NEW*` flag `clone` takes: mount, cgroup, UTS, IPC, user,
/// PID, network (Docker's mask 0x7E020000). `CLONE_NEWTIME` (0x80) lies in
/// the exit-signal byte of `clone`, so it is only checked for `unshare`.
const CLONE_NAMESPACES: u32 = 0x7E02_0000;
const CLONE_NEWTIME: u32 = 0x80;

/// `AF_VSOCK`: sockets to the hypervisor, which no network namespace covers.
const AF_VSOCK: u32 = 40;

/// The `personality` values a program may set: the default (`PER_LINUX`),
/// `PER_LINUX32` (8), `ADDR_NO_RANDOMIZE` with either (used by `setarch -R`
/// and debuggers), and the query `0xffffffff`: Docker's list.
const PERSONALITIES: [u32; 5] = [0, 8, 0x0002_0000, 0x0002_0008, 0xffff_ffff];

/// Calls that fail with `EPERM`, in three groups: what needs a capability
/// the run does not have (denied anyway, but the kernel code behind the
/// check is attack surface), what reaches outside the run whatever its
/// privileges, and what has a record of kernel bugs with no use in a tool.
/// `docs/security.md` gives the reason for each line.
const DENIED: &[libc::c_long] = &[
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

fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn number(call: libc::c_long) -> u32 {
    u32::try_from(call).expect("system call numbers are small and positive")
}

/// `S_ISUID | S_ISGID`: a mode with either bit makes a file that runs with its
/// owner's (or group's) identity. A tool of a root toolsmith is uid 0 without
/// capabilities, and the owner of what it writes: a `chmod 4755` of its own
/// copy of a shell would leave a setuid-root program in the project for the
/// next user to run (`b08` in the hostile corpus). No capability covers that:
/// the owner may always set these bits, so the filter refuses them.
const SET_ID_BITS: u32 = 0o6000;

/// `AF_UNIX`: under `network = deny` a pathname socket is the host's other
/// door (a container engine's socket, the D-Bus system bus, an ssh agent),
/// which a network namespace does not close. `socketpair` stays allowed.
const AF_UNIX: u32 = 1;

/// Tracing: refused only to a run without a private PID namespace. In one, a
/// tool sees nothing but its own tree and toolsmith's init, which is not
/// dumpable and which a tool without `CAP_SYS_PTRACE` cannot trace, so a
/// debugger, `strace` or the leak checker of AddressSanitizer (which traces
/// its own threads) work as in a shell. Outside one, other processes of the
/// same uid would be in reach.
const TRACING: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
];

/// `fchmodat2` (Linux 6.6), the same number on every architecture.
const SYS_FCHMODAT2: libc::c_long = 452;

/// The filter program, built once per kind: with `network_denied`, Unix
/// sockets are refused too; without `private_pids`, tracing (`TRACING`) too.
pub(crate) fn program(network_denied: bool, private_pids: bool) -> &'static [libc::sock_filter] {
    static PROGRAMS: [OnceLock<Vec<libc::sock_filter>>; 4] = [const { OnceLock::new() }; 4];
    let index = usize::from(network_denied) * 2 + usize::from(private_pids);
    PROGRAMS[index].get_or_init(|| build(network_denied, private_pids))
}

fn build(network_denied: bool, private_pids: bool) -> Vec<libc::sock_filter> {
    let deny = |errno: i32| {
        statement(
            BPF_RET_K,
            SECCOMP_RET_ERRNO | u32::try_from(errno).unwrap_or(1),
        )
    };
    let mut program = vec![
        statement(BPF_LD_W_ABS, OFFSET_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        statement(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
        statement(BPF_LD_W_ABS, OFFSET_NR),
    ];
    if cfg!(target_arch = "x86_64") {
        program.push(jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1));
        program.push(deny(libc::EPERM));
    }
    let tracing: &[libc::c_long] = if private_pids { &[] } else { TRACING };
    for &call in DENIED.iter().chain(tracing) {
        program.push(jump(BPF_JEQ_K, number(call), 0, 1));
        program.push(deny(libc::EPERM));
    }
    program.push(jump(BPF_JEQ_K, number(libc::SYS_clone3), 0, 1));
    program.push(deny(libc::ENOSYS));
    // Each argument check loads the argument, so it ends in a return.
    let flags_check = |call: libc::c_long, mask: u32| {
        [
            jump(BPF_JEQ_K, number(call), 0, 4),
            statement(BPF_LD_W_ABS, OFFSET_ARG0_LOW),
            jump(BPF_JSET_K, mask, 0, 1),
            deny(libc::EPERM),
            statement(BPF_RET_K, SECCOMP_RET_ALLOW),
        ]
    };
    program.extend(flags_check(libc::SYS_clone, CLONE_NAMESPACES));
    program.extend(flags_check(
        libc::SYS_unshare,
        CLONE_NAMESPACES | CLONE_NEWTIME,
    ));
    if network_denied {
        program.extend([
            jump(BPF_JEQ_K, number(libc::SYS_socket), 0, 5),
            statement(BPF_LD_W_ABS, OFFSET_ARG0_LOW),
            jump(BPF_JEQ_K, AF_VSOCK, 1, 0),
            jump(BPF_JEQ_K, AF_UNIX, 0, 1),
            deny(libc::EPERM),
            statement(BPF_RET_K, SECCOMP_RET_ALLOW),
        ]);
    } else {
        program.extend([
            jump(BPF_JEQ_K, number(libc::SYS_socket), 0, 4),
            statement(BPF_LD_W_ABS, OFFSET_ARG0_LOW),
            jump(BPF_JEQ_K, AF_VSOCK, 0, 1),
            deny(libc::EPERM),
            statement(BPF_RET_K, SECCOMP_RET_ALLOW),
        ]);
    }
    // The mode argument of every call that sets a file's mode: no setuid or
    // setgid bit (`SET_ID_BITS`). `open`/`openat` take a mode only with
    // `O_CREAT` or `O_TMPFILE`; libc passes 0 otherwise.
    let mode_check = |call: libc::c_long, argument: u32| {
        [
            jump(BPF_JEQ_K, number(call), 0, 4),
            statement(BPF_LD_W_ABS, OFFSET_ARG0_LOW + 8 * argument),
            jump(BPF_JSET_K, SET_ID_BITS, 0, 1),
            deny(libc::EPERM),
            statement(BPF_RET_K, SECCOMP_RET_ALLOW),
        ]
    };
    #[cfg(target_arch = "x86_64")]
    {
        program.extend(mode_check(libc::SYS_chmod, 1));
        program.extend(mode_check(libc::SYS_creat, 1));
        program.extend(mode_check(libc::SYS_open, 2));
        program.extend(mode_check(libc::SYS_mknod, 1));
    }
    program.extend(mode_check(libc::SYS_fchmod, 1));
    program.extend(mode_check(libc::SYS_fchmodat, 2));
    program.extend(mode_check(SYS_FCHMODAT2, 2));
    program.extend(mode_check(libc::SYS_openat, 3));
    program.extend(mode_check(libc::SYS_mknodat, 2));
    // `openat2` passes its mode in a structure the filter cannot read: ENOSYS
    // sends libc and programs back to `openat`.
    program.push(jump(BPF_JEQ_K, number(libc::SYS_openat2), 0, 1));
    program.push(deny(libc::ENOSYS));
    let allowed_count = u8::try_from(PERSONALITIES.len()).expect("a handful of personalities");
    program.push(jump(
        BPF_JEQ_K,
        number(libc::SYS_personality),
        0,
        allowed_count + 3,
    ));
    program.push(statement(BPF_LD_W_ABS, OFFSET_ARG0_LOW));
    for (index, &persona) in PERSONALITIES.iter().enumerate() {
        // A match jumps over the remaining comparisons and the denial to the ALLOW.
        let remaining = u8::try_from(PERSONALITIES.len() - index).expect("a handful");
        program.push(jump(BPF_JEQ_K, persona, remaining, 0));
    }
    program.push(deny(libc::EPERM));
    program.push(statement(BPF_RET_K, SECCOMP_RET_ALLOW));
    program.push(statement(BPF_RET_K, SECCOMP_RET_ALLOW));
    program
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

/// Whether the filter can be installed here, proven by installing it in a
/// child that then checks that a denied call is refused.
pub(crate) fn probe() -> Result<(), String> {
    if !SUPPORTED {
        return Err(format!(
            "toolsmith has no system-call filter for {}",
            std::env::consts::ARCH
        ));
    }
    let filter = fprog(program(false, false));
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
        if libc::prctl(
            libc::PR_SET_NO_NEW_PRIVS,
            1 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        ) != 0
            || !install(filter)
        {
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
    use crate::seccomp::{DENIED, TRACING, build};

    #[test]
    fn the_program_is_within_the_kernels_limits_and_every_jump_lands_inside() {
        for network_denied in [false, true] {
            for private_pids in [false, true] {
                check_jumps(&build(network_denied, private_pids));
            }
        }
    }

    fn check_jumps(program: &[libc::sock_filter]) {
        assert!(program.len() < 4096);
        for (index, instruction) in program.iter().enumerate() {
            if instruction.code & 0x07 == 0x05 {
                let furthest = index + 1 + usize::from(instruction.jt.max(instruction.jf));
                assert!(
                    furthest < program.len(),
                    "jump at {index} leaves the program"
                );
            }
        }
        let last = program.last().unwrap();
        assert_eq!((last.code, last.k), (0x06, 0x7fff_0000), "ends in ALLOW");
    }

    #[test]
    fn no_call_is_listed_twice() {
        let mut calls = DENIED.to_vec();
        calls.extend(TRACING);
        calls.sort_unstable();
        calls.dedup();
        assert_eq!(calls.len(), DENIED.len() + TRACING.len());
    }
}
