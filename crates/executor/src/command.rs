//! The description of one program run: what to execute, where, with which environment and input.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::{Error, Sandbox};

/// One program to run: an absolute path, its arguments, a working directory,
/// the exact environment it receives, and optional bytes for its stdin.
///
/// Nothing is inherited from the executor's own environment: the caller
/// builds the environment explicitly, usually with [`filtered_env`].
#[derive(Debug, Clone)]
pub struct Command {
    program: PathBuf,
    args: Vec<OsString>,
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    stdin: Option<Vec<u8>>,
    sandbox: Sandbox,
}

/// Where the lines a program writes on [`REPORT_FD`] go (see
/// [`Executor::run_reporting`](crate::Executor::run_reporting)).
pub type ReportSink = tokio::sync::mpsc::UnboundedSender<Vec<u8>>;

/// The file descriptor on which a program writes its reports (see
/// [`Executor::run_reporting`](crate::Executor::run_reporting)).
pub const REPORT_FD: i32 = 3;

/// The longest report line passed on; a longer one is dropped, so a program that writes
/// without newlines cannot grow the executor's memory.
pub const MAX_REPORT_LINE: usize = 64 * 1024;

impl Command {
    /// Describes a run of `program` in `cwd`.
    ///
    /// Both paths must be absolute: the executor never searches `PATH`, so
    /// what runs is exactly what the caller named.
    pub fn new(program: &Path, cwd: &Path) -> Result<Command, Error> {
        for path in [program, cwd] {
            if !path.is_absolute() {
                return Err(Error::RelativePath {
                    path: path.to_path_buf(),
                });
            }
        }
        Ok(Command {
            program: program.to_path_buf(),
            args: Vec::new(),
            cwd: cwd.to_path_buf(),
            env: Vec::new(),
            stdin: None,
            sandbox: Sandbox::none(),
        })
    }

    /// Appends one argument.
    pub fn arg(&mut self, arg: &OsStr) -> &mut Command {
        self.args.push(arg.to_os_string());
        self
    }

    /// Sets one environment variable, replacing an earlier value of the same name.
    pub fn env(&mut self, name: &OsStr, value: &OsStr) -> &mut Command {
        self.env.retain(|(existing, _)| existing != name);
        self.env.push((name.to_os_string(), value.to_os_string()));
        self
    }

    /// Replaces the whole environment.
    pub fn envs(&mut self, vars: Vec<(OsString, OsString)>) -> &mut Command {
        self.env.clear();
        for (name, value) in vars {
            self.env(&name, &value);
        }
        self
    }

    /// Feeds `input` to the program's stdin, then closes it.
    /// Without this, stdin is `/dev/null`.
    pub fn stdin(&mut self, input: Vec<u8>) -> &mut Command {
        self.stdin = Some(input);
        self
    }

    /// Isolates the run as `sandbox` says. Without this, [`Sandbox::none`].
    pub fn sandbox(&mut self, sandbox: Sandbox) -> &mut Command {
        self.sandbox = sandbox;
        self
    }

    /// The run's sandbox.
    pub fn sandbox_profile(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The absolute path of the program.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The arguments after the program name.
    pub fn args(&self) -> &[OsString] {
        &self.args
    }

    /// The working directory.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The exact environment of the run.
    pub fn env_vars(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    /// The bytes fed to stdin, if any.
    pub fn stdin_bytes(&self) -> Option<&[u8]> {
        self.stdin.as_deref()
    }
}

/// The variables named in `allow` that are set in the executor's environment,
/// followed by every pair of `set` (which wins over an allowed variable of the
/// same name).
///
/// This is the whole environment policy: anything not named is not passed.
pub fn filtered_env(allow: &[String], set: &[(String, String)]) -> Vec<(OsString, OsString)> {
    let mut vars: Vec<(OsString, OsString)> = Vec::new();
    for name in allow {
        if set.iter().any(|(set_name, _)| set_name == name) {
            continue;
        }
        if let Some(value) = std::env::var_os(name) {
            vars.push((OsString::from(name), value));
        }
    }
    for (name, value) in set {
        vars.push((OsString::from(name), OsString::from(value)));
    }
    vars
}

/// The variables passed to tools when the operator names none:
/// `PATH`, `HOME`, `USER` and `LANG`.
pub const DEFAULT_ENV_ALLOW: &[&str] = &["PATH", "HOME", "USER", "LANG"];
