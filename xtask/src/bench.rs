//! `cargo xtask bench`: the per-call cost of a fully isolated run through the executor,
//! against plain `std::process::Command` of the same program measured in the same run.
//!
//! Method (as in section 4 of the isolation research): every variant gets warm-ups, then
//! the calls are spread over interleaved rounds that rotate the order of the variants, so
//! drift in machine load hits all of them alike, and each batch starts on a settled machine
//! ([`settle`]): a sandboxed batch leaves the kernel deferred work (namespaces and cgroups
//! torn down on workqueues and after RCU grace periods) that would otherwise slow the batch
//! after it, which in the fixed rotation is always the same one (it made the baseline look
//! 60% slower than it is). The whole measurement runs twice: with
//! this process small, then holding 1 GiB of resident memory, where a `fork` (as opposed
//! to `vfork`/`posix_spawn`) must copy page tables and slows down by an order of magnitude.
//! Only ratios against the baseline of the same run mean anything across machines.

use std::io::Write as _;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use toolsmith_executor::{BackendChoice, Executor, ExecutorConfig, Limits, Outcome, Sandbox};

use crate::CheckFailed;
use crate::measure::{Stats, micros, settle};
use crate::mechanisms::{MECHANISMS, make_scratch};

mod report;
use report::render_report;

/// The trivial program every variant runs.
const PROGRAM: &str = "/bin/true";

/// Resident memory the parent holds in the second pass.
const LARGE_PARENT_BYTES: usize = 1 << 30;

/// Bytes between two writes that make the large parent's memory resident.
const PAGE_BYTES: usize = 4096;

/// How many calls to make, resolved from the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BenchSettings {
    calls_small_parent: usize,
    calls_large_parent: usize,
    warmups: usize,
    rounds: usize,
    /// Cold and warm discoveries measured (the median is reported).
    discovery_repetitions: usize,
    /// Calls of each tool in the generated vs hand-written section.
    generated_calls: usize,
    /// Transfers of each variant in the egress section: each costs a sandboxed call and a
    /// millisecond of transfer, so there are enough for a steady median on a loaded machine.
    egress_transfers: usize,
    /// `--only discovery`: measure and report the discovery section alone.
    only_discovery: bool,
    /// `--only filter`: measure and report the system-call filter section alone.
    only_filter: bool,
    /// `--only generate`: measure and report the generator section alone.
    only_generate: bool,
    /// `--only egress`: measure and report the egress proxy section alone.
    only_egress: bool,
    /// `--only spawn`: measure and report the per-call section alone (both parents).
    only_spawn: bool,
    /// `--only creations`: measure and report the supervised creations section alone.
    only_creations: bool,
}

impl BenchSettings {
    /// `--quick` makes a smoke run of a few calls; `--calls N` sets the calls per variant
    /// with a small parent, and a quarter of that with the large one (a fork there costs
    /// tens of milliseconds).
    pub(crate) fn resolve(quick: bool, calls: Option<usize>) -> BenchSettings {
        let (default_calls, warmups) = if quick { (40, 5) } else { (2000, 20) };
        let calls_small_parent = calls.unwrap_or(default_calls);
        let calls_large_parent = (calls_small_parent / 4).max(1);
        BenchSettings {
            calls_small_parent,
            calls_large_parent,
            warmups,
            rounds: calls_large_parent.min(10),
            discovery_repetitions: if quick { 1 } else { 5 },
            generated_calls: if quick { 10 } else { 100 },
            egress_transfers: if quick { 30 } else { 100 },
            only_discovery: false,
            only_filter: false,
            only_generate: false,
            only_egress: false,
            only_spawn: false,
            only_creations: false,
        }
    }

    /// The same settings, measuring the supervised creations section alone (`--only creations`).
    pub(crate) fn only_creations(self) -> BenchSettings {
        BenchSettings {
            only_creations: true,
            ..self
        }
    }

    /// The same settings, measuring the per-call section alone (`--only spawn`).
    pub(crate) fn only_spawn(self) -> BenchSettings {
        BenchSettings {
            only_spawn: true,
            ..self
        }
    }

