//! toolsmith's own init: PID 1 of every run's PID namespace.
//!
//! The first process of a new PID namespace is its init, and the kernel
//! shields an init from every signal it has no handler for, even those it
//! sends itself: a program that is PID 1 ignores `kill -TERM $$`, SIGSTOP,
//! SIGXFSZ and the executor's SIGTERM at a deadline. So the program is never
//! PID 1. The namespace's first process stays in the executor's code (see
//! `spawn.rs` and `child.rs`): it sets the namespaces up, starts the program as its child
//! (PID 2) with a second vfork-style clone, and then runs [`supervise`]:
//! it forwards every signal it receives to the program's process group,
//! reaps every process that is re-parented to it, and when the program
//! exits it writes the program's own wait status and resource usage to the
//! status pipe, where the executor reads them (a [`StatusRecord`]).
//!
//! The init is made before the call's program is known (ahead of the call
//! by `spawn::prepare_on_init_thread`, or inline by `spawn::spawn`): it sets up the namespaces, the mounts and the system-call filter, writes
//! a ready byte, and waits on its go pipe; the executor then stores the
//! program's plan and writes the go byte (`spawn::go`). An executor that
//! keeps a sandbox prepared (`Executor::keep_prepared`) does the first half
//! while the previous call runs.
//!
//! The init shares the executor's memory (`CLONE_VM`, no `execve`: the
//! design and its measurements are in `docs/executor.md`) and its
//! descriptor table (`CLONE_FILES`: the program it starts gets the call's
//! pipes from it). Hence the rules this module keeps:
//! - after the handshake it makes only raw system calls ([`syscall4`]), never
//!   a libc wrapper, so not even `errno` (the spawner thread's, whose thread
//!   pointer the init inherited) is written; it never allocates, locks or
//!   panics;
//! - it never closes a descriptor (they are the executor's);
//! - it never touches the spawn plan after the handshake (the executor frees it);
//! - it lives under the run's system-call filter, and needs nothing the
//!   filter refuses: `clone` without namespace flags, `wait4`,
//!   `rt_sigtimedwait`, `kill`, `read` and `write`;
//! - it runs on a stack the executor keeps mapped until it has reaped the init;
//! - it is not in the run's cgroups, so the memory cgroup's OOM killer, which
//!   kills every process sharing the victim's memory, can never pick it;
//! - the memory is not dumpable (the init sets it before the program exists),
//!   so the program cannot ptrace the init or read its memory without
//!   `CAP_SYS_PTRACE` in the executor's user namespace.

use std::ffi::c_int;
use std::ptr;

/// What the init writes to the status pipe when the program exits.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StatusRecord {
    /// The wait status, as `wait4` returned it.
    pub(crate) status: i32,
    /// Always [`StatusRecord::MAGIC`]: a record is whole or absent.
    pub(crate) magic: i32,
    /// User plus system CPU time of the program and the children it waited for.
    pub(crate) cpu_micros: i64,
    /// The largest resident set of the program or a child it waited for, in KiB.
    pub(crate) max_rss_kib: i64,
}

impl StatusRecord {
    const MAGIC: i32 = 0x7001_5e11;

    /// The size of a record on the pipe (well below `PIPE_BUF`, so it is written at once).
    pub(crate) const SIZE: usize = size_of::<StatusRecord>();

    /// Decodes a record read from the status pipe; `None` when it is not one.
    pub(crate) fn decode(bytes: &[u8]) -> Option<StatusRecord> {
        let bytes: [u8; StatusRecord::SIZE] = bytes.try_into().ok()?;
        // SAFETY: StatusRecord is plain old data of exactly this size.
        let record: StatusRecord = unsafe { std::mem::transmute(bytes) };
        (record.magic == StatusRecord::MAGIC).then_some(record)
    }

    fn as_bytes(&self) -> &[u8; StatusRecord::SIZE] {
        // SAFETY: StatusRecord is plain old data of exactly this size, with no padding.
        unsafe { &*ptr::from_ref(self).cast::<[u8; StatusRecord::SIZE]>() }
    }
}

/// The kernel's `struct sigaction` (not glibc's): handler, flags, restorer,
/// and a 64-bit mask. All zero is SIG_DFL with an empty mask.
#[repr(C)]
#[derive(Default)]
pub(crate) struct KernelSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

/// One past the highest signal number on Linux.
pub(crate) const NSIG: c_int = 65;

