//! Running a manifest: the command that renders its body with a call's arguments and runs
//! it with its shell, and the variables manifests reference.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use serde_json::Value;
use toolsmith_executor::Command;

use crate::formats::manifest::error::CommandError;
use crate::formats::manifest::model::{Manifest, Shell};

impl Manifest {
    /// `arguments` with every declared default filled in where the caller gave no value.
    pub(crate) fn with_defaults(&self, arguments: &Value) -> Value {
        let mut filled = arguments.as_object().cloned().unwrap_or_default();
        for parameter in &self.parameters {
            if let Some(default) = &parameter.default
                && filled.get(&parameter.name).is_none_or(Value::is_null)
            {
                filled.insert(parameter.name.clone(), default.clone());
            }
        }
        Value::Object(filled)
    }

    /// The command of one call: `<shell> -c <rendered body> <name>`, in the
    /// manifest's `cwd` (relative to `project`), with `env` and the manifest's
    /// variables.
    ///
    /// `${VAR}` in `cwd` and `env` expands from `env` alone, the tool's own environment
    /// (what `[env] allow` passes from the snapshot taken at start, and `[env] set`), never
    /// from toolsmith's live environment: a manifest, which a project may write, reaches no
    /// variable that the tool would not receive anyway.
    ///
    /// The script holds no value: its tags refer to the `TOOLSMITH_ARG_*` variables (see
    /// `oob.rs`), which the caller adds to the command's environment; `in_file` says which
    /// of them come as a file.
    pub(crate) fn command(
        &self,
        arguments: &Value,
        in_file: &dyn Fn(&str) -> bool,
        project: &Path,
        env: &[(OsString, OsString)],
    ) -> Result<Command, CommandError> {
        let script = self.body.render(&self.with_defaults(arguments), in_file);
        let lookup = |name: &str| {
            env.iter()
                .rev()
                .find(|(key, _)| key.as_os_str() == OsStr::new(name))
                .map(|(_, value)| value.to_string_lossy().into_owned())
        };
        let cwd = match &self.cwd {
            Some(cwd) => project.join(cwd.expand(&lookup)),
            None => project.to_path_buf(),
        };
        let shell = resolve_shell(self.shell, env)?;
        let mut command = Command::new(&shell, &cwd)?;
        command
            .arg(OsStr::new("-c"))
            .arg(OsStr::new(&script))
            .arg(OsStr::new(self.name.as_str()))
            .envs(env.to_vec());
        for (name, value) in &self.env {
            command.env(OsStr::new(name), OsStr::new(&value.expand(&lookup)));
        }
        Ok(command)
    }
}

/// The absolute path of the shell: the one asked for, else bash if there is
/// one, else sh; searched in the tool's `PATH`, then `/bin` and `/usr/bin`.
fn resolve_shell(
    shell: Option<Shell>,
    env: &[(OsString, OsString)],
) -> Result<PathBuf, CommandError> {
    let path_var = env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.clone())
        .unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path_var)
        .filter(|dir| dir.is_absolute())
        .collect();
    dirs.extend([PathBuf::from("/bin"), PathBuf::from("/usr/bin")]);
    let find = |program: &str| {
        dirs.iter()
            .map(|dir| dir.join(program))
            .find(|candidate| is_executable(candidate))
    };
    match shell {
        Some(shell) => find(shell.program()).ok_or(CommandError::NoShell {
            shell: shell.program(),
        }),
        None => find("bash")
            .or_else(|| find("sh"))
            .ok_or(CommandError::NoShell { shell: "sh" }),
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|metadata| metadata.is_file() && metadata.permissions().mode() & 0o111 != 0)
}