    /// The same settings, measuring the egress proxy section alone (`--only egress`).
    pub(crate) fn only_egress(self) -> BenchSettings {
        BenchSettings {
            only_egress: true,
            ..self
        }
    }

    /// Transfers of each variant in the egress section.
    fn egress_transfers(&self) -> usize {
        self.egress_transfers
    }

    /// The same settings, measuring the discovery section alone (`--only discovery`).
    pub(crate) fn only_discovery(self) -> BenchSettings {
        BenchSettings {
            only_discovery: true,
            ..self
        }
    }

    /// The same settings, measuring the system-call filter section alone (`--only filter`).
    pub(crate) fn only_filter(self) -> BenchSettings {
        BenchSettings {
            only_filter: true,
            ..self
        }
    }

    /// The same settings, measuring the generator section alone (`--only generate`).
    pub(crate) fn only_generate(self) -> BenchSettings {
        BenchSettings {
            only_generate: true,
            ..self
        }
    }

    /// Calls per variant with a small parent.
    pub(crate) fn calls_small_parent(&self) -> usize {
        self.calls_small_parent
    }

    /// Uncounted calls per variant before the measured rounds.
    pub(crate) fn warmups(&self) -> usize {
        self.warmups
    }

    /// Interleaved rounds the calls are spread over.
    pub(crate) fn rounds(&self) -> usize {
        self.rounds
    }
}

/// One way of running [`PROGRAM`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// `std::process::Command` with null stdin, `.output()`: glibc `posix_spawn`, a vfork.
    StdCommand,
    /// The same with a no-op `pre_exec` closure, which forces a real `fork`.
    StdPreExec,
    /// `Executor::run` awaited on a multi-thread tokio runtime, as the CLI runs it.
    ExecutorMultiThread,
    /// `Executor::run` awaited on a current-thread tokio runtime.
    ExecutorCurrentThread,
    /// `Executor::run` (multi-thread) with the first `n` entries of [`MECHANISMS`].
    Sandboxed(usize),
    /// The same on an executor that keeps a sandbox prepared ahead
    /// (`Executor::keep_prepared`), as `toolsmith serve` runs calls.
    Prepared(usize),
    /// [`Variant::StdCommand`] with [`APART`] of idle before each call.
    StdApart,
    /// [`Variant::Prepared`] with [`APART`] of idle before each call, once the
    /// prepared sandbox is ready: calls as an agent makes them, with time to
    /// think between them.
    PreparedApart(usize),
}

/// The idle time before each call of the "apart" variants.
const APART: Duration = Duration::from_millis(10);

/// How many of [`MECHANISMS`] make the default profile of a tool call.
const DEFAULT_PROFILE: usize = 8;

impl Variant {
    /// Every variant, in the order of the report.
    fn all() -> Vec<Variant> {
        let mut variants = vec![
            Variant::StdCommand,
            Variant::StdPreExec,
            Variant::ExecutorMultiThread,
            Variant::ExecutorCurrentThread,
        ];
        variants.extend((1..=MECHANISMS.len()).map(Variant::Sandboxed));
        variants.push(Variant::Prepared(DEFAULT_PROFILE));
        variants.push(Variant::Prepared(MECHANISMS.len()));
        variants.push(Variant::StdApart);
        variants.push(Variant::PreparedApart(DEFAULT_PROFILE));
        variants.push(Variant::PreparedApart(MECHANISMS.len()));
        variants
    }

    /// The variant this one's ratio is taken against: std Command, made the
    /// same way (back to back, or apart).
    fn baseline(self) -> Variant {
        match self {
            Variant::StdApart | Variant::PreparedApart(_) => Variant::StdApart,
            _ => Variant::StdCommand,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Variant::StdCommand => "std Command (baseline)",
            Variant::StdPreExec => "std Command + pre_exec no-op (fork)",
            Variant::ExecutorMultiThread => "executor.run, multi-thread runtime, no sandbox",
            Variant::ExecutorCurrentThread => "executor.run, current-thread runtime",
            Variant::Sandboxed(n_mechanisms) => MECHANISMS[n_mechanisms - 1].label,
            Variant::Prepared(DEFAULT_PROFILE) => {
                "default profile, prepared ahead (as `serve` runs)"
            }
            Variant::Prepared(_) => "strictest profile, prepared ahead (as `serve` runs)",
            Variant::StdApart => "std Command, calls 10 ms apart (baseline)",
            Variant::PreparedApart(DEFAULT_PROFILE) => {
                "default profile, prepared, calls 10 ms apart"
            }
            Variant::PreparedApart(_) => "strictest profile, prepared, calls 10 ms apart",
        }
    }

