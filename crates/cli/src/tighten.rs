//! A trusted project config may only tighten the user's settings: each loosening value is dropped and reported by key.
//!
//! Trusting a project means reading its tools and config, not handing it the user's policy:
//! unless the user config says `[trust] project_may_loosen = true`, every value of the project
//! config is compared with what the user config (or, where it is silent, the default) sets,
//! and a value that would give tools more than the user does is removed from the project
//! layer, so the user's value applies, and becomes a [`Loosening`] naming the key. What counts
//! as loosening, key by key (the table in docs/security.md, "Project trust", says the same):
//!
//! - every limit: what its row of the one declaration says (`loosens`; today a larger value,
//!   or `unlimited`, for each), listed in the generated table of docs/operators.md;
//! - `executor.backend`: a weaker containment backend than the user's (`auto` counts as the
//!   strongest); `executor.max_concurrent`: more concurrent calls than the user allows;
//! - `sandbox.network`: `allow` < `deny-if-possible` < `deny`; `sandbox.filesystem`: a
//!   less confined profile (`full` < `project` < `read-only`), or an `-if-possible` variant
//!   where the user requires the mechanism; `sandbox.syscalls`: `unfiltered` <
//!   `filter-if-possible` < `filter`; `sandbox.user`: any identity other than the user's;
//! - `env.allow`: a variable the user's list does not pass through (the others are kept);
//!   `env.set`: a variable the user sets, or one the user's `allow` passes through (a project
//!   must not replace `PATH` or a value the user chose; new variables are fine);
//! - `policy.allowed`: a tool the user's list does not admit; `policy.profile`: another
//!   profile than the user's, or `none` lifting it; `policy.disabled` is merged with the
//!   user's list, never replacing it; `tools.NAME.disabled = false` for a tool the user
//!   disabled;
//! - `[tools.NAME]`: the same rules, against the user's section for that tool, else the user's
//!   global value;
//! - `discovery.dirs` and `generator.tools_dir`: a directory outside the project; `audit.path`:
//!   any path when the user has an audit log (it would move the user's log), else a path outside
//!   the project.
//!
//! - `[secrets.NAME]` and `tools.NAME.secrets`: always, whatever `project_may_loosen` says
//!   ([`without_secrets`]): secrets are defined and granted in the user config only.
//!
//! `discovery.peers` and `discovery.cache` only change which of the user's and the project's
//! own directories are read, and how often: they are never loosening.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toolsmith_executor::{Backend, BackendChoice, DEFAULT_ENV_ALLOW, RunAs};
use toolsmith_registry::{
    FilesystemSetting, NetworkSetting, SandboxProfile, SyscallsSetting, ToolName,
};

#[cfg(test)]
use crate::settings::ConfigDir;
use crate::settings::{Combine, EnvOptions, LIMIT_KEYS, LimitKey, Options, SandboxOptions};

/// A value of the project config that would loosen the user's settings; it was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loosening {
    /// The config key, e.g. `sandbox.network` or `tools.hello.memory`.
    pub(crate) key: String,
    /// What the project config asked for.
    pub(crate) project: String,
    /// What applies instead: the user's value (or the default).
    pub(crate) applied: String,
}

impl Loosening {
    /// Whether no user setting could allow it: a secret's definition or grant.
    pub(crate) fn user_config_only(&self) -> bool {
        self.key.starts_with("secrets.") || self.key.ends_with(".secrets")
    }
}

/// The project's options without any `[secrets.NAME]` or `tools.NAME.secrets`, and what was
/// removed: a project config never defines or grants a secret, even with `[trust]
/// project_may_loosen = true` (a trusted clone must not hand the user's token to its own
/// tool by naming it).
pub(crate) fn without_secrets(project: &mut Options) -> Vec<Loosening> {
    let mut found: Vec<Loosening> = std::mem::take(&mut project.secrets)
        .into_keys()
        .map(|name| Loosening {
            key: format!("secrets.{name}"),
            project: "a secret's definition".to_owned(),
            applied: "no secret of the project's".to_owned(),
        })
        .collect();
    for (name, tool) in &mut project.tools {
        if let Some(granted) = tool.secrets.take() {
            let names: Vec<String> = granted.iter().map(|name| format!("\"{name}\"")).collect();
            found.push(Loosening {
                key: format!("tools.{name}.secrets"),
                project: format!("[{}]", names.join(", ")),
                applied: "the user config's grant".to_owned(),
            });
        }
    }
    found
}

