//! The config file's format: the `Raw*` structs it deserializes into, whose doc comments are the user's reference.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::de::{self, Deserializer, Visitor};

/// A number or a string in the file; units are parsed after deserializing so
/// that errors can name the key.
#[derive(Debug, Clone)]
pub(super) struct Scalar(pub(super) String);

impl<'de> serde::Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Scalar, D::Error> {
        struct ScalarVisitor;
        impl Visitor<'_> for ScalarVisitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a string such as \"30s\" or \"512MiB\"")
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Scalar, E> {
                Ok(Scalar(value.to_string()))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Scalar, E> {
                Ok(Scalar(value.to_string()))
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Scalar, E> {
                Ok(Scalar(value.to_string()))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Scalar, E> {
                Ok(Scalar(value.to_owned()))
            }
        }
        deserializer.deserialize_any(ScalarVisitor)
    }
}

/// A string or a list of strings in the file (`network`, `filesystem`), kept as JSON so that
/// the registry parses configuration and tool declarations with one function.
#[derive(Debug, Clone)]
pub(super) struct Grant(pub(super) serde_json::Value);

impl<'de> serde::Deserialize<'de> for Grant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Grant, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Written {
            One(String),
            List(Vec<String>),
        }
        let written = Written::deserialize(deserializer).map_err(|_| {
            de::Error::custom("expected a string such as \"none\" or a list of strings")
        })?;
        Ok(Grant(match written {
            Written::One(text) => serde_json::Value::from(text),
            Written::List(entries) => serde_json::Value::from(entries),
        }))
    }
}

/// A string or a list of strings, in the schema.
impl schemars::JsonSchema for Grant {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Grant".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [{ "type": "string" }, { "type": "array", "items": { "type": "string" } }]
        })
    }
}

/// A number or a string, in the schema.
impl schemars::JsonSchema for Scalar {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Scalar".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": ["number", "string"] })
    }
}

// The doc comments of the `Raw*` structs and their fields are the user's
// reference: `docs/config.md` is generated from the schema derived from them
// (`cargo xtask codegen`), so write them for someone configuring toolsmith.
// A new section is a field of `RawFile` and a documented `Raw*` struct. `[limits]` and the
// limits of `[tools.NAME]` are expanded from the limit keys' one declaration (`raw_sections!`).

