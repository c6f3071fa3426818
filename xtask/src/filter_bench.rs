//! `cargo xtask bench`, the system-call filter section: the allow-list's cost next to the
//! deny-list it replaced (issue 22, finding 7), measured in one run.
//!
//! The deny-list is no longer in the product, so the executor cannot run a call under it.
//! Both programs come from `toolsmith_executor::filters_for_bench`, built by the executor's
//! own BPF compiler for the default profile of a tool call (network allowed, a private PID
//! namespace); each is installed here, with `seccomp(2)` exactly as the clone child does it,
//! in a forked child that then does one of three pieces of work:
//! - nothing (`_exit`): what installing costs (the kernel runs the filter over every number
//!   to cache the ones it always allows);
//! - `execve` of `/bin/true`: a whole short program under the filter, as a tool call runs;
//! - a loop of `openat` and `close`: `openat` has an argument rule in both lists, so the
//!   filter runs on every call (a call allowed whatever its arguments is cached and costs
//!   nothing under either), the worst case of a system-call-heavy tool.
//!
//! Each piece of work also runs with no filter, the baseline of its ratio; the "allow/deny"
//! column is the allow-list's median over the deny-list's. Batches rotate through the
//! variants over interleaved rounds, each starting on a settled machine.

use std::ffi::CString;
use std::fmt::Write as _;
use std::time::Instant;

use anyhow::Context;

use crate::CheckFailed;
use crate::bench::BenchSettings;
use crate::measure::{Stats, micros, render_table, settle};

/// The program of the "exec" work.
const PROGRAM: &str = "/bin/true";

/// `openat` + `close` pairs of the "loop" work.
const LOOP_PAIRS: usize = 10_000;

/// `seccomp(2)`'s operation that installs a filter.
const SECCOMP_SET_MODE_FILTER: libc::c_ulong = 1;

/// Which filter a child installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filter {
    None,
    DenyList,
    AllowList,
}

impl Filter {
    const ALL: [Filter; 3] = [Filter::None, Filter::DenyList, Filter::AllowList];

    fn label(self) -> &'static str {
        match self {
            Filter::None => "no filter",
            Filter::DenyList => "deny-list (before issue 22)",
            Filter::AllowList => "allow-list (every filtered run)",
        }
    }
}

/// What a child does once its filter is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    Exit,
    Exec,
    Loop,
}

impl Work {
    const ALL: [Work; 3] = [Work::Exit, Work::Exec, Work::Loop];

    fn label(self) -> String {
        match self {
            Work::Exit => "fork, install, _exit".to_owned(),
            Work::Exec => format!("fork, install, exec {PROGRAM}"),
            Work::Loop => format!("fork, install, {LOOP_PAIRS} × openat+close"),
        }
    }
}

/// Everything a child needs, made before the fork: after it, in a process with other
/// threads, the child may only make system calls.
struct Prepared {
    deny_list: Vec<libc::sock_filter>,
    allow_list: Vec<libc::sock_filter>,
    program: CString,
    null: CString,
}

impl Prepared {
    fn new() -> anyhow::Result<Prepared> {
        let filters = toolsmith_executor::filters_for_bench(false, true);
        Ok(Prepared {
            deny_list: filters.deny_list,
            allow_list: filters.allow_list,
            program: CString::new(PROGRAM).context("the program's path")?,
            null: CString::new("/dev/null").context("the loop's path")?,
        })
    }

    fn fprog(&self, filter: Filter) -> Option<libc::sock_fprog> {
        let program = match filter {
            Filter::None => return None,
            Filter::DenyList => &self.deny_list,
            Filter::AllowList => &self.allow_list,
        };
        Some(libc::sock_fprog {
            len: u16::try_from(program.len()).expect("a filter is under 4096 instructions"),
            filter: program.as_ptr().cast_mut(),
        })
    }

    /// One child: fork, install `filter`, do `work`; the time from fork to reaped.
    fn run_one(&self, filter: Filter, work: Work) -> anyhow::Result<f64> {
        let fprog = self.fprog(filter);
        let argv = [self.program.as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        let started = Instant::now();
        // SAFETY: the child makes only system calls on memory prepared before the fork
        // (async-signal-safe), and ends in `execve` or `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("fork");
        }
        if pid == 0 {
            // SAFETY: see above; this is the child.
            unsafe {
                child(
                    fprog.as_ref(),
                    work,
                    argv.as_ptr(),
                    envp.as_ptr(),
                    &self.null,
                )
            }
        }
        let mut status = 0;
        // SAFETY: waits for the child this function forked.
        if unsafe { libc::waitpid(pid, &raw mut status, 0) } != pid {
            return Err(std::io::Error::last_os_error()).context("waitpid");
        }
        let elapsed = started.elapsed();
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(CheckFailed(format!(
                "the {} child under the {} ended with status {status:#x}",
                work.label(),
                filter.label()
            ))
            .into());
        }
        Ok(micros(elapsed))
    }
}

