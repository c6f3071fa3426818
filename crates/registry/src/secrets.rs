//! Per-tool secrets: what the operator defines (`[secrets.NAME]`), where each value comes from, and reading it for one call.
//!
//! A secret is defined once by the operator, with exactly one source:
//! - `env = "VAR"`: a variable of toolsmith's environment, read once at start (a snapshot,
//!   taken before the environment is scrubbed) and then removed from the general
//!   environment, so that `[env] allow` can never pass it to every tool;
//! - `file = "PATH"`: read at each call, opened with `O_NOFOLLOW` and `O_NONBLOCK`, and only
//!   when it is a regular file of at most [`MAX_SECRET_BYTES`];
//! - `command = ["argv", ...]`: run at each call as the operator's own command (through the
//!   executor, without a sandbox: it is the operator's program, not a tool's), with
//!   [`COMMAND_TIMEOUT`]; its stdout, one trailing newline trimmed, is the value. Nothing is
//!   cached: a rotated token is picked up at the next call, and no value outlives the call
//!   that received it in toolsmith's memory.
//!
//! A value reaches only a call of a tool it is granted to (`[tools.NAME] secrets`), as an
//! environment variable of the secret's name; the registry adds it after every other
//! variable and never to a probe, a `prepare` run or a generated tool. Values are never
//! printed: [`SecretValue`] and [`SecretSource`] have a `Debug` that shows no value, and
//! every error names the secret and its source, never what was read.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toolsmith_executor::{Executor, Limits, Sandbox, Termination};

/// The largest secret value: the largest value passed in one environment variable
/// (see [`MAX_VARIABLE_BYTES`](crate::oob::MAX_VARIABLE_BYTES)).
pub(crate) const MAX_SECRET_BYTES: usize = 64 * 1024;

/// How long a `command` source may take before the call fails.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// The name of a secret: an environment variable name (`[A-Za-z_][A-Za-z0-9_]*`), never one
/// of toolsmith's own (`TOOLSMITH_*`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SecretName(String);

/// Why a name cannot name a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretNameError {
    /// Not an environment variable name.
    #[error(
        "`{name}` is not an environment variable name (letters, digits and `_`, not starting with a digit)"
    )]
    NotAVariable {
        /// The name given.
        name: String,
    },
    /// One of toolsmith's own variables, which no tool receives.
    #[error("`{name}` is one of toolsmith's own variables (TOOLSMITH_*), which no tool receives")]
    Reserved {
        /// The name given.
        name: String,
    },
}

impl SecretName {
    /// Checks `name`.
    pub fn new(name: &str) -> Result<SecretName, SecretNameError> {
        if !crate::oob::is_identifier(name) {
            return Err(SecretNameError::NotAVariable {
                name: name.to_owned(),
            });
        }
        if crate::oob::is_toolsmith_var(&OsString::from(name)) {
            return Err(SecretNameError::Reserved {
                name: name.to_owned(),
            });
        }
        Ok(SecretName(name.to_owned()))
    }

    /// The name, which is also the variable the tool receives.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SecretName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A secret's value; its `Debug` shows only its length, and its bytes are overwritten when
/// it is dropped.
pub struct SecretValue(Vec<u8>);

impl SecretValue {
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretValue(<{} bytes>)", self.0.len())
    }
}

impl Drop for SecretValue {
    fn drop(&mut self) {
        self.0.fill(0);
        std::hint::black_box(&self.0);
    }
}

/// Where a secret's value comes from.
#[derive(Clone)]
pub enum SecretSource {
    /// A variable of toolsmith's environment, snapshotted at start; `None` when it was unset.
    Env {
        /// The variable.
        variable: String,
        /// Its value at start.
        value: Option<Arc<SecretValue>>,
    },
    /// A file read at each call.
    File(PathBuf),
    /// A command run at each call; its stdout is the value.
    Command(Vec<String>),
}

impl SecretSource {
    /// `env`, `file` or `command`: the key that defines it.
    pub fn kind(&self) -> &'static str {
        match self {
            SecretSource::Env { .. } => "env",
            SecretSource::File(_) => "file",
            SecretSource::Command(_) => "command",
        }
    }

    /// The source as the operator wrote it, without any value: `env GH_PAT`, `file
    /// /run/secrets/gh`, `command gh auth token`.
    pub fn describe(&self) -> String {
        match self {
            SecretSource::Env { variable, .. } => format!("env {variable}"),
            SecretSource::File(path) => format!("file {}", path.display()),
            SecretSource::Command(argv) => format!("command {}", argv.join(" ")),
        }
    }
}

impl fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The secrets the operator defined, and the environment their commands run with.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    defined: BTreeMap<SecretName, SecretSource>,
    command_env: Vec<(OsString, OsString)>,
}

