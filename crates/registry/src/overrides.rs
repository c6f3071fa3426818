//! Per-tool overrides of the operator (`[tools.NAME]`) and the effective limits and environment of a call.
//!
//! The limits of a call to a tool, highest precedence first:
//! 1. the tool's [`ToolOverride`] (which the CLI builds from the `run` flags above `[tools.NAME]`);
//! 2. the timeout the tool requests for itself, capped by [`RunConfig::max_timeout`] (timeout only);
//! 3. [`RunConfig::limits`] (the CLI's environment variables above `[limits]` above the defaults).
//!
//! An override's timeout beats the tool's own request because it is the operator's decision about
//! this very tool, while `[limits] timeout` is a default for tools that ask for nothing.
//! Overrides apply to calls only: discovery probes keep their own timeout and output cap.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use toolsmith_executor::Limits;

use crate::access::{FilesystemSetting, NetworkSetting};
use crate::grant::SandboxDenial;
use crate::limit_keys::{LimitKind, limit_kind};
use crate::masks::{ReadMasks, RevealDenied};
use crate::name::ToolName;
use crate::project_trust::ProjectGate;
use crate::sandbox::{SandboxSettings, SyscallsSetting};
use crate::secrets::{SecretName, Secrets};
use crate::tool::Tool;

/// How tool processes are run, for probes and calls alike.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The working directory of every tool process; must be absolute.
    pub cwd: PathBuf,
    /// The exact environment of every tool process, usually from
    /// [`filtered_env`](toolsmith_executor::filtered_env).
    pub env: Vec<(OsString, OsString)>,
    /// The resource limits of a call. Probes use them with their own timeout
    /// and output cap. `limits.timeout` is the default timeout: it applies to
    /// tools that ask for none.
    pub limits: Limits,
    /// The longest timeout a tool may ask for (Kodelet's `config`, a
    /// manifest's `timeout_ms`).
    ///
    /// Precedence of timeouts, decided in [`RunConfig::call_config`]: the
    /// operator's explicit word for this tool (an entry in `overrides`, which
    /// is where the CLI puts `run --timeout` and `[tools.NAME] timeout`) wins
    /// outright; otherwise a tool's request replaces `limits.timeout` (longer
    /// or shorter: the author knows how long the tool needs), capped by
    /// `max_timeout`; otherwise `limits.timeout` applies.
    pub max_timeout: Duration,
    /// The operator's per-tool overrides of limits and environment, which
    /// [`RunConfig::call_config`] applies.
    pub overrides: BTreeMap<ToolName, ToolOverride>,
    /// The operator's sandbox for every tool (`[sandbox]`), which a tool's
    /// override replaces and a tool's declaration tightens. Discovery probes never run
    /// under it: they get the strictest sandbox the kernel allows, whatever this grants.
    pub sandbox: SandboxSettings,
    /// The directory a `filesystem = "project"` tool may write in: the
    /// project (see [`project_dir`](crate::discovery::layers::project_dir)).
    pub project_dir: PathBuf,
    /// Paths that stay read-only to `filesystem = "project"` tools besides
    /// the project's `.git`, `.toolsmith` and peers' tool directories: the
    /// tool directories and the config file, those inside the project count
    /// (see [`protected_paths`](crate::sandbox::protected_paths)).
    pub protected: Vec<PathBuf>,
    /// Whether the project's layers (`Layer::Project`, `Layer::PeerProject`) may still be
    /// read, asked at every scan and before every call of one of their tools; `None` when
    /// they are read unchecked (the caller left untrusted projects out of the layers).
    pub project_gate: Option<ProjectGate>,
    /// The directory holding each tool's own cache (`$XDG_CACHE_HOME/toolsmith/tool-cache`,
    /// see [`ToolCache`](crate::ToolCache)), writable to that tool's probes and calls alone;
    /// `None` gives tools no cache.
    pub tool_caches: Option<PathBuf>,
    /// The read masks of every call and probe (see [`ReadMasks`]).
    pub read_masks: ReadMasks,
    /// The secrets the operator defined (`[secrets.NAME]`); a call receives only those its
    /// tool's override grants ([`ToolOverride::secrets`]), and nothing else ever does.
    pub secrets: Arc<Secrets>,
}