/// Expands the rows of `toolsmith_registry::with_limit_keys!` into the file's [`RawLimits`]
/// (every key, documented by its row) and [`RawTool`] (the keys whose row has a `tool:` doc,
/// then a section's other settings).
macro_rules! raw_sections {
    (@raw_tool [$($field:tt)*] $key:ident none $($rest:tt)*) => {
        raw_sections!(@raw_tool [$($field)*] $($rest)*);
    };
    (@raw_tool [$($field:tt)*] $key:ident $doc:literal $($rest:tt)*) => {
        raw_sections!(@raw_tool [$($field)* #[doc = $doc] pub(super) $key: Option<crate::settings::schema::Scalar>,] $($rest)*);
    };
    (@raw_tool [$($field:tt)*]) => {
        /// Per-tool overrides, one section per tool name (`[tools.hello]`): the keys
        /// of `[limits]` but `max_timeout`, which is a ceiling for every tool, plus
        /// `env` and `disabled`. A limit set here is the operator's decision about
        /// this tool: it beats the environment, `[limits]`, and the timeout the tool
        /// asks for itself; only `run` flags beat it. Overrides apply to calls, not to
        /// discovery probes.
        #[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct RawTool {
            $($field)*
            /// `{ allow = [...], set = { ... } }`: `allow` replaces `[env] allow` for
            /// this tool; `set` is laid over `[env] set` key by key.
            pub(super) env: Option<crate::settings::schema::RawEnv>,
            /// The network of this tool, as `[sandbox] network` (a list grants those destinations).
            pub(super) network: Option<crate::settings::schema::Grant>,
            /// The filesystem of this tool, as `[sandbox] filesystem` (a list grants those paths).
            pub(super) filesystem: Option<crate::settings::schema::Grant>,
            /// The system-call filter of this tool, as `[sandbox] syscalls`.
            pub(super) syscalls: Option<crate::settings::schema::Scalar>,
            /// Paths hidden from this tool on top of `[sandbox] read_hide`.
            pub(super) read_hide: Option<Vec<String>>,
            /// Paths taken out of this tool's masks on top of `[sandbox] read_reveal`.
            pub(super) read_reveal: Option<Vec<String>>,
            /// `true` denies the tool, like naming it in `[policy] disabled`.
            pub(super) disabled: Option<bool>,
            /// The secrets this tool's calls receive, each defined by a `[secrets.NAME]`, e.g.
            /// `["GITHUB_TOKEN"]`: each as an environment variable of its name. Only a hand-written
            /// tool of this name receives them, never a generated one. Default: none.
            pub(super) secrets: Option<Vec<String>>,
        }
    };
    ({} $(
        $(#[doc = $doc:literal])*
        $key:ident: $kind:ident, loosens: $loosens:ident, in: $in:ident $(($default:expr))?,
            tool: $tool:tt, env: $env:tt, doctor: $rank:literal;
    )*) => {
        /// The resource limits of every call. What enforces each one depends on the
        /// containment backend (see `docs/operators.md`). Precedence for one call,
        /// highest first: `run` flags, `[tools.NAME]`, environment variables,
        /// `[limits]`, defaults.
        #[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct RawLimits {
            $($(#[doc = $doc])* pub(super) $key: Option<crate::settings::schema::Scalar>,)*
        }

        raw_sections!(@raw_tool [] $($key $tool)*);
    };
}

#[cfg(test)]
pub(super) use raw_sections;

toolsmith_registry::with_limit_keys! { raw_sections {} }

/// The JSON Schema of the config file, derived from [`RawFile`]: the description of every
/// section and key is its doc comment.
pub(crate) fn config_schema() -> serde_json::Value {
    schemars::schema_for!(RawFile).to_value()
}

/// The config files are TOML. The user config,
/// `$TOOLSMITH_HOME/config.toml` (default `~/.config/toolsmith/config.toml`),
/// is read first; above it comes `--config FILE`, else `$TOOLSMITH_CONFIG`,
/// else the project's `./.toolsmith/config.toml` if it exists and the user
/// trusts the project (`toolsmith trust`). A trusted project config can only
/// tighten what the user config and the defaults set, unless the user config
/// says `[trust] project_may_loosen = true`; a file named with `--config` or
/// `$TOOLSMITH_CONFIG` is the user's own and is not restricted. Every key is
/// optional. Unknown keys and bad values are errors that name the key, so a
/// typo never falls back to a default silently. Flags beat `TOOLSMITH_*`
/// environment variables, which beat the project (or named) file, which
/// beats the user file, which beats the defaults; `toolsmith doctor` shows
/// every effective value and where it came from.
///
/// Durations are written `500ms`, `30s`, `2m`, `1h` (a plain number is
/// seconds); sizes `64KiB`, `512MiB`, `1GiB` (powers of 1024) or `10MB`
/// (powers of 1000), a plain number being bytes; a limit may also be
/// `"unlimited"`.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    #[serde(default)]
    pub(super) limits: RawLimits,
    #[serde(default)]
    pub(super) env: RawEnv,
    #[serde(default)]
    pub(super) executor: RawExecutor,
    #[serde(default)]
    pub(super) policy: RawPolicy,
    #[serde(default)]
    pub(super) sandbox: RawSandbox,
    #[serde(default)]
    pub(super) tools: BTreeMap<String, RawTool>,
    #[serde(default)]
    pub(super) audit: RawAudit,
    #[serde(default)]
    pub(super) discovery: RawDiscovery,
    #[serde(default)]
    pub(super) generator: RawGenerator,
    #[serde(default)]
    pub(super) trust: RawTrust,
    #[serde(default)]
    pub(super) secrets: BTreeMap<String, RawSecret>,
}

/// A secret, defined once by the operator (`[secrets.GITHUB_TOKEN]`) and delivered only to
/// the tools granted it (`[tools.NAME] secrets = ["GITHUB_TOKEN"]`), as an environment
/// variable of the section's name. Exactly one of `env`, `file` and `command`. Read only
/// from the user config (or a file named with `--config`/`$TOOLSMITH_CONFIG`): a project
/// config that defines or grants a secret is reported and ignored. See docs/security.md,
/// "Secrets".
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSecret {
    /// A variable of toolsmith's environment, read once at start; it is then removed from
    /// the environment every other tool could receive through `[env] allow`.
    pub(super) env: Option<String>,
    /// A file read at each call (a regular file of at most 64 KiB, never through a
    /// symbolic link); one trailing newline is trimmed. Relative to this file's directory.
    pub(super) file: Option<PathBuf>,
    /// A command run at each call, as the operator's own (unsandboxed, with toolsmith's
    /// environment, a 10 s timeout), e.g. `["gh", "auth", "token"]`; its stdout, one trailing
    /// newline trimmed, is the value. Nothing is cached.
    pub(super) command: Option<Vec<String>>,
}

/// Which project directories toolsmith may read without `toolsmith trust`,
/// and how much a trusted project config may change. Read only from the user
/// config and from a file named with `--config` or `$TOOLSMITH_CONFIG`; in a
/// project config this section is a problem and is ignored. See
/// docs/security.md, "Project trust".
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTrust {
    /// Directories whose project layer is trusted, with every directory below
    /// them, whatever their config says (for CI, e.g. `["/builds"]`).
    /// Relative to this file's directory; `~/` is the home directory.
    /// Default: none.
    pub(super) paths: Option<Vec<PathBuf>>,
    /// Whether a trusted project config may loosen the sandbox, limits,
    /// environment and policy this file and the defaults set. Default:
    /// `false`: a loosening value is reported as a problem naming the key,
    /// and the stricter value applies.
    pub(super) project_may_loosen: Option<bool>,
}

/// Where `generate`, `new` and the MCP `custom_tool` write. Scaffolded
/// drafts go to `<project>/.toolsmith/drafts`; templates in
/// `$TOOLSMITH_HOME/templates` replace the embedded ones (see
/// docs/generator.md).
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGenerator {
    /// The directory generated tools go to, relative to the config file's
    /// directory. Default: `<project>/.toolsmith/tools`, the project layer.
    pub(super) tools_dir: Option<PathBuf>,
    /// Hand-written tools a `custom_tool` request may replace (`"replace": true`) or shadow
    /// from another layer, e.g. `["deploy"]`: the operator's consent. Without it only tools
    /// the generator wrote can be replaced. A project config cannot add names to the user's.
    pub(super) may_replace: Option<Vec<String>>,
    /// The network of generated tools, as `[sandbox] network`: what a generated tool
    /// declares (its tests' destinations) is a declaration, never a grant, so that a
    /// prompt-injected request cannot open a way out. Default: `"none"` (`"any"` under
    /// `[sandbox] profile = "compat"`).
    pub(super) network: Option<Grant>,
}

/// Which tools may be listed and called. A tool policy denies is never
/// listed by `list` (but `list --all`) or `serve`, and calling it is
/// `POLICY_DENIED` without starting anything.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    /// Tool names that are never listed or called, e.g. `["deploy"]`.
    pub(super) disabled: Option<Vec<String>>,
    /// When set, only these tools are listed and called (`[]` admits none).
    pub(super) allowed: Option<Vec<String>>,
    /// `plan` admits only tools that declare `read_only: true`; `unattended`
    /// admits only tools whose approval is `never`. Default: no profile.
    /// Environment: `TOOLSMITH_PROFILE`; flag: `--profile` (`none` lifts it).
    pub(super) profile: Option<String>,
}

/// `[sandbox]`: what every tool's calls may reach, before `[tools.NAME]`.
/// A tool's own declaration (`"sandbox"` in its description, or manifest
/// frontmatter) can only tighten this, never loosen it.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSandbox {
    /// The defaults the rest of this section starts from: `"default"` (least privilege:
    /// `filesystem = "project"`, network only to what each tool declares, public addresses
    /// only, through toolsmith's egress proxy) or `"compat"` (toolsmith before issue 23: the
    /// user's filesystem and the host's network, for tools written for a peer that expect
    /// the whole machine, and without the credential read masks: toolsmith's own state stays
    /// hidden; `toolsmith doctor` warns about it). Default: `"default"`.
    pub(super) profile: Option<String>,
    /// `"none"` (alias `"deny"`: a network namespace with loopback down; the call
    /// fails closed with `POLICY_DENIED` where the kernel refuses one),
    /// `"deny-if-possible"` (runs without it there, and says so in the envelope),
    /// `"any"` (alias `"allow"`: the host's network), or a list of destinations reached
    /// through toolsmith's egress proxy: `"api.github.com"`, `"api.github.com:443"`,
    /// `"*.githubusercontent.com"`, `"127.0.0.1:8080"`, `"10.0.0.0/8"`, `"[::1]:8080"`,
    /// `"unix:/run/postgresql/.s.PGSQL.5432"`. Default: what each tool declares, public
    /// addresses only, through the proxy; nothing for a tool that declares nothing.
    pub(super) network: Option<Grant>,
    /// `"full"`, `"project"` (writes only below the project directory and a
    /// private temporary directory), `"read-only"` (only the private temporary
    /// directory), `"project-if-possible"`/`"read-only-if-possible"`, or a list of
    /// absolute writable paths (Landlock required). Default: `"project"`.
    pub(super) filesystem: Option<Grant>,
    /// `"filter"` (default: toolsmith's seccomp filter, listed in
    /// docs/security.md; the call fails closed with `POLICY_DENIED` where the
    /// kernel cannot install it), `"filter-if-possible"` (runs without it
    /// there, and says so in the envelope) or `"unfiltered"` (for a tool that
    /// needs namespaces or another denied call, or ptrace outside a private PID namespace).
    pub(super) syscalls: Option<Scalar>,
    /// For a toolsmith run as root: the identity tools run as, `"UID:GID"`,
    /// `"UID"` or a user name (its primary group), with no supplementary
    /// group. Files tools write belong to it, so the project must be
    /// writable by it. Refused when toolsmith is not root. Default: root's
    /// uid, without any capability.
    pub(super) user: Option<Scalar>,
    /// Paths hidden from every tool on top of the default masks (absolute or `~/...`):
    /// a directory shows empty, a file empty, neither writable. Merged with the user's list.
    pub(super) read_hide: Option<Vec<String>>,
    /// Paths taken out of the default masks (absolute or `~/...`), e.g. `["~/.npmrc"]`;
    /// toolsmith's own state cannot be revealed.
    pub(super) read_reveal: Option<Vec<String>>,
    /// Refused: a secret is granted to a tool (`[tools.NAME] secrets`), never to every tool.
    #[schemars(skip)]
    pub(super) secrets: Option<Vec<String>>,
}

