//! Probing candidates: running each format's probe under the probe sandbox and limits, at
//! most as many at once as the machine has cores, and keeping what they printed.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use toolsmith_executor::{Command, Executor, LimitKind, Limits, Termination};

use crate::discovery::cache::{ConfigAnswer, DiscoveryCache, Fingerprint, ProbeRecord, Probed};
use crate::discovery::catalog::{ProbeBlocked, ProblemError};
use crate::discovery::discover::{
    Candidate, DiscoveryProgress, PROBE_MAX_GRACE, PROBE_MAX_OUTPUT, PROBE_RETRY_TIMEOUT,
    PROBE_RUNNER_TIMEOUT, PROBE_TIMEOUT,
};
use crate::discovery::load::load_kodelet;
use crate::formats::format::{Format, Protocol};
use crate::formats::package_runner::{HEAD_BYTES, package_runner};
use crate::formats::{ikigai, kodelet};
use crate::message::{error_chain, first_line};
use crate::name::ToolName;
use crate::overrides::RunConfig;
use crate::regular_file::{Links, MAX_TOOL_FILE_BYTES, read_regular, read_start};
use crate::sandbox::{probe_sandbox, probe_sandbox_key};
use crate::tool::Tool;
use crate::tool_cache::{Index, ToolCache};

/// Probes every candidate; the results, each with the moment its probe started, are in the
/// candidates' order. `progress` hears of the total at once and of each finished probe.
pub(crate) async fn probe_all(
    executor: &Arc<Executor>,
    candidates: &[&Candidate],
    config: &RunConfig,
    progress: &(dyn Fn(DiscoveryProgress) + Sync),
) -> Vec<(Result<Probed, ProblemError>, SystemTime)> {
    let total = candidates.len();
    progress(DiscoveryProgress { probed: 0, total });
    let permits = Arc::new(tokio::sync::Semaphore::new(probes_in_flight()));
    let sessions = Arc::new(Sessions::default());
    let limits = probe_limits(&config.limits);
    let mut tasks = tokio::task::JoinSet::new();
    let mut index_of_task = HashMap::new();
    for (index, candidate) in candidates.iter().enumerate() {
        let executor = Arc::clone(executor);
        let sessions = Arc::clone(&sessions);
        let permits = Arc::clone(&permits);
        let limits = limits.clone();
        let cwd = config.cwd.clone();
        let env = config.env.clone();
        let sandbox = probe_sandbox(config.read_masks.for_probes());
        let caches = config.tool_caches.clone();
        let path = candidate.path.clone();
        let name = candidate.expected.clone();
        let format = candidate.format;
        let handle = tasks.spawn(async move {
            // The semaphore is never closed, so acquiring only waits.
            let _permit = permits.acquire_owned().await;
            let directory = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let session = sessions.take(&directory, &executor);
            let probe = Probe {
                session: &session,
                cwd: &cwd,
                env: &env,
                limits: &limits,
                sandbox: &sandbox,
                caches: caches.as_deref(),
            };
            // Taken before the probe reads the file, so a write after the read has a later
            // modification time than this (see `RACY_MARGIN`).
            let probed_at = SystemTime::now();
            let probed = probe.run(format, &path, &name).await;
            sessions.put(directory, session);
            (probed, probed_at)
        });
        index_of_task.insert(handle.id(), index);
    }

    let mut results: Vec<Option<(Result<Probed, ProblemError>, SystemTime)>> =
        candidates.iter().map(|_| None).collect();
    let mut probed = 0;
    while let Some(joined) = tasks.join_next_with_id().await {
        match joined {
            Ok((task_id, result)) => {
                if let Some(&index) = index_of_task.get(&task_id) {
                    results[index] = Some(result);
                }
                probed += 1;
                progress(DiscoveryProgress { probed, total });
            }
            Err(join_error) if join_error.is_panic() => {
                std::panic::resume_unwind(join_error.into_panic());
            }
            Err(_cancelled) => {}
        }
    }
    // Panics are resumed above and no task is aborted here, but a runtime that shuts
    // down cancels the tasks it owns while this future may still be polled.
    results
        .into_iter()
        .map(|result| result.unwrap_or_else(|| (Err(ProblemError::Cancelled), SystemTime::now())))
        .collect()
}

