//! Sandbox profiles of tool calls: what the operator grants (`[sandbox]`,
//! `[tools.NAME]`), what a tool declares for itself, and the effective
//! profile of a call, which the executor enforces.
//!
//! A tool's declaration can only tighten what the operator grants, never
//! loosen it: on each axis the stricter level wins. How a missing kernel
//! feature is handled is the operator's word alone: a `-if-possible`
//! setting runs the call without the mechanism (and the envelope says so);
//! any other setting fails it closed with `POLICY_DENIED`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde_json::Value;
use toolsmith_executor::{
    AppliedSandbox, Enforcement, Features, Filesystem, Network, Privileges, RunAs, Sandbox,
    Syscalls,
};

use crate::secrets::SecretName;

pub(crate) use crate::access::{FilesystemSetting, NetworkSetting, UnknownSetting};
use crate::access::{GrantSection, narrow_filesystem, narrow_network};
use crate::grant::{NetworkTarget, SandboxDenial};

/// The system-call filter of a call, as the operator writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyscallsSetting {
    /// toolsmith's seccomp filter; the call fails when the kernel cannot install it.
    Filter,
    /// The filter where the kernel allows it, else none (and the envelope says so).
    FilterIfPossible,
    /// No filter: for a tool that needs `ptrace`, namespaces or another denied call.
    Unfiltered,
}

impl SyscallsSetting {
    /// Every value, as written in configuration.
    pub const VALUES: &'static str = "filter, filter-if-possible, unfiltered";

    /// The name used in configuration and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SyscallsSetting::Filter => "filter",
            SyscallsSetting::FilterIfPossible => "filter-if-possible",
            SyscallsSetting::Unfiltered => "unfiltered",
        }
    }

    fn to_executor(self) -> Syscalls {
        match self {
            SyscallsSetting::Filter => Syscalls::Filtered(Enforcement::Required),
            SyscallsSetting::FilterIfPossible => Syscalls::Filtered(Enforcement::IfPossible),
            SyscallsSetting::Unfiltered => Syscalls::Unfiltered,
        }
    }
}

impl FromStr for SyscallsSetting {
    type Err = UnknownSetting;

    fn from_str(text: &str) -> Result<SyscallsSetting, UnknownSetting> {
        [
            SyscallsSetting::Filter,
            SyscallsSetting::FilterIfPossible,
            SyscallsSetting::Unfiltered,
        ]
        .into_iter()
        .find(|setting| setting.as_str() == text)
        .ok_or_else(|| UnknownSetting {
            key: "syscalls",
            value: text.to_owned(),
            expected: SyscallsSetting::VALUES,
            detail: None,
        })
    }
}