/// The forked child.
///
/// # Safety
/// Only in a child of `fork`: makes system calls on the given memory and never returns.
unsafe fn child(
    filter: Option<&libc::sock_fprog>,
    work: Work,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    null: &CString,
) -> ! {
    // SAFETY: plain system calls of this process on memory that outlives them.
    unsafe {
        // As in every sandboxed run, filter or not.
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1_u64, 0_u64, 0_u64, 0_u64) != 0 {
            libc::_exit(101);
        }
        if let Some(filter) = filter
            && libc::syscall(
                libc::SYS_seccomp,
                SECCOMP_SET_MODE_FILTER,
                0 as libc::c_ulong,
                std::ptr::from_ref(filter),
            ) != 0
        {
            libc::_exit(102);
        }
        match work {
            Work::Exit => libc::_exit(0),
            Work::Exec => {
                libc::execve(*argv, argv, envp);
                libc::_exit(103)
            }
            Work::Loop => {
                for _ in 0..LOOP_PAIRS {
                    let fd = libc::openat(libc::AT_FDCWD, null.as_ptr(), libc::O_RDONLY);
                    if fd < 0 {
                        libc::_exit(104);
                    }
                    libc::close(fd);
                }
                libc::_exit(0)
            }
        }
    }
}

/// One row of the section.
struct Row {
    work: Work,
    filter: Filter,
    stats: Stats,
}

/// The measured section, rendered by [`FilterReport::render`].
pub(crate) struct FilterReport {
    calls: usize,
    rounds: usize,
    deny_instructions: usize,
    allow_instructions: usize,
    rows: Vec<Row>,
}

/// Measures every work under every filter: warm-ups, then `calls` children per variant
/// (a tenth of that for the loop, which takes a thousand times longer) over interleaved
/// rounds.
pub(crate) fn measure(settings: &BenchSettings) -> anyhow::Result<FilterReport> {
    let prepared = Prepared::new()?;
    let calls = settings.calls_small_parent();
    let rounds = settings.rounds().max(1);
    let variants: Vec<(Work, Filter)> = Work::ALL
        .into_iter()
        .flat_map(|work| Filter::ALL.map(|filter| (work, filter)))
        .collect();
    let calls_of = |work: Work| match work {
        Work::Loop => (calls / 10).max(rounds),
        _ => calls,
    };
    eprintln!("bench: system-call filters, {} variants", variants.len());
    for &(work, filter) in &variants {
        for _ in 0..settings.warmups() {
            prepared.run_one(filter, work)?;
        }
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for round in 0..rounds {
        for offset in 0..variants.len() {
            let index = (round + offset) % variants.len();
            let (work, filter) = variants[index];
            let total = calls_of(work);
            let in_round = total / rounds + usize::from(round < total % rounds);
            settle();
            for _ in 0..in_round {
                samples[index].push(prepared.run_one(filter, work)?);
            }
        }
    }
    let rows = variants
        .iter()
        .zip(&samples)
        .map(|(&(work, filter), samples)| Row {
            work,
            filter,
            stats: Stats::of(samples),
        })
        .collect();
    Ok(FilterReport {
        calls,
        rounds,
        deny_instructions: prepared.deny_list.len(),
        allow_instructions: prepared.allow_list.len(),
        rows,
    })
}

impl FilterReport {
    fn median(&self, work: Work, filter: Filter) -> f64 {
        self.rows
            .iter()
            .find(|row| row.work == work && row.filter == filter)
            .map_or(f64::NAN, |row| row.stats.median)
    }

    /// The section as markdown: one row per work and filter.
    pub(crate) fn render(&self) -> String {
        let mut report = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(
            report,
            "system-call filter: the allow-list against the deny-list it replaced, µs"
        );
        let _ = writeln!(
            report,
            "filters: default profile (network allowed, private PIDs); deny-list {} instructions, allow-list {}",
            self.deny_instructions, self.allow_instructions
        );
        let _ = writeln!(
            report,
            "method: {} children per variant ({} for the loop) over {} interleaved rounds; ratio = median / median with no filter; allow/deny = allow-list median / deny-list median",
            self.calls,
            (self.calls / 10).max(self.rounds),
            self.rounds
        );
        let _ = writeln!(report);
        let header: Vec<String> = [
            "work",
            "filter",
            "median µs",
            "p90 µs",
            "p99 µs",
            "ratio",
            "allow/deny",
        ]
        .iter()
        .map(|cell| (*cell).to_owned())
        .collect();
        let table: Vec<[String; 7]> = self
            .rows
            .iter()
            .map(|row| {
                let baseline = self.median(row.work, Filter::None);
                let against_deny = match row.filter {
                    Filter::AllowList => format!(
                        "{:.3}",
                        row.stats.median / self.median(row.work, Filter::DenyList)
                    ),
                    _ => String::new(),
                };
                [
                    row.work.label(),
                    row.filter.label().to_owned(),
                    format!("{:.1}", row.stats.median),
                    format!("{:.1}", row.stats.p90),
                    format!("{:.1}", row.stats.p99),
                    format!("{:.3}", row.stats.median / baseline),
                    against_deny,
                ]
            })
            .collect();
        report.push_str(&render_table(&header, &table, 2));
        report
    }
}