impl std::fmt::Display for Loosening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.user_config_only() {
            return write!(f, "{} is ignored; {} applies", self.key, self.applied);
        }
        write!(
            f,
            "{} = {} would loosen the user's {}; {} applies",
            self.key, self.project, self.applied, self.applied
        )
    }
}

/// The project's options with every loosening value removed, and what was removed.
/// `project_dir` is the trusted project; `cwd` and `home` resolve the directories named in it.
pub(crate) fn tighten(
    mut project: Options,
    user: &Options,
    project_dir: &Path,
    cwd: &Path,
    home: Option<&Path>,
) -> (Options, Vec<Loosening>) {
    let mut found = without_secrets(&mut project);
    limits(
        LIMIT_KEYS,
        "limits",
        &mut project.limits,
        &user.limits,
        &mut found,
    );

    let user_backend = user.executor.backend.unwrap_or(BackendChoice::Auto);
    if let Some(backend) = project.executor.backend
        && backend_rank(backend) > backend_rank(user_backend)
    {
        found.push(Loosening {
            key: "executor.backend".to_owned(),
            project: backend_name(backend),
            applied: backend_name(user_backend),
        });
        project.executor.backend = None;
    }
    if let (Some(wanted), Some(allowed)) = (
        project.executor.max_concurrent,
        user.executor.max_concurrent,
    ) && wanted > allowed
    {
        found.push(Loosening {
            key: "executor.max_concurrent".to_owned(),
            project: wanted.to_string(),
            applied: allowed.to_string(),
        });
        project.executor.max_concurrent = None;
    }

    let user_allow: Vec<String> = user.env.allow.clone().unwrap_or_else(|| {
        DEFAULT_ENV_ALLOW
            .iter()
            .map(|name| (*name).to_owned())
            .collect()
    });
    let user_set = user.env.set.clone().unwrap_or_default();
    env("env", &mut project.env, &user_allow, &user_set, &mut found);

    let user_sandbox = sandbox_and_generator(&mut project, user, project_dir, &mut found);

    policy(&mut project, user, &mut found);
    may_replace(&mut project, user, &mut found);

    let mut tools = BTreeMap::new();
    for (name, mut tool) in std::mem::take(&mut project.tools) {
        let user_tool = user.tools.get(&name).cloned().unwrap_or_default();
        let prefix = format!("tools.{name}");
        let tool_limits = user_tool.limits.clone().combine(user.limits.clone());
        limits(
            LIMIT_KEYS,
            &prefix,
            &mut tool.limits,
            &tool_limits,
            &mut found,
        );
        let tool_allow = user_tool
            .env
            .allow
            .clone()
            .unwrap_or_else(|| user_allow.clone());
        let mut tool_set = user_set.clone();
        tool_set.extend(user_tool.env.set.clone().unwrap_or_default());
        env(&prefix, &mut tool.env, &tool_allow, &tool_set, &mut found);
        let tool_sandbox = user_sandbox.for_tool(&user_tool.sandbox);
        sandbox(
            &prefix,
            &mut tool.sandbox,
            &tool_sandbox,
            project_dir,
            &mut found,
        );
        let user_disabled = user_tool.disabled == Some(true)
            || user
                .policy
                .disabled
                .as_deref()
                .is_some_and(|disabled| disabled.contains(&name));
        if tool.disabled == Some(false) && user_disabled {
            found.push(Loosening {
                key: format!("{prefix}.disabled"),
                project: "false".to_owned(),
                applied: "disabled".to_owned(),
            });
            tool.disabled = None;
        }
        tools.insert(name, tool);
    }
    project.tools = tools;

    paths(&mut project, user, project_dir, cwd, home, &mut found);
    (project, found)
}

