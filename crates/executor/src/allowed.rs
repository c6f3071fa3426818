//! The system calls the filter lets through: an allow-list in the spirit of
//! Docker's default profile, written for toolsmith's tools. A number that is
//! neither here nor in `seccomp.rs`'s refusals and argument rules fails with
//! `ENOSYS`, the error of a kernel that lacks the call, so the calls a newer
//! kernel adds start refused until someone names them, and programs take
//! the fallback they have for older kernels.
//!
//! Each family says why a tool needs it; `docs/security.md` lists the
//! families and what is deliberately left out (the NUMA policy calls, the
//! mount-information calls, the `*xattrat` and `file_*attr` calls, the LSM
//! calls, `modify_ldt`, `memfd_secret`, the obsolete calls). The calls
//! with an argument rule (`clone`, `unshare`, `socket`, `socketpair`,
//! `personality`, the mode of `chmod`/`open`/`mknod`, `fallocate`) and the
//! tracing calls (allowed only in a private PID namespace) are not listed
//! here: `seccomp::rules` owns them.

/// Numbers newer than the `libc` crate's tables, the same on every
/// architecture (the unified table from Linux 5.1 on).
const SYS_CACHESTAT: libc::c_long = 451;
const SYS_FUTEX_WAKE: libc::c_long = 454;
const SYS_FUTEX_WAIT: libc::c_long = 455;
const SYS_FUTEX_REQUEUE: libc::c_long = 456;
const SYS_MSEAL: libc::c_long = 462;
/// `uretprobe` and `uprobe` (x86_64 only): the kernel's own trampolines of
/// the probes the host sets on a binary. The kernel never asks a filter
/// about them (`seccomp_uprobe_exception`), and they fail with `ENXIO`
/// unless called from such a trampoline; listed so that the list says what
/// reaches the kernel.
#[cfg(target_arch = "x86_64")]
const SYS_URETPROBE: libc::c_long = 335;
#[cfg(target_arch = "x86_64")]
const SYS_UPROBE: libc::c_long = 336;
/// `map_shadow_stack` (x86_64 only): CET shadow stacks for new threads.
#[cfg(target_arch = "x86_64")]
const SYS_MAP_SHADOW_STACK: libc::c_long = 453;
/// `io_pgetevents`, which the `libc` crate does not name.
#[cfg(target_arch = "x86_64")]
const SYS_IO_PGETEVENTS: libc::c_long = 333;
#[cfg(target_arch = "aarch64")]
const SYS_IO_PGETEVENTS: libc::c_long = 292;
/// Generic-table calls the `libc` crate does not name for aarch64.
#[cfg(target_arch = "aarch64")]
const SYS_RENAMEAT: libc::c_long = 38;
#[cfg(target_arch = "aarch64")]
const SYS_SYNC_FILE_RANGE: libc::c_long = 84;
#[cfg(target_arch = "aarch64")]
const SYS_GETRLIMIT: libc::c_long = 163;
#[cfg(target_arch = "aarch64")]
const SYS_SETRLIMIT: libc::c_long = 164;