/// Why a secret could not be read for a call; names the secret and its source, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// No `[secrets.NAME]` defines it.
    #[error("secret {name} is not defined (no [secrets.{name}] in the user config)")]
    Undefined {
        /// The secret.
        name: SecretName,
    },
    /// The `env` source was unset when toolsmith started.
    #[error("secret {name}: variable {variable} was not set when toolsmith started")]
    EnvUnset {
        /// The secret.
        name: SecretName,
        /// The variable.
        variable: String,
    },
    /// The `file` source could not be read.
    #[error("secret {name}: cannot read file {path}", path = path.display())]
    File {
        /// The secret.
        name: SecretName,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The `command` source could not be run.
    #[error("secret {name}: cannot run command {program}")]
    CommandSpawn {
        /// The secret.
        name: SecretName,
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: toolsmith_executor::Error,
    },
    /// The `command` source failed (its stderr is not shown: it may hold the value).
    #[error("secret {name}: command {program} failed ({how})")]
    CommandFailed {
        /// The secret.
        name: SecretName,
        /// The program.
        program: String,
        /// An exit status, a signal, the timeout.
        how: String,
    },
    /// The value is empty, too large, or holds a NUL byte.
    #[error("secret {name}: the value from {source_kind} {problem}")]
    BadValue {
        /// The secret.
        name: SecretName,
        /// `env`, `file` or `command`.
        source_kind: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

impl Secrets {
    /// The secrets `defined`, whose commands run with `command_env` (toolsmith's own
    /// environment after its scrub, without any secret's source).
    pub fn new(
        defined: BTreeMap<SecretName, SecretSource>,
        command_env: Vec<(OsString, OsString)>,
    ) -> Secrets {
        Secrets {
            defined,
            command_env,
        }
    }

    /// Every defined secret and its source.
    pub fn defined(&self) -> &BTreeMap<SecretName, SecretSource> {
        &self.defined
    }

    /// Whether a variable of this name may never be passed by the general environment
    /// (`[env] allow`, `set`): a secret's name, or a secret's `env` source.
    pub fn reserves(&self, variable: &OsString) -> bool {
        self.defined.iter().any(|(name, source)| {
            variable.as_encoded_bytes() == name.as_str().as_bytes()
                || matches!(source, SecretSource::Env { variable: source_var, .. }
                    if variable.as_encoded_bytes() == source_var.as_bytes())
        })
    }

    /// Reads the value of `name` for one call; a `command` runs through `executor` in `cwd`.
    pub async fn read(
        &self,
        executor: &Arc<Executor>,
        name: &SecretName,
        cwd: &Path,
    ) -> Result<SecretValue, SecretError> {
        let source = self
            .defined
            .get(name)
            .ok_or_else(|| SecretError::Undefined { name: name.clone() })?;
        let bytes = match source {
            SecretSource::Env { variable, value } => match value {
                Some(value) => value.bytes().to_vec(),
                None => {
                    return Err(SecretError::EnvUnset {
                        name: name.clone(),
                        variable: variable.clone(),
                    });
                }
            },
            SecretSource::File(path) => {
                let owned = path.clone();
                let reading = tokio::task::spawn_blocking(move || read_file(&owned));
                match reading.await {
                    Ok(result) => result.map_err(|source| SecretError::File {
                        name: name.clone(),
                        path: path.clone(),
                        source,
                    })?,
                    Err(join_error) => std::panic::resume_unwind(join_error.into_panic()),
                }
            }
            SecretSource::Command(argv) => self.run_command(executor, name, argv, cwd).await?,
        };
        checked(name, source.kind(), bytes)
    }

    async fn run_command(
        &self,
        executor: &Arc<Executor>,
        name: &SecretName,
        argv: &[String],
        cwd: &Path,
    ) -> Result<Vec<u8>, SecretError> {
        let program_name = argv.first().cloned().unwrap_or_default();
        let spawn_error = |source| SecretError::CommandSpawn {
            name: name.clone(),
            program: program_name.clone(),
            source,
        };
        let program = self.find_program(&program_name);
        let mut command = toolsmith_executor::Command::new(&program, cwd).map_err(spawn_error)?;
        for arg in argv.iter().skip(1) {
            command.arg(arg.as_ref());
        }
        command.envs(self.command_env.clone());
        command.sandbox(Sandbox::none());
        let mut limits = Limits::recommended();
        limits.timeout = COMMAND_TIMEOUT;
        limits.max_output = (MAX_SECRET_BYTES + 2) as u64;
        let outcome = executor.run(&command, &limits).await.map_err(spawn_error)?;
        let failed = |how: String| SecretError::CommandFailed {
            name: name.clone(),
            program: program_name.clone(),
            how,
        };
        if let Some(limit) = outcome.limit {
            return Err(failed(format!("{limit} limit")));
        }
        match outcome.termination {
            Termination::Exited(0) => {}
            Termination::Exited(code) => return Err(failed(format!("exit status {code}"))),
            Termination::Signaled(signal) => return Err(failed(format!("signal {signal}"))),
        }
        if outcome.stdout.truncated {
            return Err(SecretError::BadValue {
                name: name.clone(),
                source_kind: "command",
                problem: format!("is larger than {MAX_SECRET_BYTES} bytes"),
            });
        }
        let mut bytes = outcome.stdout.bytes;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
        }
        Ok(bytes)
    }

    /// `program` itself when it holds a `/`, else the first executable of that name in the
    /// command environment's `PATH` (the executor never searches `PATH`).
    fn find_program(&self, program: &str) -> PathBuf {
        if program.contains('/') {
            return PathBuf::from(program);
        }
        let path = self
            .command_env
            .iter()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value.clone())
            .unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| is_executable(candidate))
            .unwrap_or_else(|| PathBuf::from(program))
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}