/// The executor sessions of one discovery's probes, by tool directory: the probes of one
/// directory (one author, one trust decision) take turns in a few inits (one per probe in
/// flight), so that their namespaces, mounts and filter are set up a few times rather than
/// once per probe. Probes of different directories never share one. Each probe still runs in
/// a cgroup of its own, killed at its end; what a probe leaves in its TMPDIR, a later probe
/// of the same directory may see (`docs/discovery.md`).
#[derive(Default)]
struct Sessions {
    idle: std::sync::Mutex<Vec<(PathBuf, toolsmith_executor::Session)>>,
}

impl Sessions {
    /// An idle session of `directory`, or a new one.
    fn take(&self, directory: &Path, executor: &Arc<Executor>) -> toolsmith_executor::Session {
        let mut idle = self
            .idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match idle.iter().position(|(dir, _)| dir == directory) {
            Some(index) => idle.swap_remove(index).1,
            None => executor.session(),
        }
    }

    fn put(&self, directory: PathBuf, session: toolsmith_executor::Session) {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((directory, session));
    }
}

/// How many probes run at once: two per core. A probe spends much of its time waiting (for the
/// spawner thread, its init, the program's exit), so one per core leaves cores idle; `cargo
/// xtask bench` (discovery) measured 500 cold probes at 0.85 s with one per core and 0.65 s
/// with two on 2 cores, and no further gain with more.
pub(crate) fn probes_in_flight() -> usize {
    2 * std::thread::available_parallelism().map_or(1, usize::from)
}

/// The limits of a probe: the caller's, with the probe's timeout and output cap.
pub(crate) fn probe_limits(base: &Limits) -> Limits {
    Limits {
        timeout: PROBE_TIMEOUT,
        grace: base.grace.min(PROBE_MAX_GRACE),
        max_output: PROBE_MAX_OUTPUT,
        ..base.clone()
    }
}

/// What a probe needs to run a candidate.
pub(crate) struct Probe<'a> {
    /// Probes run in sessions, never as calls: a session's runs prepare no sandbox ahead
    /// (`Executor::keep_prepared`), so the probes' sandbox never waits in the place of a
    /// call's. A lone probe has a session of its own.
    session: &'a toolsmith_executor::Session,
    cwd: &'a Path,
    env: &'a [(OsString, OsString)],
    limits: &'a Limits,
    /// [`probe_sandbox`]: the strictest the kernel allows, whatever the operator grants calls,
    /// since a probe runs the tool's program only to ask for its description.
    sandbox: &'a toolsmith_executor::Sandbox,
    /// Where the tools' own caches live ([`RunConfig::tool_caches`]): each probe may write
    /// its tool's, and nothing else but its TMPDIR.
    caches: Option<&'a Path>,
}