    /// The variant this one adds one mechanism to, whose median its share is taken against.
    fn previous_layer(self) -> Option<Variant> {
        match self {
            Variant::Sandboxed(1) => Some(Variant::ExecutorMultiThread),
            Variant::Sandboxed(n_mechanisms) => Some(Variant::Sandboxed(n_mechanisms - 1)),
            _ => None,
        }
    }
}

/// The executor and the runtimes its variants run on, set up once.
struct Harness {
    /// One executor for both runtimes and the discovery bench, as its documentation asks: one
    /// per process, shared.
    executor: std::sync::Arc<Executor>,
    /// A second one that keeps a sandbox prepared ahead, for [`Variant::Prepared`].
    prepared: Executor,
    multi_thread: tokio::runtime::Runtime,
    current_thread: tokio::runtime::Runtime,
    command: toolsmith_executor::Command,
    /// `sandboxed[n]` has the first `n + 1` mechanisms.
    sandboxed: Vec<toolsmith_executor::Command>,
    limits: Limits,
    /// The project and masked homes of [`MECHANISMS`], removed with the harness.
    scratch: std::path::PathBuf,
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

impl Harness {
    fn new() -> anyhow::Result<Harness> {
        let multi_thread = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("could not start a multi-thread tokio runtime")?;
        let current_thread = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("could not start a current-thread tokio runtime")?;
        // Created inside the runtime the CLI would use, in case it starts work there.
        let executor = {
            let _entered = multi_thread.enter();
            std::sync::Arc::new(
                Executor::new(ExecutorConfig {
                    backend: BackendChoice::Auto,
                    max_concurrent: None,
                })
                .context("could not create the executor")?,
            )
        };
        let prepared = {
            let _entered = multi_thread.enter();
            Executor::new(ExecutorConfig {
                backend: BackendChoice::Auto,
                max_concurrent: None,
            })
            .context("could not create the executor")?
        };
        prepared.keep_prepared(true);
        let command = toolsmith_executor::Command::new(Path::new(PROGRAM), Path::new("/"))
            .context("could not describe the benchmarked command")?;
        let scratch = make_scratch().context("could not make the bench's scratch directory")?;
        let mut sandbox = Sandbox::none();
        let sandboxed = MECHANISMS
            .iter()
            .map(|mechanism| {
                (mechanism.add)(&mut sandbox, &scratch);
                let mut layered = command.clone();
                layered.sandbox(sandbox.clone());
                layered
            })
            .collect();
        Ok(Harness {
            executor,
            prepared,
            multi_thread,
            current_thread,
            command,
            sandboxed,
            limits: Limits::recommended(),
            scratch,
        })
    }

    fn executor_handle(&self) -> std::sync::Arc<Executor> {
        std::sync::Arc::clone(&self.executor)
    }

    /// Makes `n_calls` calls of `variant`, appending each one's duration in µs to `samples`.
    fn run_batch(
        &self,
        variant: Variant,
        n_calls: usize,
        samples: &mut Vec<f64>,
    ) -> anyhow::Result<()> {
        match variant {
            Variant::StdCommand => std_batch(false, None, n_calls, samples),
            Variant::StdPreExec => std_batch(true, None, n_calls, samples),
            Variant::StdApart => std_batch(false, Some(APART), n_calls, samples),
            Variant::ExecutorMultiThread => self.executor_batch(
                &self.executor,
                &self.multi_thread,
                &self.command,
                n_calls,
                samples,
            ),
            Variant::ExecutorCurrentThread => self.executor_batch(
                &self.executor,
                &self.current_thread,
                &self.command,
                n_calls,
                samples,
            ),
            Variant::Sandboxed(n_mechanisms) => self.executor_batch(
                &self.executor,
                &self.multi_thread,
                &self.sandboxed[n_mechanisms - 1],
                n_calls,
                samples,
            ),
            Variant::Prepared(n_mechanisms) => self.executor_batch(
                &self.prepared,
                &self.multi_thread,
                &self.sandboxed[n_mechanisms - 1],
                n_calls,
                samples,
            ),
            Variant::PreparedApart(n_mechanisms) => self.runtime_batch(
                &self.prepared,
                &self.multi_thread,
                &self.sandboxed[n_mechanisms - 1],
                Some(APART),
                n_calls,
                samples,
            ),
        }
    }