/// `discovery.dirs` and `generator.tools_dir` outside the project, and an `audit.path` that
/// would move the user's log or leave the project.
fn paths(
    project: &mut Options,
    user: &Options,
    project_dir: &Path,
    cwd: &Path,
    home: Option<&Path>,
    found: &mut Vec<Loosening>,
) {
    if let Some(dirs) = project.discovery.dirs.take() {
        let mut kept = Vec::new();
        for dir in dirs {
            let resolved = dir.resolve(cwd, home);
            if inside(&resolved, project_dir) {
                kept.push(dir);
            } else {
                found.push(outside("discovery.dirs", &resolved, project_dir));
            }
        }
        project.discovery.dirs = Some(kept);
    }
    if let Some(dir) = project.generator.tools_dir.take() {
        let resolved = dir.resolve(cwd, home);
        if inside(&resolved, project_dir) {
            project.generator.tools_dir = Some(dir);
        } else {
            found.push(outside("generator.tools_dir", &resolved, project_dir));
        }
    }
    if let Some(path) = project.audit.take() {
        let resolved = std::path::absolute(cwd.join(&path)).unwrap_or_else(|_| cwd.join(&path));
        match &user.audit {
            Some(user_path) => found.push(Loosening {
                key: "audit.path".to_owned(),
                project: quoted(&resolved),
                applied: quoted(user_path),
            }),
            None if !inside(&resolved, project_dir) => {
                found.push(outside("audit.path", &resolved, project_dir));
            }
            None => project.audit = Some(path),
        }
    }
}

/// Removes every limit of `project` that gives tools more than `user` (the user's value, else
/// the default), each key as its row of the one declaration says ([`LimitKey::tighten`]).
pub(crate) fn limits<O, R, T>(
    keys: &[LimitKey<O, R, T>],
    prefix: &str,
    project: &mut O,
    user: &O,
    found: &mut Vec<Loosening>,
) {
    for key in keys {
        if let Some((wanted, applied)) = (key.tighten)(project, user) {
            found.push(loosening(format!("{prefix}.{}", key.name), wanted, applied));
        }
    }
}

fn loosening(key: String, project: String, applied: String) -> Loosening {
    Loosening {
        key,
        project,
        applied,
    }
}

/// Drops the variables of `project` that the user's environment policy does not give tools.
fn env(
    prefix: &str,
    project: &mut EnvOptions,
    user_allow: &[String],
    user_set: &[(String, String)],
    found: &mut Vec<Loosening>,
) {
    if let Some(allow) = project.allow.take() {
        let (kept, refused): (Vec<String>, Vec<String>) = allow
            .into_iter()
            .partition(|name| user_allow.contains(name));
        for name in refused {
            found.push(loosening(
                format!("{prefix}.allow"),
                format!("{name:?}"),
                format!("allow list {user_allow:?}"),
            ));
        }
        project.allow = Some(kept);
    }
    if let Some(set) = project.set.take() {
        let mut kept = Vec::new();
        for (name, value) in set {
            let user_value = user_set
                .iter()
                .rev()
                .find(|(user_name, _)| *user_name == name)
                .map(|(_, user_value)| user_value);
            match user_value {
                Some(user_value) if *user_value == value => kept.push((name, value)),
                Some(user_value) => found.push(loosening(
                    format!("{prefix}.set.{name}"),
                    format!("{value:?}"),
                    format!("{user_value:?}"),
                )),
                None if user_allow.contains(&name) => found.push(loosening(
                    format!("{prefix}.set.{name}"),
                    format!("{value:?}"),
                    "value passed through by the allow list".to_owned(),
                )),
                None => kept.push((name, value)),
            }
        }
        project.set = Some(kept);
    }
}

/// Drops `[sandbox] profile = "compat"`, the `[sandbox]` settings and `[generator] network` of
/// `project` that grant more than the user's; returns the user's effective sandbox.
fn sandbox_and_generator(
    project: &mut Options,
    user: &Options,
    project_dir: &Path,
    found: &mut Vec<Loosening>,
) -> UserSandbox {
    let user_profile = user.sandbox.profile.unwrap_or(SandboxProfile::Default);
    if project.sandbox.profile == Some(SandboxProfile::Compat)
        && user_profile != SandboxProfile::Compat
    {
        found.push(loosening(
            "sandbox.profile".to_owned(),
            format!("{:?}", SandboxProfile::Compat.as_str()),
            format!("{:?}", user_profile.as_str()),
        ));
        project.sandbox.profile = None;
    }
    let user_sandbox = UserSandbox {
        network: user
            .sandbox
            .network
            .clone()
            .unwrap_or_else(|| user_profile.network()),
        filesystem: user
            .sandbox
            .filesystem
            .clone()
            .unwrap_or_else(|| user_profile.filesystem()),
        syscalls: user.sandbox.syscalls.unwrap_or(SyscallsSetting::Filter),
        user: user.sandbox.user,
        read_reveal: user.sandbox.read_reveal.clone().unwrap_or_default(),
    };
    sandbox(
        "sandbox",
        &mut project.sandbox,
        &user_sandbox,
        project_dir,
        found,
    );
    let user_generated = user
        .generator
        .network
        .clone()
        .unwrap_or_else(|| user_profile.generated_network());
    if let Some(network) = &project.generator.network
        && !network.within(&user_generated)
    {
        found.push(loosening(
            "generator.network".to_owned(),
            network.to_string(),
            user_generated.to_string(),
        ));
        project.generator.network = None;
    }
    user_sandbox
}