/// Defines [`ToolOverride`] from the rows of [`with_limit_keys!`](crate::with_limit_keys):
/// one field per executor limit (the rows `in: Limits`), then the settings that are no limit,
/// and [`ToolOverride::over`], which lays the limit fields over a call's limits.
macro_rules! tool_override {
    ({} $($rows:tt)*) => {
        tool_override!(@rows [] [] $($rows)*);
    };
    (@rows [$($field:tt)*] [$($key:ident)*]
        $(#[doc = $doc:literal])*
        $name:ident: $kind:ident, loosens: $loosens:ident, in: Limits,
            tool: $tool:tt, env: $env:tt, doctor: $rank:literal;
        $($rest:tt)*
    ) => {
        tool_override!(@rows [$($field)*
            $(#[doc = $doc])*
            pub $name: Option<<limit_kind::$kind as LimitKind>::Value>,
        ] [$($key)* $name] $($rest)*);
    };
    (@rows [$($field:tt)*] [$($key:ident)*]
        $(#[doc = $doc:literal])*
        $name:ident: $kind:ident, loosens: $loosens:ident, in: RunConfig($default:expr),
            tool: $tool:tt, env: $env:tt, doctor: $rank:literal;
        $($rest:tt)*
    ) => {
        tool_override!(@rows [$($field)*] [$($key)*] $($rest)*);
    };
    (@rows [$($field:tt)*] [$($key:ident)*]) => {
        /// What the operator sets for one tool; `None` leaves a value to [`RunConfig`].
        ///
        /// For the limits that can be lifted, `Some(None)` means unlimited. The limit fields
        /// are those of the limit keys' one declaration ([`with_limit_keys!`](crate::with_limit_keys)).
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct ToolOverride {
            $($field)*
            /// The exact environment of the tool's processes, replacing [`RunConfig::env`].
            pub env: Option<Vec<(OsString, OsString)>>,
            /// Network access, replacing [`RunConfig::sandbox`]'s for this tool.
            pub network: Option<NetworkSetting>,
            /// Writable paths, replacing [`RunConfig::sandbox`]'s for this tool.
            pub filesystem: Option<FilesystemSetting>,
            /// The system-call filter, replacing [`RunConfig::sandbox`]'s for this tool.
            pub syscalls: Option<SyscallsSetting>,
            /// Paths hidden from this tool on top of [`RunConfig::read_masks`] (`read_hide`).
            pub read_hide: Vec<PathBuf>,
            /// Paths taken out of this tool's masks (`read_reveal`); never toolsmith's own state.
            pub read_reveal: Vec<PathBuf>,
            /// The secrets granted to this tool (`[tools.NAME] secrets`), each delivered to its calls
            /// as an environment variable of its name. Never part of [`ToolOverride::for_generated`]:
            /// a generated tool receives no secret by its name alone.
            pub secrets: Vec<SecretName>,
            /// What applies instead when the tool of this name is a generated one: only what the
            /// caller set for this very call (`toolsmith run NAME --timeout 5s`), never the operator's
            /// `[tools.NAME]`, which meant another tool (issue 25, finding 5).
            pub for_generated: Option<Box<ToolOverride>>,
        }

        impl ToolOverride {
            /// `limits` with every limit this override sets laid over it.
            pub fn over(&self, mut limits: Limits) -> Limits {
                $(
                    if let Some(value) = self.$key {
                        limits.$key = value;
                    }
                )*
                limits
            }
        }
    };
}

with_limit_keys! { tool_override {} }

/// Where the timeout of a call comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutSource {
    /// The operator's override for this tool.
    Override,
    /// The tool asked for `requested`; the call gets it, capped by `ceiling`.
    Requested {
        /// What the tool asked for.
        requested: Duration,
        /// The operator's ceiling, [`RunConfig::max_timeout`].
        ceiling: Duration,
    },
    /// The configured limits: the tool asked for nothing and has no override.
    Configured,
}

/// How one call to a tool is run.
#[derive(Debug, Clone, PartialEq)]
pub struct CallConfig {
    /// The limits of the call.
    pub limits: Limits,
    /// Where `limits.timeout` comes from.
    pub timeout_source: TimeoutSource,
    /// The exact environment of the call.
    pub env: Vec<(OsString, OsString)>,
    /// The effective sandbox: the operator's grant for the tool, narrowed
    /// by what the tool declares (the grant itself when `denied` is not empty).
    pub sandbox: SandboxSettings,
    /// The paths the call hides, or the `read_reveal` the tool declares beyond the
    /// operator's grant (the call is then `POLICY_DENIED`).
    pub hidden: Result<Vec<PathBuf>, RevealDenied>,
    /// The secrets the operator granted to the tool (none for a generated tool).
    pub secrets: Vec<SecretName>,
    /// What the tool declares and the operator does not grant, each naming the line to add:
    /// when not empty, the call is refused with `POLICY_DENIED` before it starts.
    pub denied: Vec<SandboxDenial>,
}

impl RunConfig {
    /// The limits and environment of a call to `tool`.
    ///
    /// A generated tool ([`Tool::generated`]) gets no override but the call's own
    /// ([`ToolOverride::for_generated`]): `[tools.NAME]` is the operator's word about the tool
    /// they meant, and a tool an agent generated under that name is not it (issue 25, finding
    /// 5). It runs under the configuration of every tool.
    pub fn call_config(&self, tool: &Tool) -> CallConfig {
        let tool_override = self.tool_override(tool);
        let mut limits = self.limits.clone();
        let timeout_source = match (
            tool_override.and_then(|tool_override| tool_override.timeout),
            tool.requested_timeout(),
        ) {
            (Some(timeout), _) => {
                limits.timeout = timeout;
                TimeoutSource::Override
            }
            (None, Some(requested)) => {
                limits.timeout = requested.min(self.max_timeout);
                TimeoutSource::Requested {
                    requested,
                    ceiling: self.max_timeout,
                }
            }
            (None, None) => TimeoutSource::Configured,
        };
        // A generated tool's network is `[generator] network`: what it declares (its tests'
        // destinations among them) is a declaration, never a grant.
        let network = if tool.generated() {
            &self.sandbox.generated_network
        } else {
            &self.sandbox.network
        };
        let grant = SandboxSettings {
            network: tool_override
                .and_then(|tool_override| tool_override.network.clone())
                .unwrap_or_else(|| network.clone()),
            filesystem: tool_override
                .and_then(|tool_override| tool_override.filesystem.clone())
                .unwrap_or_else(|| self.sandbox.filesystem.clone()),
            syscalls: tool_override
                .and_then(|tool_override| tool_override.syscalls)
                .unwrap_or(self.sandbox.syscalls),
            ..self.sandbox.clone()
        };
        let section = if tool.generated() {
            "[generator]".to_owned()
        } else {
            format!("[tools.{}]", tool.name())
        };
        let (sandbox, denied) = match grant.narrowed_by(tool.sandbox(), &self.project_dir, &section)
        {
            Ok(sandbox) => (sandbox, Vec::new()),
            Err(denied) => (grant, denied),
        };
        let hidden = self.read_masks.for_call(
            tool.name().as_str(),
            tool_override.map_or(&[], |tool_override| &tool_override.read_hide),
            tool_override.map_or(&[], |tool_override| &tool_override.read_reveal),
            &tool.sandbox().read_hide,
            &tool.sandbox().read_reveal,
        );
        let Some(tool_override) = tool_override else {
            return CallConfig {
                limits,
                timeout_source,
                env: self.env.clone(),
                sandbox,
                hidden,
                secrets: Vec::new(),
                denied,
            };
        };
        let limits = tool_override.over(limits);
        CallConfig {
            limits,
            timeout_source,
            env: tool_override
                .env
                .clone()
                .unwrap_or_else(|| self.env.clone()),
            sandbox,
            hidden,
            secrets: tool_override.secrets.clone(),
            denied,
        }
    }
}

impl RunConfig {
    /// The operator's override that applies to `tool`: its `[tools.NAME]`, or for a generated
    /// tool only the call's own ([`ToolOverride::for_generated`]).
    fn tool_override(&self, tool: &Tool) -> Option<&ToolOverride> {
        let tool_override = self.overrides.get(tool.name());
        if tool.generated() {
            tool_override.and_then(|tool_override| tool_override.for_generated.as_deref())
        } else {
            tool_override
        }
    }

    /// The secrets the operator granted to `tool` (`[tools.NAME] secrets`); none for a
    /// generated tool, whatever its name.
    pub fn granted_secrets(&self, tool: &Tool) -> &[SecretName] {
        self.tool_override(tool)
            .map_or(&[], |tool_override| tool_override.secrets.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::time::Duration;

    use toolsmith_executor::Limits;

    use crate::formats::annotations::Annotations;
    use crate::formats::format::Runner;
    use crate::layer::Layer;
    use crate::name::ToolName;
    use crate::overrides::RunConfig;
    use crate::overrides::{TimeoutSource, ToolOverride};
    use crate::sandbox::{SandboxDeclaration, SandboxSettings};
    use crate::schema::InputSchema;
    use crate::secrets::SecretName;
    use crate::tool::Tool;
    use crate::tool::ToolParts;

    fn tool(requested: Option<u64>) -> Tool {
        Tool::from_parts(parts(requested))
    }

    fn parts(requested: Option<u64>) -> ToolParts {
        ToolParts {
            name: ToolName::new("demo").unwrap(),
            description: "d".to_owned(),
            input_schema: InputSchema::new(serde_json::json!({"type": "object"})).unwrap(),
            output_schema: None,
            annotations: Annotations::undeclared(),
            requested_timeout: requested.map(Duration::from_secs),
            config_pending: false,
            sandbox: SandboxDeclaration::default(),
            path: PathBuf::from("/tools/demo"),
            source: PathBuf::from("/tools"),
            layer: Layer::Explicit,
            tests: Vec::new(),
            runner: Runner::Kodelet,
            env_arguments: false,
        }
    }

    /// Checks the timeout and memory of a call with the configured timeout
    /// 30 s, memory 1 GiB and ceiling 60 s.
    fn check(
        tool_override: Option<ToolOverride>,
        requested: Option<u64>,
        expect: (u64, TimeoutSource, Option<u64>),
    ) {
        let mut limits = Limits::recommended();
        limits.timeout = Duration::from_secs(30);
        limits.memory = Some(1 << 30);
        let mut overrides = BTreeMap::new();
        if let Some(tool_override) = tool_override {
            overrides.insert(ToolName::new("demo").unwrap(), tool_override);
        }
        let config = RunConfig {
            cwd: PathBuf::from("/"),
            env: Vec::new(),
            limits,
            max_timeout: Duration::from_secs(60),
            overrides,
            sandbox: SandboxSettings::unrestricted(),
            project_dir: PathBuf::from("/"),
            protected: Vec::new(),
            project_gate: None,
            tool_caches: None,
            read_masks: crate::masks::ReadMasks::none(),
            secrets: Default::default(),
        };
        let call = config.call_config(&tool(requested));
        assert_eq!(
            (call.limits.timeout, call.timeout_source, call.limits.memory),
            (Duration::from_secs(expect.0), expect.1, expect.2)
        );
    }

    /// Issue 23: `[tools.NAME] secrets` binds to the hand-written tool the operator meant; a
    /// generated tool of that name (its ref in `.history.git` beside it) gets no secret, even
    /// when the call's own flags apply to it.
    #[test]
    fn a_generated_tool_is_granted_no_secret_by_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let name = ToolName::new("demo").unwrap();
        let grant = ToolOverride {
            secrets: vec![SecretName::new("GITHUB_TOKEN").unwrap()],
            for_generated: Some(Box::default()),
            ..ToolOverride::default()
        };
        let config = RunConfig {
            cwd: PathBuf::from("/"),
            env: Vec::new(),
            limits: Limits::recommended(),
            max_timeout: Duration::from_secs(60),
            overrides: BTreeMap::from([(name.clone(), grant)]),
            sandbox: SandboxSettings::unrestricted(),
            project_dir: PathBuf::from("/"),
            protected: Vec::new(),
            project_gate: None,
            tool_caches: None,
            read_masks: crate::masks::ReadMasks::none(),
            secrets: Default::default(),
        };
        let at = |path: PathBuf| {
            Tool::from_parts(ToolParts {
                path,
                ..parts(None)
            })
        };
        let hand_written = at(dir.path().join("demo"));
        assert_eq!(
            config.granted_secrets(&hand_written),
            [SecretName::new("GITHUB_TOKEN").unwrap()]
        );
        std::fs::create_dir_all(dir.path().join(".history.git/refs/tools")).unwrap();
        std::fs::write(dir.path().join(".history.git/refs/tools/demo"), "0\n").unwrap();
        let generated = at(dir.path().join("demo"));
        assert!(generated.generated());
        assert!(config.granted_secrets(&generated).is_empty());
        assert!(config.call_config(&generated).secrets.is_empty());
    }

    #[test]
    fn configured_limits_without_request_or_override() {
        check(None, None, (30, TimeoutSource::Configured, Some(1 << 30)));
    }

    #[test]
    fn request_beats_configured_timeout_up_to_the_ceiling() {
        let requested = |requested| TimeoutSource::Requested {
            requested: Duration::from_secs(requested),
            ceiling: Duration::from_secs(60),
        };
        check(None, Some(45), (45, requested(45), Some(1 << 30)));
        check(None, Some(600), (60, requested(600), Some(1 << 30)));
        check(None, Some(5), (5, requested(5), Some(1 << 30)));
    }

    #[test]
    fn override_beats_request_and_configured_limits() {
        let tool_override = ToolOverride {
            timeout: Some(Duration::from_secs(2)),
            memory: Some(None),
            ..ToolOverride::default()
        };
        check(
            Some(tool_override),
            Some(45),
            (2, TimeoutSource::Override, None),
        );
    }

    #[test]
    fn override_without_timeout_keeps_the_request() {
        let tool_override = ToolOverride {
            memory: Some(Some(1 << 20)),
            ..ToolOverride::default()
        };
        check(
            Some(tool_override),
            Some(45),
            (
                45,
                TimeoutSource::Requested {
                    requested: Duration::from_secs(45),
                    ceiling: Duration::from_secs(60),
                },
                Some(1 << 20),
            ),
        );
    }
}