impl fmt::Display for SyscallsSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which defaults a grant starts from (`[sandbox] profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SandboxProfile {
    /// Least privilege: writes only below the project, network only to what a tool declares
    /// (public addresses, through the egress proxy), generated tools no network.
    Default,
    /// `profile = "compat"`: toolsmith's behaviour before issue 23, for tools written for a
    /// peer that expect the whole machine (the user's filesystem, the host's network).
    Compat,
}

impl SandboxProfile {
    /// Every value, as written in configuration.
    pub const VALUES: &'static str = "default, compat";

    /// The name used in configuration and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxProfile::Default => "default",
            SandboxProfile::Compat => "compat",
        }
    }

    /// The network a call gets when the operator writes none.
    pub fn network(self) -> NetworkSetting {
        match self {
            SandboxProfile::Default => NetworkSetting::Declared,
            SandboxProfile::Compat => NetworkSetting::Allow,
        }
    }

    /// Where a call may write when the operator writes nothing: the project, and where the
    /// kernel has no Landlock the call runs without it (and the envelope says so), as every
    /// default falls back: a kernel without a mechanism must not stop every tool.
    pub fn filesystem(self) -> FilesystemSetting {
        match self {
            SandboxProfile::Default => FilesystemSetting::ProjectIfPossible,
            SandboxProfile::Compat => FilesystemSetting::Full,
        }
    }

    /// The network of a generated tool when `[generator] network` is not written: none under
    /// the default (a generated tool's declared destinations are a declaration, not a grant).
    pub fn generated_network(self) -> NetworkSetting {
        match self {
            SandboxProfile::Default => NetworkSetting::Deny,
            SandboxProfile::Compat => NetworkSetting::Allow,
        }
    }
}

impl FromStr for SandboxProfile {
    type Err = UnknownSetting;

    fn from_str(text: &str) -> Result<SandboxProfile, UnknownSetting> {
        [SandboxProfile::Default, SandboxProfile::Compat]
            .into_iter()
            .find(|profile| profile.as_str() == text)
            .ok_or_else(|| UnknownSetting {
                key: "profile",
                value: text.to_owned(),
                expected: SandboxProfile::VALUES,
                detail: None,
            })
    }
}

impl fmt::Display for SandboxProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sandbox profile: network, filesystem, system calls and identity. The
/// operator's grant, or the effective profile of a call. Every call runs
/// with no capability whatever the profile.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SandboxSettings {
    /// The profile the defaults come from.
    pub profile: SandboxProfile,
    /// Network access.
    pub network: NetworkSetting,
    /// The network of generated tools (`[generator] network`), in place of `network`.
    pub generated_network: NetworkSetting,
    /// Writable paths.
    pub filesystem: FilesystemSetting,
    /// A private PID namespace and `/proc` for every call, where the kernel
    /// allows (on by default). The kernel then kills what a tool leaves
    /// behind the moment it exits, so the executor has nothing to count:
    /// the generator turns it off for the run that checks for leftovers.
    pub private_pids: bool,
    /// The seccomp filter (on by default). Only the operator sets it; a
    /// tool's declaration does not touch it.
    pub syscalls: SyscallsSetting,
    /// The identity tools run as (`[sandbox] user`), for a root toolsmith;
    /// `None` keeps toolsmith's uid and gid.
    pub user: Option<RunAs>,
}

impl SandboxSettings {
    /// The grant of `profile = "compat"`: the host's network (generated tools' too), the
    /// user's filesystem, the system-call filter, toolsmith's identity without its
    /// capabilities.
    pub fn unrestricted() -> SandboxSettings {
        SandboxSettings::of_profile(SandboxProfile::Compat)
    }

    /// The grant of `profile` with nothing else written.
    pub fn of_profile(profile: SandboxProfile) -> SandboxSettings {
        SandboxSettings {
            profile,
            network: profile.network(),
            generated_network: profile.generated_network(),
            filesystem: profile.filesystem(),
            private_pids: true,
            syscalls: SyscallsSetting::Filter,
            user: None,
        }
    }

    /// What the operator's grant becomes for a tool that declares `declared`, in a project at
    /// `project_dir`: on each axis the intersection of the two (a declared level only
    /// tightens; a `-if-possible` of the operator carries over). A declared destination or
    /// writable path that the grant does not include is refused, each refusal naming the line
    /// to add in `section` (`[tools.NAME]`, or `[generator]` for a generated tool).
    pub fn narrowed_by(
        &self,
        declared: &SandboxDeclaration,
        project_dir: &Path,
        section: &str,
    ) -> Result<SandboxSettings, Vec<SandboxDenial>> {
        let section = GrantSection(section);
        let network = narrow_network(&self.network, declared.network.as_ref(), section);
        let filesystem = narrow_filesystem(
            &self.filesystem,
            declared.filesystem.as_ref(),
            project_dir,
            section,
        );
        match (network, filesystem) {
            (Ok(network), Ok(filesystem)) => Ok(SandboxSettings {
                network,
                filesystem,
                ..self.clone()
            }),
            (network, filesystem) => Err(network
                .err()
                .into_iter()
                .chain(filesystem.err())
                .flatten()
                .collect()),
        }
    }

    /// The executor's sandbox for a call whose project directory is
    /// `project_dir`, with [`protected_paths`] (the defaults and
    /// `protected`) read-only below every writable root. Every call also gets a private PID
    /// namespace and `/proc` when the kernel allows it, unless `private_pids` is off, and
    /// always its own mount, IPC and UTS namespaces where the kernel allows; it
    /// runs with every capability dropped (as `user` when set).
    ///
    /// A destination list, and every public destination, are the egress proxy's
    /// (`Network::Proxy`): a namespace whose only way out is the proxy of the call.
    pub fn to_executor(&self, project_dir: &Path, protected: &[PathBuf]) -> Sandbox {
        let enforcement = |if_possible: bool| {
            if if_possible {
                Enforcement::IfPossible
            } else {
                Enforcement::Required
            }
        };
        let roots = self.filesystem.roots(project_dir);
        Sandbox {
            network: match &self.network {
                NetworkSetting::Allow => Network::Allow,
                NetworkSetting::DenyIfPossible | NetworkSetting::Declared => {
                    Network::Deny(Enforcement::IfPossible)
                }
                NetworkSetting::Deny => Network::Deny(Enforcement::Required),
                NetworkSetting::Only(targets) => {
                    Network::Proxy(NetworkTarget::egress(targets, false))
                }
                NetworkSetting::AnyPublic => Network::Proxy(NetworkTarget::egress(&[], true)),
            },
            filesystem: match &self.filesystem {
                FilesystemSetting::Full => Filesystem::Full,
                FilesystemSetting::Project | FilesystemSetting::ProjectIfPossible => {
                    Filesystem::Project {
                        root: project_dir.to_path_buf(),
                        enforcement: enforcement(self.filesystem.if_possible()),
                    }
                }
                FilesystemSetting::ReadOnly | FilesystemSetting::ReadOnlyIfPossible => {
                    Filesystem::ReadOnly(enforcement(self.filesystem.if_possible()))
                }
                FilesystemSetting::Paths(paths) if paths.is_empty() => {
                    Filesystem::ReadOnly(Enforcement::Required)
                }
                FilesystemSetting::Paths(paths) => Filesystem::Paths {
                    roots: paths.clone(),
                    enforcement: Enforcement::Required,
                },
            },
            private_pids: self.private_pids,
            private_mounts: true,
            private_ipc: true,
            protected: protected_paths(project_dir, &roots, protected),
            privileges: Privileges::Drop(self.user),
            syscalls: self.syscalls.to_executor(),
            // The call's tool cache is set per call (`call/invoke.rs`, `prepare`).
            own_dir: None,
            hidden: Vec::new(),
        }
    }
}

/// The sandbox of every discovery probe (`description`, `config`, `--schema`): the strictest
/// the kernel allows, whatever the tool declares and the operator grants its calls.
///
/// A probe only has to print a description: it gets no network, may write only in its
/// private temporary directory and its tool's own cache (nothing in the project, nothing
/// anywhere else), and sees no other process. Every mechanism is [`Enforcement::IfPossible`], so that a kernel without one
/// does not turn every tool into a problem; what did not apply is in the probe's
/// `AppliedSandbox::relaxed`, and `toolsmith doctor` reports it under "probes".
///
/// The one place the probes' sandbox is built: a new mechanism of the executor's [`Sandbox`]
/// gets its strictest value here (a struct literal, so that the compiler asks for it).
pub(crate) fn probe_sandbox(hidden: Vec<PathBuf>) -> Sandbox {
    Sandbox {
        network: Network::Deny(Enforcement::IfPossible),
        filesystem: Filesystem::ReadOnly(Enforcement::IfPossible),
        private_pids: true,
        private_mounts: true,
        private_ipc: true,
        protected: Vec::new(),
        privileges: Privileges::Drop(None),
        syscalls: Syscalls::Filtered(Enforcement::IfPossible),
        // The probe's tool cache is set per probe (`discovery/probe.rs`, `Probe::record`).
        own_dir: None,
        // The operator's read masks, with no tool's word (`ReadMasks::for_probes`).
        hidden,
    }
}

/// What [`probe_sandbox`] amounts to on a kernel with `features`, as one line, e.g.
/// `probe-sandbox/1 network=deny filesystem=read-only/landlock-abi-6 pids=private`.
///
/// The discovery cache keeps it with every record, and reuses a record only under the same
/// line: a description printed by a probe that had the network (an older toolsmith, a kernel
/// without network namespaces, `TOOLSMITH_DISABLE_FEATURES`) is not trusted by a process
/// whose probes would run without it, and the other way round. Bump [`PROBE_SANDBOX_REVISION`]
/// when [`probe_sandbox`] changes.
pub(crate) fn probe_sandbox_key(features: &Features) -> String {
    let applied = probe_sandbox_applied(features);
    let filesystem = match (applied.filesystem, features.landlock_abi) {
        (FilesystemAccessName::ReadOnly, Some(abi)) => {
            format!("read-only/landlock-abi-{abi}")
        }
        (access, _) => access.as_str().to_owned(),
    };
    format!(
        "probe-sandbox/{PROBE_SANDBOX_REVISION} network={} filesystem={filesystem} pids={}",
        if applied.network_denied {
            "deny"
        } else {
            "allow"
        },
        if applied.private_pids {
            "private"
        } else {
            "shared"
        },
    )
}

/// The revision of [`probe_sandbox`], part of [`probe_sandbox_key`].
///
/// 3: a probe may write its tool's own cache, and its package managers are told to stay
/// offline (issue 26): a description printed without them is not trusted.
pub(crate) const PROBE_SANDBOX_REVISION: u32 = 3;

/// What a mechanism of [`probe_sandbox`] becomes on a kernel with `features`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FilesystemAccessName {
    /// Landlock applied: writes only in the private temporary directory.
    ReadOnly,
    /// No Landlock: as the user may.
    Full,
}

impl FilesystemAccessName {
    fn as_str(self) -> &'static str {
        match self {
            FilesystemAccessName::ReadOnly => "read-only",
            FilesystemAccessName::Full => "full",
        }
    }
}

/// What applies to a probe on a kernel with `features`, and what does not (in the words of
/// `metadata.sandbox.not_enforced`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSandboxReport {
    /// True when probes have no network.
    pub network_denied: bool,
    /// True when probes may write only in their private temporary directory.
    pub read_only: bool,
    /// True when probes have their own PID namespace and `/proc`.
    pub private_pids: bool,
    /// Each mechanism the kernel refused, and why.
    pub not_enforced: Vec<String>,
}

struct ProbeApplied {
    network_denied: bool,
    filesystem: FilesystemAccessName,
    private_pids: bool,
}

fn probe_sandbox_applied(features: &Features) -> ProbeApplied {
    ProbeApplied {
        network_denied: features.network_namespace.available,
        filesystem: if features.landlock.available {
            FilesystemAccessName::ReadOnly
        } else {
            FilesystemAccessName::Full
        },
        private_pids: features.private_proc.available,
    }
}

/// What the probes' sandbox amounts to on a kernel with `features`, for `toolsmith doctor`.
pub fn probe_sandbox_report(features: &Features) -> ProbeSandboxReport {
    let applied = probe_sandbox_applied(features);
    let mut not_enforced = Vec::new();
    if !applied.network_denied {
        not_enforced.push(format!(
            "network = deny not enforced: a network namespace is unavailable ({})",
            features.network_namespace.detail
        ));
    }
    if applied.filesystem != FilesystemAccessName::ReadOnly {
        not_enforced.push(format!(
            "filesystem = read-only not enforced: Landlock is unavailable ({})",
            features.landlock.detail
        ));
    }
    if !applied.private_pids {
        not_enforced.push(format!(
            "a private PID namespace and /proc not enforced ({})",
            features.private_proc.detail
        ));
    }
    ProbeSandboxReport {
        network_denied: applied.network_denied,
        read_only: applied.filesystem == FilesystemAccessName::ReadOnly,
        private_pids: applied.private_pids,
        not_enforced,
    }
}

/// The paths below `project_dir` that stay read-only to `filesystem =
/// "project"` tools, so that a tool cannot loosen its own sandbox or plant
/// code that runs later: the project's `.git` (hooks, `core.fsmonitor`) and
/// `.toolsmith` (configuration, tools), every peer's project directory (tools,
/// Kodelet's `kodelet-tools` and plugins, Nanocoder's skills),
/// and each of `extra` (tool directories, the config file, toolsmith's own state) that is
/// inside the project or one of the writable `roots` (other than the project or root
/// itself). Paths that do not exist are listed too: the executor seals their nearest existing
/// directory, so that a tool cannot create them.
pub fn protected_paths(project_dir: &Path, roots: &[PathBuf], extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths = vec![project_dir.join(".git"), project_dir.join(".toolsmith")];
    for peer in crate::layer::Peer::ALL {
        paths.extend(
            peer.project_dirs()
                .into_iter()
                .map(|dir| project_dir.join(dir)),
        );
    }
    let inside = |path: &Path| {
        std::iter::once(project_dir)
            .chain(roots.iter().map(PathBuf::as_path))
            .any(|root| path.starts_with(root) && path != root)
    };
    paths.extend(extra.iter().filter(|path| inside(path)).cloned());
    // A directory inside a protected one is covered by it.
    let mut kept: Vec<PathBuf> = Vec::new();
    for path in paths {
        if !kept.iter().any(|other| path.starts_with(other)) {
            kept.retain(|other| !other.starts_with(&path));
            kept.push(path);
        }
    }
    kept
}

/// What a tool declares about its own sandbox (`"sandbox": {"network":
/// "deny", "filesystem": "read-only"}` in its description, schema or
/// manifest frontmatter). It can only tighten the operator's grant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SandboxDeclaration {
    /// `none`, `any` or a list of destinations, if declared.
    pub network: Option<NetworkSetting>,
    /// `full`, `project`, `read-only` or a list of writable paths, if declared.
    pub filesystem: Option<FilesystemSetting>,
    /// Paths the tool asks to have hidden from it (`read_hide`, absolute or `~/...`).
    pub read_hide: Vec<PathBuf>,
    /// Paths the tool needs to read although they are masked by default (`read_reveal`):
    /// the call is `POLICY_DENIED` unless the operator reveals them for it.
    pub read_reveal: Vec<PathBuf>,
    /// The secrets the tool needs (`"secrets": ["GITHUB_TOKEN"]`): a need made visible, never
    /// a grant. A call of a tool that declares a secret the operator did not grant it fails
    /// with `POLICY_DENIED` naming the key to add.
    pub secrets: Vec<SecretName>,
}