impl Probe<'_> {
    /// Runs the probes of `format` on the file at `path`. Only a failure to run a probe at all
    /// is an error; whatever the program did is a record, which [`load`] interprets.
    async fn run(
        &self,
        format: Format,
        path: &Path,
        name: &ToolName,
    ) -> Result<Probed, ProblemError> {
        match format {
            // A manifest is read, not run: its record is its contents, which the live registry
            // keeps like any other while a changed manifest settles.
            Format::Manifest => read_regular(path, Links::Follow, MAX_TOOL_FILE_BYTES)
                .map(|contents| Probed::only(Protocol::ManifestRead, ProbeRecord::Output(contents)))
                .map_err(|source| ProblemError::ReadManifest { source }),
            Format::Ikigai => Ok(Probed::only(
                Protocol::IkigaiSchema,
                self.schema(path, name).await?,
            )),
            Format::Kodelet => self.kodelet(path, name).await,
        }
    }

    /// `description`; when it fails the way an ikigai tool would, `--schema` as well. The
    /// optional `config` is not asked here but at the tool's first call ([`ask_configs`]).
    async fn kodelet(&self, path: &Path, name: &ToolName) -> Result<Probed, ProblemError> {
        let command = kodelet::description_command(path, self.cwd, self.env).map_err(|source| {
            ProblemError::Spawn {
                probe: kodelet::DESCRIPTION_ARG,
                source,
            }
        })?;
        let description = self
            .record(kodelet::DESCRIPTION_ARG, command, path, name)
            .await?;
        let described = probe_stdout(kodelet::DESCRIPTION_ARG, &description).and_then(|stdout| {
            kodelet::parse_description(stdout)
                .map(drop)
                .map_err(|source| ProblemError::Description { source })
        });
        match described {
            Ok(()) => Ok(Probed::only(Protocol::KodeletDescription, description)),
            Err(error) if !worth_trying_schema(&error) => {
                Ok(Probed::only(Protocol::KodeletDescription, description))
            }
            Err(_) => {
                let schema = self.schema(path, name).await?;
                let answered = probe_stdout(ikigai::SCHEMA_ARG, &schema)
                    .is_ok_and(|stdout| ikigai::parse_schema(stdout).is_ok());
                if answered {
                    Ok(Probed::only(Protocol::IkigaiSchema, schema))
                } else {
                    Ok(Probed {
                        fallback: Some(Box::new(schema)),
                        ..Probed::only(Protocol::KodeletDescription, description)
                    })
                }
            }
        }
    }

    /// The `--schema` probe.
    async fn schema(&self, path: &Path, name: &ToolName) -> Result<ProbeRecord, ProblemError> {
        let command = ikigai::schema_command(path, self.cwd, self.env).map_err(|source| {
            ProblemError::Spawn {
                probe: ikigai::SCHEMA_ARG,
                source,
            }
        })?;
        self.record(ikigai::SCHEMA_ARG, command, path, name).await
    }

    /// What the optional `config` subcommand answered: what it printed, or that the tool does
    /// not implement it (a non-zero exit, a timeout, ...), which is not a problem.
    async fn config(&self, path: &Path, name: &ToolName) -> ConfigAnswer {
        let command = match kodelet::config_command(path, self.cwd, self.env) {
            Ok(command) => command,
            Err(error) => {
                tracing::debug!(path = %path.display(), %error, "no `config` probe");
                return ConfigAnswer::NotImplemented;
            }
        };
        match self.record(kodelet::CONFIG_ARG, command, path, name).await {
            Ok(ProbeRecord::Output(stdout)) => ConfigAnswer::Printed(stdout),
            Ok(record) => {
                tracing::debug!(path = %path.display(), ?record, "`config` not implemented");
                ConfigAnswer::NotImplemented
            }
            Err(error) => {
                tracing::debug!(path = %path.display(), error = %error_chain(&error), "`config` not implemented");
                ConfigAnswer::NotImplemented
            }
        }
    }

    /// Runs `command` (the probe called `probe`, e.g. `description`, of the tool `name` in the
    /// file at `path`) and records how it ended.
    ///
    /// The tool's own cache is named in the probe's environment, and granted writable this
    /// way: a script a package runner starts (uv, npx) gets it at once, with
    /// [`PROBE_RUNNER_TIMEOUT`]; any other probe first runs in its directory's session
    /// without it (the cache directory exists but is read-only there, so a write is refused
    /// with `EROFS` or `EACCES`), and a probe whose stderr then shows a refused write runs
    /// again with it. So a tool that needs its cache to describe itself gets it, and the
    /// probes of the others keep sharing one init per directory (a grant is part of the
    /// sandbox, and an init serves one sandbox).
    async fn record(
        &self,
        probe: &'static str,
        mut command: Command,
        path: &Path,
        name: &ToolName,
    ) -> Result<ProbeRecord, ProblemError> {
        let mut limits = self.limits.clone();
        let runner = is_package_runner(path);
        if runner {
            limits.timeout = limits.timeout.max(PROBE_RUNNER_TIMEOUT);
        }
        let Some(caches) = self.caches else {
            return self.run_once(probe, command, None, &limits, name).await;
        };
        let cache = ToolCache::of_file(caches, path);
        for (variable, value) in cache.env(Index::Offline) {
            command.env(&variable, &value);
        }
        if !runner {
            // Made (empty) on the host, so that a write into it is refused by the read-only
            // sandbox rather than missing; a directory that cannot be made is simply absent.
            if let Err(error) = std::fs::create_dir_all(cache.dir()) {
                tracing::debug!(dir = %cache.dir().display(), %error, "cannot make a tool's cache");
            }
            let record = self
                .run_once(probe, command.clone(), None, &limits, name)
                .await?;
            let refused_write = match &record {
                ProbeRecord::Exited {
                    blocked: Some(ProbeBlocked::Write),
                    ..
                } => true,
                // The caches' directory is hidden from a probe without a cache of its own (a
                // read mask, docs/security.md): a write into its cache then finds no
                // directory rather than a read-only one, and the error names the cache.
                ProbeRecord::Exited {
                    first_stderr_line: Some(line),
                    ..
                } => line.contains(&*cache.dir().to_string_lossy()),
                _ => false,
            };
            if !refused_write {
                return Ok(record);
            }
        }
        self.run_once(probe, command, Some(cache.dir()), &limits, name)
            .await
    }

    /// One run of a probe, with `own_dir` (the tool's cache) writable when given; a probe
    /// that times out under the short budget runs once more under [`PROBE_RETRY_TIMEOUT`].
    ///
    /// A loaded machine can keep a healthy probe from the processor for a second, and a
    /// timed-out probe stays a problem for the live registry's life (a failure is not
    /// persisted, nor retried until its file changes): without the second run, a busy
    /// server would drop a good tool from its catalog for good. A tool that truly hangs
    /// costs both budgets once per process.
    async fn run_once(
        &self,
        probe: &'static str,
        command: Command,
        own_dir: Option<&Path>,
        limits: &Limits,
        name: &ToolName,
    ) -> Result<ProbeRecord, ProblemError> {
        let record = self
            .run_one(probe, command.clone(), own_dir, limits, name)
            .await?;
        if !matches!(record, ProbeRecord::Timeout(_)) || limits.timeout >= PROBE_RETRY_TIMEOUT {
            return Ok(record);
        }
        tracing::debug!(%name, probe, "a probe timed out: trying once more with a longer budget");
        let patient = Limits {
            timeout: PROBE_RETRY_TIMEOUT,
            ..limits.clone()
        };
        self.run_one(probe, command, own_dir, &patient, name).await
    }

    /// One run of a probe, with `own_dir` (the tool's cache) writable when given.
    async fn run_one(
        &self,
        probe: &'static str,
        mut command: Command,
        own_dir: Option<&Path>,
        limits: &Limits,
        name: &ToolName,
    ) -> Result<ProbeRecord, ProblemError> {
        let mut sandbox = self.sandbox.clone();
        sandbox.own_dir = own_dir.map(Path::to_path_buf);
        command.sandbox(sandbox);
        let outcome = self
            .session
            .run(&command, limits)
            .await
            .map_err(|source| ProblemError::Spawn { probe, source })?;
        match outcome.limit {
            Some(LimitKind::Timeout) => return Ok(ProbeRecord::Timeout(limits.timeout)),
            Some(limit) => return Ok(ProbeRecord::Limit(limit)),
            None => {}
        }
        match outcome.termination {
            Termination::Exited(0) => {}
            Termination::Exited(code) => {
                let stderr = outcome.stderr.text_lossy();
                return Ok(ProbeRecord::Exited {
                    code,
                    first_stderr_line: first_line(&stderr),
                    blocked: blocked_by_sandbox(&stderr, name),
                });
            }
            Termination::Signaled(signal) => return Ok(ProbeRecord::Signaled(signal)),
        }
        if outcome.stdout.truncated {
            return Ok(ProbeRecord::OutputTooLarge(outcome.stdout.total));
        }
        Ok(ProbeRecord::Output(outcome.stdout.bytes))
    }
}