/// What woke the init.
pub(crate) enum Wake {
    /// A signal, taken from the signalfd.
    Signal(c_int),
    /// The executor's go: start a program.
    Go,
    /// The executor closed the go pipe or it failed: the init's work is over.
    Closed,
}

/// The size of the kernel's `struct signalfd_siginfo`; the signal number is
/// its first 32 bits.
const SIGNALFD_SIGINFO_SIZE: usize = 128;

/// Waits for the next signal or go. Every signal is blocked in the init (the
/// spawner blocked them all before the clone), so each one waits on the
/// signalfd, including those the kernel would otherwise drop for an init.
///
/// `signal_fd` reads the calling process's own pending signals (signalfd's
/// rule), whoever created it.
///
/// # Safety
/// Call only in the init; raw system calls only.
pub(crate) unsafe fn wait(signal_fd: c_int, go_fd: c_int) -> Wake {
    let mut polls = [
        libc::pollfd {
            fd: signal_fd,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: go_fd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        polls[0].revents = 0;
        polls[1].revents = 0;
        // SAFETY: ppoll on two valid pollfds, no timeout, no mask change.
        let ready = unsafe { syscall4(libc::SYS_ppoll, polls.as_mut_ptr() as usize, 2, 0, 0) };
        if ready <= 0 {
            continue;
        }
        if polls[0].revents != 0 {
            let mut info = [0_u8; SIGNALFD_SIGINFO_SIZE];
            // SAFETY: a read of one record into a local buffer (the fd is non-blocking).
            let read = unsafe {
                syscall4(
                    libc::SYS_read,
                    signal_fd as usize,
                    info.as_mut_ptr() as usize,
                    SIGNALFD_SIGINFO_SIZE,
                    0,
                )
            };
            if read == SIGNALFD_SIGINFO_SIZE as isize {
                let signal = u32::from_ne_bytes([info[0], info[1], info[2], info[3]]);
                return Wake::Signal(signal as c_int);
            }
        }
        if polls[1].revents != 0 {
            // SAFETY: raw system calls only.
            // One byte on the go pipe; EOF or an error: the executor let
            // this init go unused.
            return if unsafe { read_byte(go_fd) }.is_some() {
                Wake::Go
            } else {
                Wake::Closed
            };
        }
    }
}

/// Forwards `signal` to the program's process group, as a shell's job
/// control does for a foreground job (the program made that group with
/// `setpgid` in the init's session); to the program alone when it moved to
/// another group.
///
/// # Safety
/// Raw system calls only.
pub(crate) unsafe fn forward(tool: libc::pid_t, signal: c_int) {
    // SAFETY: kill of a process group, then of one process.
    unsafe {
        if syscall4(libc::SYS_kill, (-tool) as usize, signal as usize, 0, 0) < 0 {
            syscall4(libc::SYS_kill, tool as usize, signal as usize, 0, 0);
        }
    }
}

/// Resets every signal disposition to the default, in the init before the
/// program exists. Handlers inherited from the executor must never run in the
/// init, and an ignored SIGCHLD would make the kernel reap the program itself.
/// It must come before the program starts: setting SIGCHLD (or any signal
/// whose default is to ignore it) to SIG_DFL discards it if pending, even
/// blocked, so a reset after the program's start could lose its exit.
///
/// # Safety
/// Call only in the init: it changes the calling process's dispositions.
pub(crate) unsafe fn reset_signal_dispositions() {
    let default_action = KernelSigaction::default();
    for signal in 1..NSIG {
        // SAFETY: rt_sigaction with a valid kernel sigaction; the errors for
        // SIGKILL and SIGSTOP are expected and harmless.
        unsafe {
            syscall4(
                libc::SYS_rt_sigaction,
                signal as usize,
                ptr::from_ref(&default_action) as usize,
                0,
                size_of::<u64>(),
            );
        }
    }
}

/// Reaps every child that has exited. When the program is among them, writes
/// its record to the status pipe and returns true.
///
/// # Safety
/// Raw system calls only.
pub(crate) unsafe fn reap_children(tool: libc::pid_t, status_fd: c_int) -> bool {
    let mut tool_reaped = false;
    loop {
        let mut status: c_int = 0;
        // SAFETY: rusage is plain data, filled by the kernel.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 with valid out-pointers.
        let pid = unsafe {
            syscall4(
                libc::SYS_wait4,
                usize::MAX, // -1: any child
                ptr::from_mut(&mut status) as usize,
                (libc::WNOHANG | libc::__WALL) as usize,
                ptr::from_mut(&mut usage) as usize,
            )
        };
        if pid <= 0 {
            return tool_reaped;
        }
        if pid == tool as isize {
            tool_reaped = true;
            let micros = |time: libc::timeval| {
                time.tv_sec
                    .wrapping_mul(1_000_000)
                    .wrapping_add(time.tv_usec)
            };
            let record = StatusRecord {
                status,
                magic: StatusRecord::MAGIC,
                cpu_micros: micros(usage.ru_utime).wrapping_add(micros(usage.ru_stime)),
                max_rss_kib: usage.ru_maxrss as i64,
            };
            // SAFETY: a write of a plain buffer to our own descriptor.
            unsafe {
                syscall4(
                    libc::SYS_write,
                    status_fd as usize,
                    record.as_bytes().as_ptr() as usize,
                    StatusRecord::SIZE,
                    0,
                );
            }
        }
    }
}

/// Writes `byte` to `fd` (the handshakes on the status and go pipes); false
/// when that failed. Raw system calls only: the init, and the spawner
/// thread while an init or its program shares its `errno`, use it.
///
/// # Safety
/// `fd` is a descriptor of this process.
pub(crate) unsafe fn write_byte(fd: c_int, byte: u8) -> bool {
    // SAFETY: a one-byte write from a local.
    unsafe {
        syscall4(
            libc::SYS_write,
            fd as usize,
            ptr::from_ref(&byte) as usize,
            1,
            0,
        ) == 1
    }
}

/// Reads one byte from `fd`, again when a signal interrupted the read:
/// `None` at EOF or on an error. Raw system calls only, as [`write_byte`].
///
/// # Safety
/// `fd` is a descriptor of this process.
pub(crate) unsafe fn read_byte(fd: c_int) -> Option<u8> {
    let mut byte = 0_u8;
    loop {
        // SAFETY: a one-byte read into a local.
        let read = unsafe {
            syscall4(
                libc::SYS_read,
                fd as usize,
                ptr::from_mut(&mut byte) as usize,
                1,
                0,
            )
        };
        if read != -(libc::EINTR as isize) {
            return (read == 1).then_some(byte);
        }
    }
}

/// Ends the init at once.
///
/// # Safety
/// Raw system calls only.
pub(crate) unsafe fn exit(code: c_int) -> ! {
    loop {
        // SAFETY: exit_group never returns.
        unsafe { syscall4(libc::SYS_exit_group, code as usize, 0, 0, 0) };
    }
}

/// A system call with up to four arguments that never touches `errno`:
/// returns the result, or minus the error number.
///
/// # Safety
/// As the system call itself.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn syscall4(
    number: libc::c_long,
    a0: usize,
    a1: usize,
    a2: usize,
    a3: usize,
) -> isize {
    let result: isize;
    // SAFETY: the x86-64 system call convention; rcx and r11 are clobbered.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") number as isize => result,
            in("rdi") a0,
            in("rsi") a1,
            in("rdx") a2,
            in("r10") a3,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    result
}