/// Why a tool's `sandbox` declaration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxDeclarationError {
    /// `sandbox` is not an object.
    #[error("`sandbox` must be an object such as {{\"network\": \"deny\"}}")]
    NotAnObject,
    /// A key other than `network`, `filesystem`, `read_hide`, `read_reveal` and `secrets`.
    #[error(
        "`sandbox.{key}` is not a sandbox setting (expected network, filesystem, read_hide, read_reveal or secrets)"
    )]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// A value outside the closed set a tool may declare.
    #[error("`sandbox.{key}` must be one of {expected}, not {found}")]
    InvalidValue {
        /// `network` or `filesystem`.
        key: &'static str,
        /// The values a tool may declare.
        expected: &'static str,
        /// What was found, as JSON.
        found: String,
    },
}

impl SandboxDeclaration {
    /// Parses the `sandbox` value of a description, schema or frontmatter
    /// (converted to JSON). A tool declares levels (`"any"`/`"none"` and their aliases
    /// `"allow"`/`"deny"`; `"full"`/`"project"`/`"read-only"`) or lists (destinations,
    /// writable paths); whether a level may be relaxed on a kernel without the mechanism is
    /// the operator's decision, so the `-if-possible` forms are not a tool's to declare.
    pub fn from_json(value: &Value) -> Result<SandboxDeclaration, SandboxDeclarationError> {
        let Value::Object(object) = value else {
            return Err(SandboxDeclarationError::NotAnObject);
        };
        let mut declaration = SandboxDeclaration::default();
        for (key, value) in object {
            let invalid =
                |key: &'static str, expected: &'static str| SandboxDeclarationError::InvalidValue {
                    key,
                    expected,
                    found: value.to_string(),
                };
            match key.as_str() {
                "network" => {
                    const EXPECTED: &str =
                        "\"none\", \"any\" (or \"deny\", \"allow\"), a list of destinations";
                    let setting = NetworkSetting::from_json(value)
                        .ok()
                        .filter(|setting| *setting != NetworkSetting::DenyIfPossible)
                        .ok_or_else(|| invalid("network", EXPECTED))?;
                    declaration.network = Some(setting);
                }
                "filesystem" => {
                    const EXPECTED: &str =
                        "\"full\", \"project\", \"read-only\", a list of absolute writable paths";
                    let setting = FilesystemSetting::from_json(value)
                        .ok()
                        .filter(|setting| !setting.if_possible())
                        .ok_or_else(|| invalid("filesystem", EXPECTED))?;
                    declaration.filesystem = Some(setting);
                }
                "read_hide" => declaration.read_hide = declared_paths("read_hide", value)?,
                "read_reveal" => declaration.read_reveal = declared_paths("read_reveal", value)?,
                "secrets" => declaration.secrets = declared_secrets(value)?,
                _ => {
                    return Err(SandboxDeclarationError::UnknownKey { key: key.clone() });
                }
            }
        }
        Ok(declaration)
    }