    /// Times each `run` inside one `block_on`, so runtime entry is not part of a call.
    fn executor_batch(
        &self,
        executor: &Executor,
        runtime: &tokio::runtime::Runtime,
        command: &toolsmith_executor::Command,
        n_calls: usize,
        samples: &mut Vec<f64>,
    ) -> anyhow::Result<()> {
        self.runtime_batch(executor, runtime, command, None, n_calls, samples)
    }

    /// [`Harness::executor_batch`], with `apart` of idle before each call, once the
    /// executor's prepared sandbox (if it keeps one) is ready (at most 50 ms).
    fn runtime_batch(
        &self,
        executor: &Executor,
        runtime: &tokio::runtime::Runtime,
        command: &toolsmith_executor::Command,
        apart: Option<Duration>,
        n_calls: usize,
        samples: &mut Vec<f64>,
    ) -> anyhow::Result<()> {
        runtime.block_on(async {
            for _ in 0..n_calls {
                if let Some(idle) = apart {
                    let ready_by = Instant::now() + Duration::from_millis(50);
                    while executor.keeps_prepared()
                        && executor.prepared() == 0
                        && Instant::now() < ready_by
                    {
                        tokio::time::sleep(Duration::from_micros(200)).await;
                    }
                    tokio::time::sleep(idle).await;
                }
                let started = Instant::now();
                let result = executor.run(command, &self.limits).await;
                let elapsed = started.elapsed();
                let outcome =
                    result.with_context(|| format!("executor.run of `{PROGRAM}` failed"))?;
                ensure_success(&outcome)?;
                samples.push(micros(elapsed));
            }
            Ok(())
        })
    }
}

fn ensure_success(outcome: &Outcome) -> anyhow::Result<()> {
    if outcome.success() {
        return Ok(());
    }
    Err(CheckFailed(format!(
        "executor run of `{PROGRAM}` did not succeed: termination {:?}, limit {:?}, backend {}, stderr {:?}",
        outcome.termination,
        outcome.limit,
        outcome.backend,
        outcome.stderr.text_lossy(),
    ))
    .into())
}

fn std_batch(
    force_fork: bool,
    apart: Option<Duration>,
    n_calls: usize,
    samples: &mut Vec<f64>,
) -> anyhow::Result<()> {
    for _ in 0..n_calls {
        if let Some(idle) = apart {
            std::thread::sleep(idle);
        }
        let started = Instant::now();
        #[expect(
            clippy::disallowed_methods,
            reason = "plain std::process::Command is the baseline being measured"
        )]
        let mut command = std::process::Command::new(PROGRAM);
        command.stdin(Stdio::null());
        if force_fork {
            // SAFETY: the closure does nothing, so it is async-signal-safe and touches no
            // state shared with the parent.
            unsafe {
                command.pre_exec(|| Ok(()));
            }
        }
        let output = command
            .output()
            .with_context(|| format!("could not run `{PROGRAM}` with std::process::Command"))?;
        let elapsed = started.elapsed();
        if !output.status.success() {
            return Err(CheckFailed(format!(
                "std::process::Command run of `{PROGRAM}` did not succeed: {}",
                output.status
            ))
            .into());
        }
        samples.push(micros(elapsed));
    }
    Ok(())
}

/// One row of the report.
struct Row {
    variant: Variant,
    parent: &'static str,
    parent_rss_mib: u64,
    calls: usize,
    stats: Stats,
}