/// A system call with up to four arguments that never touches `errno`:
/// returns the result, or minus the error number.
///
/// # Safety
/// As the system call itself.
#[cfg(target_arch = "aarch64")]
pub(crate) unsafe fn syscall4(
    number: libc::c_long,
    a0: usize,
    a1: usize,
    a2: usize,
    a3: usize,
) -> isize {
    let result: isize;
    // SAFETY: the AArch64 system call convention.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") number,
            inlateout("x0") a0 as isize => result,
            in("x1") a1,
            in("x2") a2,
            in("x3") a3,
            options(nostack),
        );
    }
    result
}

/// A system call with up to four arguments. On this architecture it goes
/// through libc, so a failing call writes the spawner thread's `errno`, a
/// value that thread never reads while it waits.
///
/// # Safety
/// As the system call itself.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) unsafe fn syscall4(
    number: libc::c_long,
    a0: usize,
    a1: usize,
    a2: usize,
    a3: usize,
) -> isize {
    // SAFETY: as the system call itself.
    unsafe { libc::syscall(number, a0, a1, a2, a3) as isize }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_survives_the_pipe() {
        let record = StatusRecord {
            status: 11,
            magic: StatusRecord::MAGIC,
            cpu_micros: 1_500_000,
            max_rss_kib: 2048,
        };
        assert_eq!(StatusRecord::decode(record.as_bytes()), Some(record));
    }

    #[test]
    fn a_short_or_foreign_record_is_none() {
        assert_eq!(StatusRecord::decode(&[0; 3]), None);
        assert_eq!(StatusRecord::decode(&[0; StatusRecord::SIZE]), None);
    }
}