/// What the probe called `probe` printed, or why that is not a usable answer.
pub(crate) fn probe_stdout<'a>(
    probe: &'static str,
    record: &'a ProbeRecord,
) -> Result<&'a [u8], ProblemError> {
    match record {
        ProbeRecord::Output(stdout) => Ok(stdout),
        ProbeRecord::Timeout(timeout) => Err(ProblemError::Timeout {
            probe,
            timeout: *timeout,
        }),
        ProbeRecord::Limit(limit) => Err(ProblemError::Limit {
            probe,
            limit: *limit,
        }),
        ProbeRecord::Exited {
            code,
            first_stderr_line,
            blocked,
        } => Err(ProblemError::Exited {
            probe,
            code: *code,
            first_stderr_line: first_stderr_line.clone(),
            blocked: blocked.clone(),
        }),
        ProbeRecord::Signaled(signal) => Err(ProblemError::Signaled {
            probe,
            signal: *signal,
        }),
        ProbeRecord::OutputTooLarge(total) => Err(ProblemError::OutputTooLarge {
            probe,
            total: *total,
        }),
    }
}

/// Asks `config` of every candidate whose result is a Kodelet description that loads and
/// whose `config` was never asked, in parallel (at most two probes per core), and records the
/// answers in `results`; returns the indices answered.
///
/// Listing never asks: a cold discovery then spawns one process per tool, not two. A tool's
/// first call asks ([`discover_one`], [`LiveRegistry::ready_for_call`](crate::discovery::live::LiveRegistry::ready_for_call)),
/// and the cache keeps the answer with the description, so the timeout a tool requests
/// applies from its first call on.
pub(crate) async fn ask_configs(
    executor: &Arc<Executor>,
    candidates: &[&Candidate],
    results: &mut [Result<Probed, ProblemError>],
    config: &RunConfig,
) -> Vec<usize> {
    let pending: Vec<usize> = results
        .iter()
        .zip(candidates)
        .enumerate()
        .filter(|(_, (result, candidate))| {
            result.as_ref().is_ok_and(|probed| {
                probed.protocol == Protocol::KodeletDescription
                    && probed.config == ConfigAnswer::NotAsked
                    && load_kodelet(probed, candidate).is_ok()
            })
        })
        .map(|(index, _)| index)
        .collect();
    if pending.is_empty() {
        return pending;
    }
    let permits = Arc::new(tokio::sync::Semaphore::new(probes_in_flight()));
    let limits = probe_limits(&config.limits);
    let mut tasks = tokio::task::JoinSet::new();
    for &index in &pending {
        let executor = Arc::clone(executor);
        let permits = Arc::clone(&permits);
        let limits = limits.clone();
        let cwd = config.cwd.clone();
        let env = config.env.clone();
        let path = candidates[index].path.clone();
        let name = candidates[index].expected.clone();
        let caches = config.tool_caches.clone();
        let masks = config.read_masks.for_probes();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            let session = executor.session();
            let probe = Probe {
                session: &session,
                cwd: &cwd,
                env: &env,
                limits: &limits,
                sandbox: &probe_sandbox(masks),
                caches: caches.as_deref(),
            };
            (index, probe.config(&path, &name).await)
        });
    }
    let mut answered = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((index, answer)) => {
                if let Some(Ok(probed)) = results.get_mut(index) {
                    probed.config = answer;
                    answered.push(index);
                }
            }
            Err(join_error) if join_error.is_panic() => {
                std::panic::resume_unwind(join_error.into_panic());
            }
            // Cancelled with the runtime: the tool keeps its `config` pending.
            Err(_cancelled) => {}
        }
    }
    answered
}