/// Warm-ups, then `n_calls` calls per variant over interleaved rounds.
fn measure_pass(
    harness: &Harness,
    settings: &BenchSettings,
    parent: &'static str,
    n_calls: usize,
) -> anyhow::Result<Vec<Row>> {
    let parent_rss_mib = resident_memory_kib()? / 1024;
    eprintln!(
        "bench: parent {parent} (RSS {parent_rss_mib} MiB): {n_calls} calls per variant in {} rounds",
        settings.rounds
    );
    let variants = Variant::all();
    let mut discarded = Vec::new();
    for &variant in &variants {
        harness.run_batch(variant, settings.warmups, &mut discarded)?;
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(n_calls); variants.len()];
    for round in 0..settings.rounds {
        // Spread the remainder over the first rounds so the total is exactly `n_calls`.
        let calls_this_round =
            n_calls / settings.rounds + usize::from(round < n_calls % settings.rounds);
        for offset in 0..variants.len() {
            let variant_idx = (round + offset) % variants.len();
            settle();
            harness.run_batch(
                variants[variant_idx],
                calls_this_round,
                &mut samples[variant_idx],
            )?;
        }
    }
    Ok(variants
        .into_iter()
        .zip(samples)
        .map(|(variant, variant_samples)| Row {
            variant,
            parent,
            parent_rss_mib,
            calls: variant_samples.len(),
            stats: Stats::of(&variant_samples),
        })
        .collect())
}

/// 1 GiB that is really resident: allocated fallibly, then written once per page.
fn allocate_large_parent_memory() -> anyhow::Result<Vec<u8>> {
    let mut ballast: Vec<u8> = Vec::new();
    ballast
        .try_reserve_exact(LARGE_PARENT_BYTES)
        .context("could not allocate 1 GiB for the large-parent pass")?;
    ballast.resize(LARGE_PARENT_BYTES, 0);
    for byte in ballast.iter_mut().step_by(PAGE_BYTES) {
        *byte = 1;
    }
    Ok(std::hint::black_box(ballast))
}

/// `VmRSS` of this process, in KiB.
fn resident_memory_kib() -> anyhow::Result<u64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("could not read /proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .context("/proc/self/status has no readable VmRSS line")
}

/// What the numbers depend on, printed above the table.
struct MachineFacts {
    n_cpus: usize,
    kernel: String,
    cpu_model: String,
}