    /// The declaration as a tool writes it (`{"network": [...], "filesystem": "project"}`),
    /// for `show` and `list --json`.
    pub fn to_json(&self) -> Value {
        let mut object = serde_json::Map::new();
        if let Some(network) = &self.network {
            object.insert("network".to_owned(), network.to_json());
        }
        if let Some(filesystem) = &self.filesystem {
            object.insert("filesystem".to_owned(), filesystem.to_json());
        }
        for (key, paths) in [
            ("read_hide", &self.read_hide),
            ("read_reveal", &self.read_reveal),
        ] {
            if !paths.is_empty() {
                let paths = paths
                    .iter()
                    .map(|path| Value::from(path.display().to_string()));
                object.insert(key.to_owned(), Value::Array(paths.collect()));
            }
        }
        if !self.secrets.is_empty() {
            let names = self.secrets.iter().map(|name| Value::from(name.as_str()));
            object.insert("secrets".to_owned(), Value::Array(names.collect()));
        }
        Value::Object(object)
    }

    /// True when the tool declares nothing.
    pub fn is_empty(&self) -> bool {
        self.network.is_none()
            && self.filesystem.is_none()
            && self.read_hide.is_empty()
            && self.read_reveal.is_empty()
            && self.secrets.is_empty()
    }
}