/// `tool` ready to be called: for a Kodelet tool whose `config` was never asked
/// ([`Tool::config_pending`]), the answer `cache` holds for its file, else the answer of a
/// `config` probe run now (in the probes' sandbox) and recorded in `cache` (not saved).
///
/// A `config` that asks for an invalid timeout makes the tool a problem, as it would have
/// been had discovery asked: the error says why, and the caller runs nothing.
pub async fn resolve_config(
    executor: &Arc<Executor>,
    tool: &Tool,
    cache: &mut DiscoveryCache,
    config: &RunConfig,
) -> Result<Tool, ProblemError> {
    if !tool.config_pending() {
        return Ok(tool.clone());
    }
    let fingerprint = fs::metadata(tool.path()).map(|metadata| Fingerprint::of(&metadata));
    let sandbox_key = probe_sandbox_key(executor.features());
    let cached = fingerprint
        .as_ref()
        .ok()
        .and_then(|fingerprint| cache.config_of(tool.path(), fingerprint, &sandbox_key))
        .cloned();
    let answer = match cached {
        Some(answer) => answer,
        None => {
            let limits = probe_limits(&config.limits);
            let session = executor.session();
            let probe = Probe {
                session: &session,
                cwd: &config.cwd,
                env: &config.env,
                limits: &limits,
                sandbox: &probe_sandbox(config.read_masks.for_probes()),
                caches: config.tool_caches.as_deref(),
            };
            let answer = probe.config(tool.path(), tool.name()).await;
            if let Ok(fingerprint) = &fingerprint {
                cache.set_config(tool.path(), fingerprint, answer.clone());
            }
            answer
        }
    };
    let requested = match answer {
        ConfigAnswer::Printed(printed) => {
            kodelet::parse_config(&printed).map_err(|source| ProblemError::Config { source })?
        }
        ConfigAnswer::NotImplemented | ConfigAnswer::NotAsked => None,
    };
    Ok(tool.with_requested_timeout(requested))
}