fn machine_facts() -> MachineFacts {
    let n_cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|cpuinfo| {
            cpuinfo
                .lines()
                .find_map(|line| line.strip_prefix("model name"))
                .and_then(|rest| rest.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    MachineFacts {
        n_cpus,
        kernel: crate::measure::kernel_release(),
        cpu_model,
    }
}

/// Measures both passes and prints the report on stdout; progress goes to stderr.
///
/// Timings of an unoptimized executor say little about the shipped one, so a debug build
/// of xtask hands over to a release build of itself with the same arguments.
pub(crate) fn run(settings: &BenchSettings, root: &Path) -> anyhow::Result<()> {
    if cfg!(debug_assertions) {
        return run_release_build(root);
    }
    if settings.only_discovery {
        return run_discovery_only(settings);
    }
    if settings.only_filter {
        return print_report(&crate::filter_bench::measure(settings)?.render());
    }
    if settings.only_generate {
        let harness = Harness::new()?;
        let generator = crate::generate_bench::measure(
            &harness.multi_thread,
            &harness.executor_handle(),
            settings.discovery_repetitions,
        )?;
        return print_report(&generator.render());
    }
    if settings.only_egress {
        return print_report(&crate::egress_bench::measure(settings.egress_transfers())?.render());
    }
    if settings.only_spawn {
        return run_spawn_only(settings);
    }
    if settings.only_creations {
        return print_report(
            &crate::creations_bench::measure(settings.egress_transfers())?.render(),
        );
    }
    let server_binary = crate::mcp_bench::build_server(root)?;
    let harness = Harness::new()?;
    let facts = machine_facts();
    let started = Instant::now();
    let mut rows = measure_pass(&harness, settings, "small", settings.calls_small_parent)?;
    // Before the 1 GiB ballast: discovery runs in a normal-sized process.
    let discovery = crate::discovery_bench::measure(
        &harness.multi_thread,
        &harness.executor_handle(),
        settings.discovery_repetitions,
        facts.n_cpus,
    )?;
    // Also before the ballast, which would slow down the direct runs and not the server.
    let mcp = crate::mcp_bench::measure(
        &harness.multi_thread,
        &harness.executor_handle(),
        &server_binary,
        settings,
    )?;
    let generator = crate::generate_bench::measure(
        &harness.multi_thread,
        &harness.executor_handle(),
        settings.discovery_repetitions,
    )?;
    let generated = crate::generated_bench::measure(
        &harness.multi_thread,
        &harness.executor_handle(),
        settings.generated_calls,
    )?;
    let filter = crate::filter_bench::measure(settings)?;
    let egress = crate::egress_bench::measure(settings.egress_transfers())?;
    let creations = crate::creations_bench::measure(settings.egress_transfers())?;
    let ballast = allocate_large_parent_memory()?;
    rows.extend(measure_pass(
        &harness,
        settings,
        "1 GiB",
        settings.calls_large_parent,
    )?);
    drop(std::hint::black_box(ballast));
    eprintln!("bench: done in {:.1}s", started.elapsed().as_secs_f64());
    let mut report = render_report(&harness, settings, &facts, &rows);
    report.push('\n');
    report.push_str(&discovery.render());
    report.push('\n');
    report.push_str(&mcp.render());
    report.push('\n');
    report.push_str(&generator.render());
    report.push('\n');
    report.push_str(&generated.render());
    report.push('\n');
    report.push_str(&filter.render());
    report.push('\n');
    report.push_str(&egress.render());
    report.push('\n');
    report.push_str(&creations.render());
    print_report(&report)
}

/// Writes the report to stdout.
fn print_report(report: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(report.as_bytes())
        .context("could not write the report")?;
    stdout.flush().context("could not write the report")
}

/// `--only spawn`: the per-call section alone (both parents), for work on a profile's cost.
fn run_spawn_only(settings: &BenchSettings) -> anyhow::Result<()> {
    let harness = Harness::new()?;
    let facts = machine_facts();
    let mut rows = measure_pass(&harness, settings, "small", settings.calls_small_parent)?;
    let ballast = allocate_large_parent_memory()?;
    rows.extend(measure_pass(
        &harness,
        settings,
        "1 GiB",
        settings.calls_large_parent,
    )?);
    drop(std::hint::black_box(ballast));
    print_report(&render_report(&harness, settings, &facts, &rows))
}

/// `--only discovery`: the discovery section alone, for work on discovery's speed.
fn run_discovery_only(settings: &BenchSettings) -> anyhow::Result<()> {
    let harness = Harness::new()?;
    let facts = machine_facts();
    let discovery = crate::discovery_bench::measure(
        &harness.multi_thread,
        &harness.executor_handle(),
        settings.discovery_repetitions,
        facts.n_cpus,
    )?;
    print_report(&discovery.render())
}

fn run_release_build(root: &Path) -> anyhow::Result<()> {
    let cargo = crate::cargo::program();
    eprintln!("bench: building and running xtask in release mode");
    let status = crate::cargo::command()
        .args(["run", "--release", "--quiet", "--package", "xtask", "--"])
        .args(std::env::args_os().skip(1))
        .current_dir(root)
        .status()
        .with_context(|| format!("could not start `{}`", cargo.to_string_lossy()))?;
    if status.success() {
        Ok(())
    } else {
        Err(CheckFailed(format!(
            "the release build of the bench exited with {status}"
        ))
        .into())
    }
}

#[cfg(test)]
mod tests {
    use crate::bench::BenchSettings;

    #[test]
    fn settings() {
        let default = BenchSettings::resolve(false, None);
        assert_eq!(
            (default.calls_small_parent, default.calls_large_parent),
            (2000, 500)
        );
        assert_eq!((default.warmups, default.rounds), (20, 10));
        let quick = BenchSettings::resolve(true, None);
        assert_eq!(
            (quick.calls_small_parent, quick.calls_large_parent),
            (40, 10)
        );
        let tiny = BenchSettings::resolve(false, Some(6));
        assert_eq!(
            (
                tiny.calls_small_parent,
                tiny.calls_large_parent,
                tiny.rounds
            ),
            (6, 1, 1)
        );
    }
}