/// The audit log: one JSON line per call (time, tool, the SHA-256 of the
/// arguments' canonical JSON, outcome, duration, exit code or signal,
/// backend), appended with `O_APPEND` so concurrent toolsmith processes never
/// interleave. The arguments themselves are never logged.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAudit {
    /// The log file, relative to this config file's directory. Default: no
    /// audit log. A log that cannot be opened stops the call before anything
    /// runs (status 2).
    pub(super) path: Option<PathBuf>,
}

/// Where tools are found, on top of the default layers (system, user,
/// project). `--tools-dir` replaces all of them.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDiscovery {
    /// Extra tool directories, each a layer above the project's, in order
    /// (a later one wins a name). Relative to this config file's directory;
    /// `~/` is the home directory. A missing one is a problem. Default: none.
    pub(super) dirs: Option<Vec<PathBuf>>,
    /// Also read Kodelet's, ikigai's and Nanocoder's tool directories
    /// (`~/.kodelet/tools`, `~/.ikigai/tools`, `~/.config/nanocoder/tools`,
    /// and the project's `kodelet-tools`, `.kodelet/tools`, `.ikigai/tools`,
    /// `.nanocoder/tools`) and their bundles' `tools/` folders (Kodelet's
    /// plugins `.kodelet/plugins/*/tools`, Nanocoder's skills
    /// `.nanocoder/skills/*/tools` and `~/.config/nanocoder/skills/*/tools`),
    /// each just below toolsmith's directory of the same scope, in the
    /// peer's own order. Default: `false`.
    pub(super) peers: Option<bool>,
    /// Reuse the probe results of unchanged tool files
    /// (`$XDG_CACHE_HOME/toolsmith/discovery.json`). Default: `true`; the
    /// flag `--no-cache` turns it off for one command.
    pub(super) cache: Option<bool>,
}

/// The environment of tool processes: nothing of toolsmith's own
/// environment reaches a tool unless `allow` names it.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEnv {
    /// The variables passed through from toolsmith's environment. Default:
    /// `["PATH", "HOME", "USER", "LANG"]`; a list replaces it.
    pub(super) allow: Option<Vec<String>>,
    /// Variables set for every tool, e.g. `{ LC_ALL = "C" }`. Default: none.
    pub(super) set: Option<BTreeMap<String, String>>,
}

/// How tool processes are run.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExecutor {
    /// The containment backend: `auto` (the strongest this kernel allows:
    /// `cgroup`, then `pidns`, `subreaper`, `pgroup`), or one of those to
    /// pin it (an error if the kernel does not allow it). Default: `auto`.
    /// Environment: `TOOLSMITH_BACKEND`.
    pub(super) backend: Option<Scalar>,
    /// The most tool processes running at once; further calls wait. Default:
    /// 4 per core for `serve`, unlimited otherwise. Environment:
    /// `TOOLSMITH_MAX_CONCURRENT`.
    pub(super) max_concurrent: Option<Scalar>,
}