/// The user's effective sandbox for one scope.
struct UserSandbox {
    network: NetworkSetting,
    filesystem: FilesystemSetting,
    syscalls: SyscallsSetting,
    user: Option<RunAs>,
    /// The paths the user reveals (as written).
    read_reveal: Vec<String>,
}

impl UserSandbox {
    /// The user's sandbox for one tool: its `[tools.NAME]` section over this.
    fn for_tool(&self, tool: &SandboxOptions) -> UserSandbox {
        UserSandbox {
            network: tool.network.clone().unwrap_or_else(|| self.network.clone()),
            filesystem: tool
                .filesystem
                .clone()
                .unwrap_or_else(|| self.filesystem.clone()),
            syscalls: tool.syscalls.unwrap_or(self.syscalls),
            user: self.user,
            read_reveal: tool
                .read_reveal
                .clone()
                .unwrap_or_else(|| self.read_reveal.clone()),
        }
    }
}

/// Drops the sandbox settings of `project` that confine less than the user's.
/// A list may be narrowed, never widened: every destination or path a project lists must lie
/// within the user's.
fn sandbox(
    prefix: &str,
    project: &mut SandboxOptions,
    user: &UserSandbox,
    project_dir: &Path,
    found: &mut Vec<Loosening>,
) {
    if let Some(network) = &project.network
        && !network.within(&user.network)
    {
        found.push(loosening(
            format!("{prefix}.network"),
            quoted_setting(network.to_string()),
            quoted_setting(user.network.to_string()),
        ));
        project.network = None;
    }
    if let Some(filesystem) = &project.filesystem
        && !filesystem.within(&user.filesystem, project_dir)
    {
        found.push(loosening(
            format!("{prefix}.filesystem"),
            quoted_setting(filesystem.to_string()),
            quoted_setting(user.filesystem.to_string()),
        ));
        project.filesystem = None;
    }
    if let Some(syscalls) = project.syscalls
        && syscalls_rank(syscalls) < syscalls_rank(user.syscalls)
    {
        found.push(loosening(
            format!("{prefix}.syscalls"),
            format!("{:?}", syscalls.as_str()),
            format!("{:?}", user.syscalls.as_str()),
        ));
        project.syscalls = None;
    }
    // The identity tools run as is the user's to choose: another uid may own or read what
    // the user's does not, so a project's differing `user` is never taken.
    if let Some(run_as) = project.user
        && Some(run_as) != user.user
    {
        found.push(loosening(
            format!("{prefix}.user"),
            format!("{:?}", run_as.to_string()),
            user.user.map_or_else(
                || "unset".to_owned(),
                |user| format!("{:?}", user.to_string()),
            ),
        ));
        project.user = None;
    }
    masks(prefix, project, user, found);
}

/// Drops each `read_reveal` path of a project the user does not reveal: it shows tools what
/// the user's masks hide (a project's `profile = "compat"` is dropped with the grants, in
/// `sandbox_and_generator`). `read_hide` only adds masks.
fn masks(
    prefix: &str,
    project: &mut SandboxOptions,
    user: &UserSandbox,
    found: &mut Vec<Loosening>,
) {
    if let Some(reveal) = &project.read_reveal
        && reveal.iter().any(|path| !user.read_reveal.contains(path))
    {
        found.push(loosening(
            format!("{prefix}.read_reveal"),
            format!("{reveal:?}"),
            format!("{:?}", user.read_reveal),
        ));
        project.read_reveal = None;
    }
}

fn syscalls_rank(setting: SyscallsSetting) -> u8 {
    match setting {
        SyscallsSetting::Unfiltered => 0,
        SyscallsSetting::FilterIfPossible => 1,
        SyscallsSetting::Filter => 2,
    }
}