/// A declared list of paths: each absolute, or `~/...` (toolsmith's `$HOME`).
fn declared_paths(
    key: &'static str,
    value: &Value,
) -> Result<Vec<PathBuf>, SandboxDeclarationError> {
    let invalid = || SandboxDeclarationError::InvalidValue {
        key,
        expected: "a list of absolute or ~/ paths",
        found: value.to_string(),
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let Value::Array(items) = value else {
        return Err(invalid());
    };
    items
        .iter()
        .map(|item| {
            let text = item.as_str().ok_or_else(invalid)?;
            let path = match (text.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => home.join(rest),
                (Some(_), None) => return Err(invalid()),
                (None, _) => PathBuf::from(text),
            };
            if path.is_absolute() {
                Ok(path)
            } else {
                Err(invalid())
            }
        })
        .collect()
}

/// The `secrets` of a declaration: a list of distinct secret names.
fn declared_secrets(value: &Value) -> Result<Vec<SecretName>, SandboxDeclarationError> {
    let invalid = || SandboxDeclarationError::InvalidValue {
        key: "secrets",
        expected: "a list of environment variable names such as [\"GITHUB_TOKEN\"]",
        found: value.to_string(),
    };
    let Value::Array(items) = value else {
        return Err(invalid());
    };
    let mut names: Vec<SecretName> = Vec::with_capacity(items.len());
    for item in items {
        let name = item
            .as_str()
            .and_then(|text| SecretName::new(text).ok())
            .ok_or_else(invalid)?;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

/// The envelope's `metadata.sandbox`: what isolation applied to a call (when it ran), the
/// secrets it received (names), and what was refused to it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SandboxReport {
    /// What applied, when the call ran; `None` when it was refused before it started.
    #[serde(flatten)]
    pub applied: Option<AppliedReport>,
    /// The names of the secrets the call received, never their values.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// What was refused to the call, each with the config key that would grant it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<SandboxDenial>,
    /// Every connection the tool asked toolsmith's egress proxy for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<crate::call::egress::EgressRecord>,
}

impl SandboxReport {
    /// The report of a call refused before it started, for `denied`.
    pub fn refused(denied: Vec<SandboxDenial>) -> SandboxReport {
        SandboxReport {
            applied: None,
            secrets: Vec::new(),
            denied,
            egress: Vec::new(),
        }
    }
}

/// What isolation applied to a call that ran.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AppliedReport {
    /// `allow`, `deny` or `proxy` (a network namespace whose only way out is the call's
    /// egress proxy): what applied, not what was asked.
    pub network: &'static str,
    /// `full`, `project` or `read-only`: what applied.
    pub filesystem: &'static str,
    /// True when the tool had its own PID namespace and `/proc`, so it could
    /// see no other process.
    pub pid_namespace: bool,
    /// True when the tool had its own mount namespace: read-only `/sys` and
    /// cgroups, a minimal `/dev`, `nodev` everywhere, and under `project` and
    /// `read-only` read-only mounts and a capped tmpfs TMPDIR.
    pub mount_namespace: bool,
    /// True when the tool had its own IPC and UTS namespaces: its SysV
    /// objects died with it and the host's were out of sight.
    pub ipc_namespace: bool,
    /// `none` when the tool started without any capability, else `inherited`.
    pub capabilities: &'static str,
    /// `filtered` when the system-call filter applied, else `unfiltered`.
    pub syscalls: &'static str,
    /// The `uid:gid` the tool ran as, when `[sandbox] user` switched it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// How many paths were hidden from the tool (credentials, toolsmith's own state,
    /// `read_hide`; see docs/security.md, "Read masks"): `read_reveal` is the grant. Absent
    /// when nothing was hidden.
    #[serde(skip_serializing_if = "is_zero")]
    pub hidden: usize,
    /// What a `-if-possible` setting could not enforce on this kernel, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_enforced: Vec<String>,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

impl SandboxReport {
    /// The report of what the executor applied.
    pub fn from_applied(applied: &AppliedSandbox) -> SandboxReport {
        SandboxReport {
            applied: Some(AppliedReport::from_applied(applied)),
            secrets: Vec::new(),
            denied: Vec::new(),
            egress: Vec::new(),
        }
    }
}

impl AppliedReport {
    fn from_applied(applied: &AppliedSandbox) -> AppliedReport {
        AppliedReport {
            network: match (applied.egress_proxy, applied.network_denied) {
                (true, _) => "proxy",
                (false, true) => "deny",
                (false, false) => "allow",
            },
            filesystem: applied.filesystem.as_str(),
            pid_namespace: applied.private_pids,
            mount_namespace: applied.private_mounts,
            ipc_namespace: applied.private_ipc,
            capabilities: if applied.capabilities_dropped {
                "none"
            } else {
                "inherited"
            },
            syscalls: if applied.syscall_filter {
                "filtered"
            } else {
                "unfiltered"
            },
            user: applied.run_as.map(|run_as| run_as.to_string()),
            hidden: applied.hidden,
            not_enforced: applied.relaxed.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use std::path::{Path, PathBuf};

    use crate::access::{FilesystemSetting, NetworkSetting};
    use crate::sandbox::{SandboxDeclaration, SandboxSettings, protected_paths};

    #[test]
    fn protected_paths_are_the_defaults_and_what_lies_inside_the_project() {
        let project = Path::new("/work/project");
        let extra = [
            project.join(".toolsmith/tools"),
            project.join("tools"),
            project.join("toolsmith.toml"),
            PathBuf::from("/elsewhere/tools"),
            project.to_path_buf(),
        ];
        let expect: Vec<PathBuf> = [
            ".git",
            ".toolsmith",
            ".kodelet/tools",
            "kodelet-tools",
            ".kodelet/plugins",
            ".ikigai/tools",
            ".nanocoder/tools",
            ".nanocoder/skills",
            "tools",
            "toolsmith.toml",
        ]
        .iter()
        .map(|path| project.join(path))
        .collect();
        assert_eq!(protected_paths(project, &[], &extra), expect);
    }

    fn check(grant: (&str, &str), declared: serde_json::Value, expect: (&str, &str)) {
        let grant = SandboxSettings {
            network: grant.0.parse().unwrap(),
            filesystem: grant.1.parse().unwrap(),
            ..SandboxSettings::unrestricted()
        };
        let declared = SandboxDeclaration::from_json(&declared).unwrap();
        let effective = grant
            .narrowed_by(&declared, Path::new("/work/p"), "[tools.t]")
            .unwrap();
        assert_eq!(
            (
                effective.network.to_string().as_str(),
                effective.filesystem.to_string().as_str()
            ),
            expect
        );
    }

    #[test]
    fn a_declaration_tightens() {
        check(
            ("allow", "full"),
            json!({"network": "deny"}),
            ("none", "full"),
        );
        check(
            ("allow", "full"),
            json!({"filesystem": "read-only"}),
            ("any", "read-only"),
        );
        check(
            ("allow", "project"),
            json!({"filesystem": "read-only"}),
            ("any", "read-only"),
        );
    }

    #[test]
    fn a_declaration_never_loosens() {
        check(
            ("deny", "read-only"),
            json!({"network": "allow", "filesystem": "full"}),
            ("none", "read-only"),
        );
        check(
            ("deny", "read-only"),
            json!({"filesystem": "project"}),
            ("none", "read-only"),
        );
        check(
            ("deny-if-possible", "full"),
            json!({}),
            ("deny-if-possible", "full"),
        );
    }

    #[test]
    fn the_operators_if_possible_carries_over() {
        check(
            ("deny-if-possible", "project-if-possible"),
            json!({"network": "deny", "filesystem": "read-only"}),
            ("deny-if-possible", "read-only-if-possible"),
        );
        check(
            ("allow", "project-if-possible"),
            json!({"filesystem": "project"}),
            ("any", "project-if-possible"),
        );
    }

    #[test]
    fn settings_parse_and_refuse() {
        assert_eq!(
            "deny-if-possible".parse(),
            Ok(NetworkSetting::DenyIfPossible)
        );
        assert_eq!("read-only".parse(), Ok(FilesystemSetting::ReadOnly));
        assert_eq!("none".parse(), Ok(NetworkSetting::Deny));
        assert_eq!(
            "off".parse::<NetworkSetting>().unwrap_err().to_string(),
            "unknown network setting `off` (expected one of none, any, deny-if-possible (or the aliases deny and allow), or a list of destinations)"
        );
    }

    #[test]
    fn declarations_are_strict() {
        let refuse = |value: serde_json::Value| {
            SandboxDeclaration::from_json(&value)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refuse(json!({"network": "deny-if-possible"})),
            "`sandbox.network` must be one of \"none\", \"any\" (or \"deny\", \"allow\"), a list of destinations, not \"deny-if-possible\""
        );
        assert_eq!(
            refuse(json!({"net": "deny"})),
            "`sandbox.net` is not a sandbox setting (expected network, filesystem, read_hide, read_reveal or secrets)"
        );
        assert_eq!(
            refuse(json!("deny")),
            "`sandbox` must be an object such as {\"network\": \"deny\"}"
        );
    }
}