/// Whether the file at `path` is a script a package runner starts ([`package_runner`]); an
/// unreadable file is not (its probe says why it cannot run).
fn is_package_runner(path: &Path) -> bool {
    read_start(path, Links::Follow, HEAD_BYTES).is_ok_and(|head| package_runner(&head).is_some())
}

/// What a failed probe's stderr says the probes' sandbox refused it, read from the whole of
/// it (uv puts the cause lines below its first): the kernel's words for a refused write
/// (`EROFS`, and `EACCES`, Landlock's refusal), and the resolver's and the package managers'
/// words for a network that is not there (a name that does not resolve, an unreachable
/// network, uv's and npm's offline mode that toolsmith switches on for probes).
///
/// A network refusal is checked first: a package manager that cannot fetch may go on to fail
/// a write of its own, while a refused write says nothing of the network.
pub(crate) fn blocked_by_sandbox(stderr: &str, name: &ToolName) -> Option<ProbeBlocked> {
    const NETWORK: [&str; 12] = [
        "network was disabled",
        "network connectivity is disabled",
        "temporary failure in name resolution",
        "name or service not known",
        "failed to lookup address",
        "could not resolve host",
        "network is unreachable",
        "os error 101",
        "enetunreach",
        "eai_again",
        "enotcached",
        "getaddrinfo",
    ];
    const WRITE: [&str; 5] = [
        "read-only file system",
        "os error 30",
        "erofs",
        "permission denied",
        "os error 13",
    ];
    let text = stderr.to_lowercase();
    if NETWORK.iter().any(|marker| text.contains(marker)) {
        Some(ProbeBlocked::Network { name: name.clone() })
    } else if WRITE.iter().any(|marker| text.contains(marker)) {
        Some(ProbeBlocked::Write)
    } else {
        None
    }
}

/// Whether a failure to load a file as a Kodelet tool leaves room for it to
/// be an ikigai tool, so that `--schema` is worth a probe.
///
/// Not when the answer was a Kodelet description with a mistake in it (the
/// mistake is the whole story), nor when the file could not be started (it
/// would not start for `--schema` either), nor when `description` hung: an
/// ikigai tool given an argument it ignores reads an empty stdin and ends,
/// and a second hanging probe would double the cost of a broken file.
pub(crate) fn worth_trying_schema(error: &ProblemError) -> bool {
    match error {
        ProblemError::Description { source } => !source.is_kodelet_answer(),
        // The sandbox refused it something: `--schema` would be refused the same.
        ProblemError::Exited {
            blocked: Some(_), ..
        } => false,
        ProblemError::Exited { .. }
        | ProblemError::Signaled { .. }
        | ProblemError::OutputTooLarge { .. }
        | ProblemError::Limit { .. } => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::discovery::catalog::ProbeBlocked;
    use crate::discovery::probe::blocked_by_sandbox;
    use crate::name::ToolName;

    fn check(stderr: &str, expect: Option<&str>) {
        let name = ToolName::new("todo_write").unwrap();
        let found = blocked_by_sandbox(stderr, &name).map(|blocked| match blocked {
            ProbeBlocked::Write => "write",
            ProbeBlocked::Network { .. } => "network",
        });
        assert_eq!(found, expect, "{stderr}");
    }

    #[test]
    fn refused_writes_and_networks_are_recognised() {
        // uv before issue 26: its cache in a read-only home.
        check(
            "error: Failed to initialize cache at `/root/.cache/uv`\n  Caused by: failed to create directory `/root/.cache/uv`: Read-only file system (os error 30)",
            Some("write"),
        );
        check(
            "mkdir: cannot create directory '/home/u/.state': Read-only file system",
            Some("write"),
        );
        check(
            "PermissionError: [Errno 13] Permission denied: '/etc/x'",
            Some("write"),
        );
        // uv offline, and uv without UV_OFFLINE in a network namespace.
        check(
            "error: No solution found when resolving script dependencies\n\nhint: Packages were unavailable because the network was disabled.",
            Some("network"),
        );
        check(
            "  cause: failed to lookup address information: Temporary failure in name resolution",
            Some("network"),
        );
        check("npm error code ENOTCACHED", Some("network"));
        // A network refusal wins over a write the package manager failed afterwards.
        check(
            "dns error: Temporary failure in name resolution\nRead-only file system",
            Some("network"),
        );
        check("Traceback: KeyError: 'name'", None);
        check("", None);
    }
}