/// A level as the messages quote it (`"none"`); a list as TOML writes it.
fn quoted_setting(text: String) -> String {
    if text.starts_with('[') {
        text
    } else {
        format!("{text:?}")
    }
}

/// Strongest first; `auto` picks the strongest the kernel allows.
fn backend_rank(choice: BackendChoice) -> usize {
    match choice {
        BackendChoice::Auto => 0,
        BackendChoice::Only(backend) => Backend::ALL
            .iter()
            .position(|candidate| *candidate == backend)
            .unwrap_or(Backend::ALL.len()),
    }
}

fn backend_name(choice: BackendChoice) -> String {
    match choice {
        BackendChoice::Auto => "\"auto\"".to_owned(),
        BackendChoice::Only(backend) => format!("\"{backend}\""),
    }
}

/// `[generator] may_replace`: within the user's (a consent only the user gives).
fn may_replace(project: &mut Options, user: &Options, found: &mut Vec<Loosening>) {
    let Some(wanted) = project.generator.may_replace.take() else {
        return;
    };
    let user_names = user.generator.may_replace.clone().unwrap_or_default();
    let (kept, refused): (Vec<ToolName>, Vec<ToolName>) = wanted
        .into_iter()
        .partition(|name| user_names.contains(name));
    for name in refused {
        found.push(loosening(
            "generator.may_replace".to_owned(),
            format!("{:?}", name.as_str()),
            format!(
                "may_replace {:?}",
                user_names.iter().map(ToolName::as_str).collect::<Vec<_>>()
            ),
        ));
    }
    project.generator.may_replace = Some(kept);
}

/// `[policy]`: `allowed` within the user's, the same `profile`, and `disabled` added to the user's.
fn policy(project: &mut Options, user: &Options, found: &mut Vec<Loosening>) {
    if let (Some(allowed), Some(user_allowed)) =
        (project.policy.allowed.take(), &user.policy.allowed)
    {
        let (kept, refused): (Vec<ToolName>, Vec<ToolName>) = allowed
            .into_iter()
            .partition(|name| user_allowed.contains(name));
        for name in refused {
            found.push(loosening(
                "policy.allowed".to_owned(),
                format!("{:?}", name.as_str()),
                format!(
                    "allowed list {:?}",
                    user_allowed
                        .iter()
                        .map(ToolName::as_str)
                        .collect::<Vec<_>>()
                ),
            ));
        }
        project.policy.allowed = Some(kept);
    }
    let user_profile = user.policy.profile.flatten();
    if let (Some(profile), Some(user_profile)) = (project.policy.profile, user_profile)
        && profile != Some(user_profile)
    {
        found.push(loosening(
            "policy.profile".to_owned(),
            format!("{:?}", profile.map_or("none", |profile| profile.as_str())),
            format!("{:?}", user_profile.as_str()),
        ));
        project.policy.profile = None;
    }
    if let Some(user_disabled) = &user.policy.disabled {
        let mut disabled = user_disabled.clone();
        for name in project.policy.disabled.take().unwrap_or_default() {
            if !disabled.contains(&name) {
                disabled.push(name);
            }
        }
        project.policy.disabled = Some(disabled);
    }
}

/// Whether `path` is `project` or below it, symbolic links of its existing part resolved.
fn inside(path: &Path, project: &Path) -> bool {
    let project = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_path_buf());
    resolve_existing(path).starts_with(project)
}

/// `path` with its longest existing ancestor canonicalized, and `..` of the rest applied.
fn resolve_existing(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while existing.canonicalize().is_err() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_owned());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut resolved = existing.canonicalize().unwrap_or(existing);
    for component in rest.iter().rev() {
        if component == ".." {
            resolved.pop();
        } else if component != "." {
            resolved.push(component);
        }
    }
    resolved
}

fn outside(key: &str, path: &Path, project: &Path) -> Loosening {
    Loosening {
        key: key.to_owned(),
        project: quoted(path),
        applied: format!("nothing outside the project {}", project.display()),
    }
}