/// The calls every run may make whatever its arguments, by family.
pub(crate) const ALLOWED: &[libc::c_long] = &[
    // Processes: a tool runs programs, waits for them, signals its own.
    // (`kill` reaches only what the PID namespace or the uid lets it.)
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_kill,
    libc::SYS_tkill,
    libc::SYS_tgkill,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_send_signal,
    libc::SYS_process_mrelease,
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_getppid,
    libc::SYS_getpgid,
    libc::SYS_setpgid,
    libc::SYS_getsid,
    libc::SYS_setsid,
    libc::SYS_set_tid_address,
    libc::SYS_set_robust_list,
    libc::SYS_get_robust_list,
    libc::SYS_rseq,
    libc::SYS_restart_syscall,
    // Process attributes. `prctl`'s privileged operations need capabilities
    // the run does not have; the bounding set and NO_NEW_PRIVS only tighten.
    libc::SYS_prctl,
    libc::SYS_uname,
    libc::SYS_sysinfo,
    libc::SYS_umask,
    libc::SYS_prlimit64,
    libc::SYS_getrusage,
    libc::SYS_times,
    libc::SYS_getpriority,
    libc::SYS_setpriority,
    libc::SYS_ioprio_get,
    libc::SYS_ioprio_set,
    libc::SYS_getcpu,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_getparam,
    libc::SYS_sched_setparam,
    libc::SYS_sched_getscheduler,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_getattr,
    libc::SYS_sched_setattr,
    libc::SYS_sched_get_priority_max,
    libc::SYS_sched_get_priority_min,
    libc::SYS_sched_rr_get_interval,
    // Identity and capabilities: a tool may drop what it holds (raising
    // needs capabilities the run does not have).
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getresuid,
    libc::SYS_getresgid,
    libc::SYS_getgroups,
    libc::SYS_setuid,
    libc::SYS_setgid,
    libc::SYS_setreuid,
    libc::SYS_setregid,
    libc::SYS_setresuid,
    libc::SYS_setresgid,
    libc::SYS_setfsuid,
    libc::SYS_setfsgid,
    libc::SYS_setgroups,
    libc::SYS_capget,
    libc::SYS_capset,
    // Self-sandboxing: a tool may only narrow what it can do.
    libc::SYS_seccomp,
    libc::SYS_landlock_create_ruleset,
    libc::SYS_landlock_add_rule,
    libc::SYS_landlock_restrict_self,
    // Signals.
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigpending,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
    libc::SYS_rt_sigsuspend,
    libc::SYS_sigaltstack,
    libc::SYS_signalfd4,
    // Time: reading clocks and sleeping (setting them is refused).
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    libc::SYS_gettimeofday,
    libc::SYS_getitimer,
    libc::SYS_setitimer,
    libc::SYS_timer_create,
    libc::SYS_timer_settime,
    libc::SYS_timer_gettime,
    libc::SYS_timer_getoverrun,
    libc::SYS_timer_delete,
    libc::SYS_timerfd_create,
    libc::SYS_timerfd_settime,
    libc::SYS_timerfd_gettime,
    // Memory of the process itself (bounded by the run's memory limits).
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_msync,
    libc::SYS_mincore,
    libc::SYS_madvise,
    libc::SYS_mlock,
    libc::SYS_mlock2,
    libc::SYS_munlock,
    libc::SYS_mlockall,
    libc::SYS_munlockall,
    libc::SYS_membarrier,
    libc::SYS_memfd_create,
    libc::SYS_pkey_alloc,
    libc::SYS_pkey_free,
    libc::SYS_pkey_mprotect,
    libc::SYS_remap_file_pages,
    SYS_MSEAL,
    // Threads' synchronisation.
    libc::SYS_futex,
    libc::SYS_futex_waitv,
    SYS_FUTEX_WAKE,
    SYS_FUTEX_WAIT,
    SYS_FUTEX_REQUEUE,
    // Descriptors and I/O on what the process holds.
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_lseek,
    libc::SYS_close,
    libc::SYS_close_range,
    libc::SYS_dup,
    libc::SYS_dup3,
    libc::SYS_fcntl,
    libc::SYS_ioctl,
    libc::SYS_pipe2,
    libc::SYS_ppoll,
    libc::SYS_pselect6,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_eventfd2,
    libc::SYS_sendfile,
    libc::SYS_splice,
    libc::SYS_tee,
    libc::SYS_vmsplice,
    // Bounded by RLIMIT_FSIZE like `write` (`generic_write_check_limits`).
    libc::SYS_copy_file_range,
    libc::SYS_readahead,
    libc::SYS_fadvise64,
    libc::SYS_flock,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_sync,
    libc::SYS_syncfs,
    SYS_CACHESTAT,
    // Asynchronous I/O (not `io_uring`, which is refused).
    libc::SYS_io_setup,
    libc::SYS_io_destroy,
    libc::SYS_io_submit,
    libc::SYS_io_cancel,
    libc::SYS_io_getevents,
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    SYS_IO_PGETEVENTS,
    libc::SYS_inotify_init1,
    libc::SYS_inotify_add_watch,
    libc::SYS_inotify_rm_watch,
    // Files and directories, within what Landlock, the mounts and the uid allow.
    libc::SYS_newfstatat,
    libc::SYS_fstat,
    libc::SYS_statx,
    libc::SYS_statfs,
    libc::SYS_fstatfs,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_getdents64,
    libc::SYS_getcwd,
    libc::SYS_chdir,
    libc::SYS_fchdir,
    libc::SYS_renameat2,
    libc::SYS_mkdirat,
    libc::SYS_linkat,
    libc::SYS_unlinkat,
    libc::SYS_symlinkat,
    libc::SYS_readlinkat,
    libc::SYS_fchown,
    libc::SYS_fchownat,
    libc::SYS_truncate,
    libc::SYS_ftruncate,
    libc::SYS_utimensat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_getxattr,
    libc::SYS_lgetxattr,
    libc::SYS_fgetxattr,
    libc::SYS_listxattr,
    libc::SYS_llistxattr,
    libc::SYS_flistxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    // Sockets, once made (`socket` and `socketpair` have their rules).
    libc::SYS_connect,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_sendmmsg,
    libc::SYS_recvmmsg,
    libc::SYS_shutdown,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    // SysV and POSIX IPC (private to the run with `private_ipc`).
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
    // The x86_64 table's older forms of the calls above, which static
    // binaries and old libcs still make.
    #[cfg(target_arch = "x86_64")]
    libc::SYS_fork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_vfork,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_getpgrp,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_getrlimit,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_setrlimit,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_arch_prctl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_pause,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_alarm,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_time,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_signalfd,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_dup2,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_pipe,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_poll,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_select,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_epoll_create,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_epoll_wait,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_eventfd,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_inotify_init,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_sync_file_range,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_stat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lstat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_access,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_getdents,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_rename,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_renameat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_mkdir,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_rmdir,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_link,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_unlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_symlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_readlink,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_lchown,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
    #[cfg(target_arch = "x86_64")]
    SYS_URETPROBE,
    #[cfg(target_arch = "x86_64")]
    SYS_UPROBE,
    #[cfg(target_arch = "x86_64")]
    SYS_MAP_SHADOW_STACK,
    #[cfg(target_arch = "aarch64")]
    SYS_RENAMEAT,
    #[cfg(target_arch = "aarch64")]
    SYS_SYNC_FILE_RANGE,
    #[cfg(target_arch = "aarch64")]
    SYS_GETRLIMIT,
    #[cfg(target_arch = "aarch64")]
    SYS_SETRLIMIT,
];