/// Reads a `file` source: never through a symbolic link, never blocking on a FIFO, only a
/// regular file of at most [`MAX_SECRET_BYTES`].
fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let file_type = file.metadata()?.file_type();
    let refuse = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file but a {what}"),
        )
    };
    if file_type.is_dir() {
        return Err(refuse("directory"));
    }
    if file_type.is_fifo() || file_type.is_socket() {
        return Err(refuse("FIFO or socket"));
    }
    if file_type.is_block_device() || file_type.is_char_device() {
        return Err(refuse("device"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_BYTES as u64 + 2)
        .read_to_end(&mut bytes)?;
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    Ok(bytes)
}

/// The value, when it can be an environment variable: not empty, no NUL, at most
/// [`MAX_SECRET_BYTES`].
fn checked(
    name: &SecretName,
    source_kind: &'static str,
    bytes: Vec<u8>,
) -> Result<SecretValue, SecretError> {
    let value = SecretValue(bytes);
    let problem = if value.0.is_empty() {
        Some("is empty".to_owned())
    } else if value.0.len() > MAX_SECRET_BYTES {
        Some(format!("is larger than {MAX_SECRET_BYTES} bytes"))
    } else if value.0.contains(&0) {
        Some("holds a NUL byte, which no environment variable can carry".to_owned())
    } else {
        None
    };
    match problem {
        Some(problem) => Err(SecretError::BadValue {
            name: name.clone(),
            source_kind,
            problem,
        }),
        None => Ok(value),
    }
}

/// A value snapshotted from toolsmith's environment at start.
pub fn snapshot_value(value: OsString) -> Arc<SecretValue> {
    Arc::new(SecretValue(value.into_encoded_bytes()))
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use crate::secrets::{SecretName, SecretSource, Secrets, read_file, snapshot_value};

    fn check_name(name: &str, expect: Result<(), &str>) {
        assert_eq!(
            SecretName::new(name)
                .map(|_| ())
                .map_err(|error| error.to_string()),
            expect.map_err(str::to_owned)
        );
    }

    #[test]
    fn names_are_variable_names_but_not_toolsmiths() {
        check_name("GITHUB_TOKEN", Ok(()));
        check_name("_x1", Ok(()));
        check_name(
            "1X",
            Err(
                "`1X` is not an environment variable name (letters, digits and `_`, not starting with a digit)",
            ),
        );
        check_name(
            "A-B",
            Err(
                "`A-B` is not an environment variable name (letters, digits and `_`, not starting with a digit)",
            ),
        );
        check_name(
            "TOOLSMITH_TOKEN",
            Err(
                "`TOOLSMITH_TOKEN` is one of toolsmith's own variables (TOOLSMITH_*), which no tool receives",
            ),
        );
    }

    #[test]
    fn debug_never_shows_a_value() {
        let source = SecretSource::Env {
            variable: "GH_PAT".to_owned(),
            value: Some(snapshot_value(OsString::from("hunter2"))),
        };
        let secrets = Secrets::new(
            [(SecretName::new("GITHUB_TOKEN").unwrap(), source)].into(),
            Vec::new(),
        );
        let shown = format!("{secrets:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("env GH_PAT"), "{shown}");
    }

    #[test]
    fn the_general_environment_never_carries_a_name_or_a_source() {
        let secrets = Secrets::new(
            [(
                SecretName::new("GITHUB_TOKEN").unwrap(),
                SecretSource::Env {
                    variable: "GH_PAT".to_owned(),
                    value: None,
                },
            )]
            .into(),
            Vec::new(),
        );
        assert!(secrets.reserves(&OsString::from("GITHUB_TOKEN")));
        assert!(secrets.reserves(&OsString::from("GH_PAT")));
        assert!(!secrets.reserves(&OsString::from("PATH")));
    }

    #[test]
    fn files_are_regular_and_never_links() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "abc\n").unwrap();
        assert_eq!(read_file(&file).unwrap(), b"abc");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(read_file(&link).is_err());
        assert!(read_file(dir.path()).is_err());
    }
}