fn quoted(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// Only used by the tests: the directories a project config names, for `ConfigDir`.
#[cfg(test)]
fn config_dir(dir: &str) -> ConfigDir {
    ConfigDir {
        base: PathBuf::from(".toolsmith"),
        dir: PathBuf::from(dir),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[cfg(test)]
    use crate::settings::ConfigDir;
    use crate::settings::Options;
    use crate::tighten::{config_dir, tighten};

    fn parse(text: &str) -> Options {
        let temp = tempfile::tempdir().unwrap();
        let path = temp.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        crate::settings::load(&path, toolsmith_registry::Links::Follow)
            .unwrap()
            .options
    }

    /// The keys refused when `project` is laid over `user`.
    fn check(user: &str, project: &str, expect: &[&str]) {
        let (_, found) = tighten(
            parse(project),
            &parse(user),
            Path::new("/nonexistent/project"),
            Path::new("/nonexistent/project"),
            None,
        );
        let actual: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(actual, expect);
    }

    #[test]
    fn tighter_values_pass() {
        check(
            "",
            "[limits]\ntimeout = \"5s\"\nmemory = \"64MiB\"\n[sandbox]\nnetwork = \"deny\"\nfilesystem = \"read-only\"\n[policy]\nprofile = \"plan\"\ndisabled = [\"x\"]\n[env]\nallow = [\"PATH\"]\nset = { LC_ALL = \"C\" }\n",
            &[],
        );
    }

    #[test]
    fn looser_limits_are_refused() {
        check(
            "[limits]\nmemory = \"256MiB\"\n",
            "[limits]\nmemory = \"unlimited\"\ntimeout = \"1h\"\nmax_processes = 100\n",
            &[
                "limits.timeout = 1h would loosen the user's 30s; 30s applies",
                "limits.memory = unlimited would loosen the user's 256MiB; 256MiB applies",
            ],
        );
    }

    #[test]
    fn looser_tmpfs_and_syscalls_are_refused() {
        check(
            "[limits]\ntmp_size = \"16MiB\"\n",
            "[limits]\ntmp_size = \"1GiB\"\n[sandbox]\nsyscalls = \"unfiltered\"\n[tools.x]\nsyscalls = \"filter-if-possible\"\n",
            &[
                "limits.tmp_size = 1GiB would loosen the user's 16MiB; 16MiB applies",
                "sandbox.syscalls = \"unfiltered\" would loosen the user's \"filter\"; \"filter\" applies",
                "tools.x.syscalls = \"filter-if-possible\" would loosen the user's \"filter\"; \"filter\" applies",
            ],
        );
    }

    #[test]
    fn looser_sandbox_and_env_are_refused() {
        check(
            "[sandbox]\nnetwork = \"deny\"\nfilesystem = \"project\"\n",
            "[sandbox]\nnetwork = \"allow\"\nfilesystem = \"read-only-if-possible\"\n[env]\nallow = [\"PATH\", \"SECRET_TOKEN\"]\nset = { PATH = \"/evil\", NEW = \"1\" }\n",
            &[
                "env.allow = \"SECRET_TOKEN\" would loosen the user's allow list [\"PATH\", \"HOME\", \"USER\", \"LANG\"]; allow list [\"PATH\", \"HOME\", \"USER\", \"LANG\"] applies",
                "env.set.PATH = \"/evil\" would loosen the user's value passed through by the allow list; value passed through by the allow list applies",
                "sandbox.network = \"any\" would loosen the user's \"none\"; \"none\" applies",
                "sandbox.filesystem = \"read-only-if-possible\" would loosen the user's \"project\"; \"project\" applies",
            ],
        );
    }

    #[test]
    fn a_project_cannot_reveal_nor_turn_the_credential_masks_off() {
        check(
            "[sandbox]\nread_reveal = [\"~/.npmrc\"]\n",
            "[sandbox]\nprofile = \"compat\"\nread_reveal = [\"~/.npmrc\", \"~/.ssh\"]\nread_hide = [\"/srv\"]\n[tools.x]\nread_reveal = [\"~/.aws\"]\n",
            &[
                "sandbox.profile = \"compat\" would loosen the user's \"default\"; \"default\" applies",
                "sandbox.read_reveal = [\"~/.npmrc\", \"~/.ssh\"] would loosen the user's [\"~/.npmrc\"]; [\"~/.npmrc\"] applies",
                "tools.x.read_reveal = [\"~/.aws\"] would loosen the user's [\"~/.npmrc\"]; [\"~/.npmrc\"] applies",
            ],
        );
    }

    #[test]
    fn a_project_cannot_consent_to_replacing_a_hand_written_tool() {
        check(
            "[generator]\nmay_replace = [\"deploy\"]\n",
            "[generator]\nmay_replace = [\"deploy\", \"hello\"]\n",
            &[
                "generator.may_replace = \"hello\" would loosen the user's may_replace [\"deploy\"]; may_replace [\"deploy\"] applies",
            ],
        );
    }

    #[test]
    fn policy_cannot_reenable_or_widen() {
        check(
            "[policy]\ndisabled = [\"deploy\"]\nallowed = [\"deploy\", \"hello\"]\nprofile = \"plan\"\n",
            "[policy]\nallowed = [\"hello\", \"rm\"]\nprofile = \"none\"\n[tools.deploy]\ndisabled = false\ntimeout = \"1s\"\n",
            &[
                "policy.allowed = \"rm\" would loosen the user's allowed list [\"deploy\", \"hello\"]; allowed list [\"deploy\", \"hello\"] applies",
                "policy.profile = \"none\" would loosen the user's \"plan\"; \"plan\" applies",
                "tools.deploy.disabled = false would loosen the user's disabled; disabled applies",
            ],
        );
    }

    #[test]
    fn a_project_may_narrow_a_list_not_widen_it() {
        check(
            "[sandbox]\nnetwork = [\"a.test\", \"b.test:443\"]\nfilesystem = [\"/nonexistent/project/out\", \"/srv/cache\"]\n",
            "[sandbox]\nnetwork = [\"a.test:443\", \"b.test:443\"]\nfilesystem = [\"/srv/cache/x\"]\n[tools.hello]\nnetwork = [\"b.test:80\"]\nfilesystem = [\"/etc\"]\n",
            &[
                "tools.hello.network = [\"b.test:80\"] would loosen the user's [\"a.test\",\"b.test:443\"]; [\"a.test\",\"b.test:443\"] applies",
                "tools.hello.filesystem = [\"/etc\"] would loosen the user's [\"/nonexistent/project/out\",\"/srv/cache\"]; [\"/nonexistent/project/out\",\"/srv/cache\"] applies",
            ],
        );
    }

    #[test]
    fn under_the_default_profile_a_project_adds_no_destination_or_path() {
        check(
            "",
            "[sandbox]\nprofile = \"compat\"\nnetwork = [\"a.test\"]\nfilesystem = [\"/nonexistent/project/out\", \"/home\"]\n[generator]\nnetwork = \"any\"\n",
            &[
                "sandbox.profile = \"compat\" would loosen the user's \"default\"; \"default\" applies",
                "sandbox.network = [\"a.test\"] would loosen the user's \"declared\"; \"declared\" applies",
                "sandbox.filesystem = [\"/nonexistent/project/out\",\"/home\"] would loosen the user's \"project-if-possible\"; \"project-if-possible\" applies",
                "generator.network = any would loosen the user's none; none applies",
            ],
        );
    }

    #[test]
    fn tool_sections_compare_with_the_users() {
        check(
            "[tools.hello]\nnetwork = \"deny\"\n[limits]\ncpu = \"10s\"\n",
            "[tools.hello]\nnetwork = \"deny-if-possible\"\ncpu = \"5s\"\n[tools.other]\ncpu = \"unlimited\"\n",
            &[
                "tools.hello.network = \"deny-if-possible\" would loosen the user's \"none\"; \"none\" applies",
                "tools.other.cpu = unlimited would loosen the user's 10s; 10s applies",
            ],
        );
    }

    #[test]
    fn directories_stay_in_the_project() {
        let user = Options::default();
        let mut project = Options::default();
        project.discovery.dirs = Some(vec![config_dir("tools"), config_dir("/etc")]);
        project.audit = Some(Path::new("/tmp/audit.jsonl").to_path_buf());
        let (tightened, found) = tighten(project, &user, Path::new("/p"), Path::new("/p"), None);
        assert_eq!(
            tightened.discovery.dirs,
            Some(vec![ConfigDir {
                base: ".toolsmith".into(),
                dir: "tools".into()
            }])
        );
        let keys: Vec<&str> = found.iter().map(|found| found.key.as_str()).collect();
        assert_eq!(keys, ["discovery.dirs", "audit.path"]);
    }
}
